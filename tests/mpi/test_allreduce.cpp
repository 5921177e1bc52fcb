// Cross-rank reductions (graphs/allreduce.hpp) against MPI_Allreduce called directly on the same
// data: the ring allreduce, the parameter-server path (aggregate + distribute) and native
// mpi_allreduce ops, for odd sizes, sizes below the number of ranks, several dimensions and a
// large buffer. Inputs are small integers, so every summation order gives the exact sum and the
// comparison is equality. Also: runs repeat bit for bit, later runs see new inputs, every rank
// ends with the same bits, and non-integer data gives bit-identical results on every rank.
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "dispatcher/emulated_devices.hpp"
#include "graphs/allreduce.hpp"
#include "graphs/copies.hpp"
#include "mpi_test.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"

using namespace purine;
using namespace purine::mpitest;

namespace {

// kRing: ring_allreduce as data_parallel calls it (the exchange below its threshold, direct
// steps above); kRingOnly (the ring's steps), kDirect and kExchange force one way at every size.
// The machine steps pretend the ranks are on machines: in pairs (0 0 1 ...; in segments), dealt
// in turn (0 1 0 ...; rank 0's machine joins the ring's end to its start), or rank 0 alone.
enum class Kind {
  kRing,
  kRingOnly,
  kRingSegmented,
  kDirect,
  kExchange,
  kParameterServer,
  kMpi,
  kMachinesPaired,
  kMachinesDealt,
  kMachinesFirstAlone
};

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kRing:
      return "ring";
    case Kind::kRingOnly:
      return "ringonly";
    case Kind::kRingSegmented:
      return "ringsegments";
    case Kind::kDirect:
      return "direct";
    case Kind::kExchange:
      return "exchange";
    case Kind::kParameterServer:
      return "ps";
    case Kind::kMpi:
      return "mpi";
    case Kind::kMachinesPaired:
      return "machinespaired";
    case Kind::kMachinesDealt:
      return "machinesdealt";
    case Kind::kMachinesFirstAlone:
      return "machinesfirstalone";
  }
  return "?";
}

// One input blob "<prefix>in<r>" per rank r, at Location::cpu(r).
std::vector<Blob*> add_parts(Graph& g, const std::string& prefix, const Shape& shape) {
  std::vector<Blob*> parts;
  for (int r = 0; r < size(); ++r) {
    Graph::Placement placement(g, Location::cpu(r));
    parts.push_back(g.add_blob(prefix + "in" + std::to_string(r), shape));
  }
  return parts;
}

// Machine steps with rank r on machine `machine(r)`, in segments of `segment_bytes`.
template <typename Machine>
RingOptions machine_steps(Machine machine, int64_t segment_bytes = -1) {
  RingOptions options{0, RingSteps::kMachines, segment_bytes, {}};
  for (int r = 0; r < size(); ++r) options.machine_of_rank.push_back(machine(r));
  return options;
}

// The sum of `parts` at every part's location, by `kind`, under the scope `name`.
std::vector<Blob*> add_reduction(Graph& g, Kind kind, const std::string& name,
                                 const std::vector<Blob*>& parts) {
  switch (kind) {
    case Kind::kRing:
      return ring_allreduce(g, name, parts);
    case Kind::kRingOnly:
      return ring_allreduce(g, name, parts, {0, RingSteps::kRing, 0});
    case Kind::kRingSegmented:  // segments of 1000 bytes: uneven, several per chunk
      return ring_allreduce(g, name, parts, {0, RingSteps::kRing, 1000});
    case Kind::kDirect:
      return ring_allreduce(g, name, parts, {0, RingSteps::kDirect, 0});
    case Kind::kExchange:
      return exchange_allreduce(g, name, parts);
    case Kind::kMachinesPaired:
      return ring_allreduce(g, name, parts, machine_steps([](int r) { return r / 2; }, 1000));
    case Kind::kMachinesDealt:
      return ring_allreduce(g, name, parts, machine_steps([](int r) { return r % 2; }));
    case Kind::kMachinesFirstAlone:
      return ring_allreduce(g, name, parts, machine_steps([](int r) { return r == 0 ? 0 : 1; }));
    case Kind::kMpi:
      return mpi_allreduce(g, name, parts);
    case Kind::kParameterServer: {
      std::vector<Location> locations;
      for (Blob* b : parts) locations.push_back(b->location());
      Blob* total = (parts >> g.add<Aggregate>(name, Location::cpu(0))).top(0);
      return (B{total} >> g.add<Distribute>(name + "::distribute", locations)).top();
    }
  }
  return {};
}

// This rank's input: small integers in [-8, 8], different per rank and index.
std::vector<float> integer_input(int64_t count) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = static_cast<float>((rank() * 131 + i * 7) % 17 - 8);
  return v;
}

// This rank's input with rounding: no two summation orders need to agree.
std::vector<float> real_input(int64_t count) {
  std::vector<float> v(count);
  for (int64_t i = 0; i < count; ++i)
    v[i] = static_cast<float>(std::sin(0.37 * i + 1.3 * rank()) * 1000.0 / 3.0);
  return v;
}

std::vector<float> mpi_sum(const std::vector<float>& input) {
  std::vector<float> out(input.size());
  MPI_Allreduce(input.data(), out.data(), static_cast<int>(input.size()), MPI_FLOAT, MPI_SUM,
                MPI_COMM_WORLD);
  return out;
}

void set_input(Blob* blob, const std::vector<float>& values) {
  std::copy(values.begin(), values.end(), blob->tensor().mutable_data());
}

std::vector<float> doubled(std::vector<float> v) {
  for (float& x : v) x *= 2;
  return v;
}

struct Outcome {
  std::string error;  // what this rank's build or runs threw, or ""
  std::vector<float> first, second, third;
};

// A name prefix unique to (test, kind, shape). Vertex names make the MPI tags, so graphs of
// different tests must not share them: after a failure, messages that no receive took would
// otherwise be taken by the next graph's receives (wrong data, or MPI_ERR_TRUNCATE).
std::string unique_prefix(const std::string& test, Kind kind, const Shape& shape) {
  std::string name = test + "_" + kind_name(kind);
  for (int64_t d : shape.dims()) name += "_" + std::to_string(d);
  return name;
}

// Builds the reduction of `shape` by `kind` and runs it three times: twice on `input`, then on
// 2 * input. Collective-free, so it may fail on one rank alone: the others then fail by stall.
Outcome run_reduction(const std::string& test, Kind kind, const Shape& shape,
                      const std::vector<float>& input) {
  Outcome out;
  out.error = run_and_catch([&] {
    Graph g("allreduce");
    const std::string prefix = unique_prefix(test, kind, shape);
    std::vector<Blob*> parts = add_parts(g, prefix + "_", shape);
    std::vector<Blob*> sums = add_reduction(g, kind, prefix, parts);
    Runnable run(g, run_options());
    Blob* in = parts[rank()];
    Blob* sum = sums[rank()];
    set_input(in, input);
    run.run();
    out.first = values_of(sum->tensor());
    run.run();
    out.second = values_of(sum->tensor());
    set_input(in, doubled(input));
    run.run();
    out.third = values_of(sum->tensor());
  });
  return out;
}

void check_kind(Kind kind) {
  const std::vector<Shape> shapes = {{1},       {2},          {3},      {7},       {1001},   {2, 3},
                                     {3, 5, 7}, {4, 1, 3, 2}, {17, 19}, {1, 1, 1}, {4 << 20}};
  for (const Shape& shape : shapes) {
    INFO("rank " << rank() << " of " << size() << ", " << kind_name(kind) << " allreduce of "
                 << shape);
    const std::vector<float> input = integer_input(shape.count());
    const std::vector<float> expected = mpi_sum(input);  // before any graph runs
    Outcome out = run_reduction("integers", kind, shape, input);
    const std::vector<uint64_t> hashes = allgather(hash_of(out.first));
    CHECK(out.error == "");
    if (!out.error.empty()) continue;
    CHECK(mismatch(out.first, expected) == "");
    CHECK(mismatch(out.second, out.first) == "");         // the second run repeats the first
    CHECK(mismatch(out.third, doubled(expected)) == "");  // the third sees the new input
    for (int r = 1; r < size(); ++r) CHECK(hashes[r] == hashes[0]);
  }
  barrier();
}

}  // namespace

TEST_CASE("ring allreduce equals MPI_Allreduce", "[mpi][allreduce]") { check_kind(Kind::kRing); }

TEST_CASE("ring allreduce without the small-buffer exchange equals MPI_Allreduce",
          "[mpi][allreduce]") {
  check_kind(Kind::kRingOnly);
}

TEST_CASE("segmented ring allreduce equals MPI_Allreduce", "[mpi][allreduce]") {
  check_kind(Kind::kRingSegmented);
}

TEST_CASE("ring allreduce by direct steps equals MPI_Allreduce", "[mpi][allreduce]") {
  check_kind(Kind::kDirect);
}

TEST_CASE("exchange allreduce equals MPI_Allreduce", "[mpi][allreduce]") {
  check_kind(Kind::kExchange);
}

TEST_CASE("ring allreduce by machine steps equals MPI_Allreduce", "[mpi][allreduce]") {
  for (Kind kind : {Kind::kMachinesPaired, Kind::kMachinesDealt, Kind::kMachinesFirstAlone})
    check_kind(kind);
}

TEST_CASE("exchange, direct and machine steps and segments give the ring's bits at any size",
          "[mpi][allreduce]") {
  // Sizes below the ranks, odd sizes, one below kExchangeMaxBytes and one above it (at every
  // world size), so that the default path takes the exchange for some and direct steps for others.
  const int64_t above = kExchangeMaxBytes / static_cast<int64_t>(sizeof(float)) + 3;
  const std::vector<Shape> shapes = {{2}, {7}, {1001}, {3, 333}, {above}};
  for (const Shape& shape : shapes) {
    INFO("rank " << rank() << " of " << size() << ", " << shape);
    const std::vector<float> input = real_input(shape.count());
    const std::vector<float> expected = mpi_sum(input);
    std::vector<Outcome> outs;
    for (Kind kind :
         {Kind::kRingOnly, Kind::kExchange, Kind::kRing, Kind::kRingSegmented, Kind::kDirect,
          Kind::kMachinesPaired, Kind::kMachinesDealt, Kind::kMachinesFirstAlone}) {
      outs.push_back(run_reduction("threshold", kind, shape, input));
      outs.back().first.resize(shape.count());  // keeps the gather collective after a failure
    }
    const std::vector<std::vector<float>> everyone = allgather(outs[1].first);
    for (const Outcome& out : outs) CHECK(out.error == "");
    bool all_ran = true;
    for (const Outcome& out : outs) all_ran = all_ran && out.error.empty();
    REQUIRE(all_ranks(all_ran));
    CHECK(mismatch(outs[1].first, outs[0].first) == "");  // the exchange has the ring's bits
    CHECK(mismatch(outs[2].first, outs[0].first) == "");
    CHECK(mismatch(outs[3].first, outs[0].first) == "");  // and so have segments
    CHECK(mismatch(outs[4].first, outs[0].first) == "");  // and direct steps
    for (size_t k = 5; k < outs.size(); ++k)              // and machine steps
      CHECK(mismatch(outs[k].first, outs[0].first) == "");
    for (const Outcome& out : outs) {
      CHECK(mismatch(out.second, out.first) == "");  // reruns repeat bit for bit
      CHECK(mismatch(out.third, out.first) != "");   // and see the new input
    }
    for (int r = 1; r < size(); ++r) CHECK(mismatch(everyone[r], everyone[0]) == "");
    for (size_t i = 0; i < expected.size(); ++i)
      if (std::abs(outs[1].first[i] - expected[i]) > 1e-3f * (1 + std::abs(expected[i])))
        FAIL_CHECK("element " << i << ": " << outs[1].first[i] << " vs MPI " << expected[i]);
  }
  barrier();
}

TEST_CASE("parameter server aggregate + distribute equals MPI_Allreduce", "[mpi][allreduce]") {
  check_kind(Kind::kParameterServer);
}

TEST_CASE("mpi_allreduce ops equal MPI_Allreduce", "[mpi][allreduce]") { check_kind(Kind::kMpi); }

TEST_CASE("non-integer sums are bit-identical on every rank and close to MPI_Allreduce",
          "[mpi][allreduce]") {
  for (Kind kind : {Kind::kRing, Kind::kRingOnly, Kind::kDirect, Kind::kExchange,
                    Kind::kParameterServer, Kind::kMpi}) {
    INFO("rank " << rank() << " of " << size() << ", " << kind_name(kind));
    const Shape shape{1001};
    const std::vector<float> input = real_input(shape.count());
    const std::vector<float> expected = mpi_sum(input);
    Outcome out = run_reduction("reals", kind, shape, input);
    out.first.resize(shape.count());  // empty after a failure; keeps the gather collective
    const std::vector<std::vector<float>> everyone = allgather(out.first);
    CHECK(out.error == "");
    if (!out.error.empty()) continue;
    CHECK(mismatch(out.second, out.first) == "");
    for (int r = 1; r < size(); ++r) CHECK(mismatch(everyone[r], everyone[0]) == "");
    for (size_t i = 0; i < expected.size(); ++i)
      if (std::abs(out.first[i] - expected[i]) > 1e-3f * (1 + std::abs(expected[i])))
        FAIL_CHECK("element " << i << ": " << out.first[i] << " vs MPI " << expected[i]);
  }
  barrier();
}

TEST_CASE("one graph holding ring, parameter-server and several mpi_allreduce reductions",
          "[mpi][allreduce]") {
  INFO("rank " << rank() << " of " << size());
  // Several collectives in one graph must start in the same order on every rank; ring and PS
  // copies share the MPI executor with them.
  const std::vector<Shape> shapes = {{5}, {1}, {64, 3}, {2}};
  std::vector<std::vector<float>> inputs, expected;
  for (size_t k = 0; k < shapes.size(); ++k) {
    std::vector<float> v = integer_input(shapes[k].count());
    for (float& x : v) x += static_cast<float>(k);
    expected.push_back(mpi_sum(v));
    inputs.push_back(std::move(v));
  }
  std::vector<std::vector<std::vector<float>>> got;  // [shape][kind]
  const std::string error = run_and_catch([&] {
    Graph g("combined");
    std::vector<std::vector<Blob*>> results(shapes.size());
    std::vector<Blob*> mine;
    for (size_t k = 0; k < shapes.size(); ++k) {
      const std::string prefix = "combined" + std::to_string(k) + "_";
      std::vector<Blob*> parts = add_parts(g, prefix, shapes[k]);
      mine.push_back(parts[rank()]);
      for (Kind kind : {Kind::kRing, Kind::kParameterServer, Kind::kMpi})
        results[k].push_back(add_reduction(g, kind, prefix + kind_name(kind), parts)[rank()]);
    }
    Runnable run(g, run_options());
    for (size_t k = 0; k < shapes.size(); ++k) set_input(mine[k], inputs[k]);
    run.run();
    for (size_t k = 0; k < shapes.size(); ++k) {
      got.emplace_back();
      for (Blob* b : results[k]) got.back().push_back(values_of(b->tensor()));
    }
  });
  CHECK(error == "");
  REQUIRE(all_ranks(error.empty()));
  for (size_t k = 0; k < shapes.size(); ++k)
    for (const auto& values : got[k]) CHECK(mismatch(values, expected[k]) == "");
  barrier();
}

TEST_CASE("one (emulated) GPU per rank: every way of the ring gives the CPU parts' bits",
          "[mpi][allreduce]") {
  // Each rank's part on its GPU: chunks cross ranks through host memory, and a rank passing a
  // sum on sends the host copy it received (graphs/allreduce.cpp all_gather).
  INFO("rank " << rank() << " of " << size());
  dispatch::ScopedEmulatedDevices emulated(1);
  const Shape shape{1001};
  const std::vector<float> input = real_input(shape.count());
  const std::vector<RingOptions> ways = {{0, RingSteps::kRing, 0},
                                         {0, RingSteps::kRing, 1000},
                                         {0, RingSteps::kDirect, 0},
                                         machine_steps([](int r) { return r / 2; }),
                                         machine_steps([](int r) { return r % 2; }, 1000)};
  std::vector<std::vector<float>> got;
  const std::string error = run_and_catch([&] {
    for (size_t w = 0; w < ways.size(); ++w) {
      for (bool gpu : {false, true}) {
        Graph g("gpu_ring");
        const std::string prefix = "gpuring" + std::to_string(w) + (gpu ? "g" : "c");
        std::vector<Blob*> parts;
        for (int r = 0; r < size(); ++r) {
          Graph::Placement placement(g, gpu ? Location::gpu(0, r) : Location::cpu(r));
          parts.push_back(g.add_blob(prefix + "_in" + std::to_string(r), shape));
        }
        const std::vector<Blob*> sums = ring_allreduce(g, prefix, parts, ways[w]);
        Runnable run(g, run_options());
        set_input(parts[rank()], input);
        run.run();
        got.push_back(values_of(sums[rank()]->tensor()));
      }
    }
  });
  CHECK(error == "");
  REQUIRE(all_ranks(error.empty()));
  for (size_t k = 0; k < got.size(); ++k) CHECK(mismatch(got[k], got[0]) == "");
  const std::vector<std::vector<float>> everyone = allgather(got[1]);
  for (int r = 1; r < size(); ++r) CHECK(mismatch(everyone[r], everyone[0]) == "");
  barrier();
}
