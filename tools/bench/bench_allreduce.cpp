// bench_allreduce: the graph-composed ring allreduce (graphs/allreduce.hpp: reshape, split,
// cross-rank copy, sum and concat ops, run by a Runnable) against MPI_Allreduce called directly on
// the same buffers, in the same processes and the same run. Launch it on 2 to 4 ranks:
//
//   mpirun --oversubscribe -np 2 build/tools/bench_allreduce [--min_bytes=1024]
//       [--max_bytes=67108864] [--factor=4] [--reps=15] [--burst=4] [--stat=median|min]
//       [--warmup=3] [--variants] [--segment_bytes=262144] [--profile] [--timeline_bytes=N
//       [--timeline_pipe]] [--exchange_max_bytes=65536] [--ring_steps=auto|direct|ring|machines]
//       [--ways [--machines=0,0,1,1]] [--in_run=K]
//
// For every size (float32 buffers, --min_bytes to --max_bytes by --factor) rank 0 prints the
// median (or --stat=min: the fastest) of --reps runs (after --warmup untimed calls) of the slowest
// rank's time per call, each run --burst calls back to back (as in a training step, where one
// allreduce follows another; a lone call would also time waking the executor threads), the bus
// bandwidth 2(N-1)/N * bytes / time (what each rank sends, per second) and ring/MPI, the ratio of
// the bandwidths (1.00x: as fast as MPI). The methods' repetitions are interleaved, so a noisy
// moment hurts them alike. Every result is checked against the exact sum.
//
// --variants (default on) adds four columns that locate the ring's overhead:
//   graph-mpi:  a Runnable over one "mpi_allreduce" op (MPI_Iallreduce polled by the MPI
//               executor): MPI's own reduction plus the cost of running a graph;
//   ring-pipe:  the ring alone (never the exchange or direct steps) with every chunk cut into
//               segments of --segment_bytes at any number of ranks (the ring column: from
//               graphs/allreduce.hpp's kRingSegmentMinRanks on), each with its own copy and sum
//               ops, so transfers and sums of different segments overlap; --segment_bytes=0: whole
//               chunks;
//   mpi-ring:   the same ring (same chunks, same order) hand-written with MPI_Sendrecv and a sum
//               loop, no graph: what the algorithm itself reaches on this machine;
//   mpi-ring-g: that hand-written ring in the graph's pattern (every receive posted at the start
//               into its own buffer, every sum into a fresh one, all pending requests tested
//               while waiting): mpi-ring-g vs mpi-ring prices the pattern, ring vs mpi-ring-g
//               the dispatcher.
// --pattern_split (with --variants) adds g-late (mpi-ring-g with each receive posted at its step)
// and g-inplace (its sums into the output in place): against mpi-ring-g, what posting every
// receive up front and summing into fresh buffers each cost.
// --profile prints rank 0's mean busy time per op type in a ring run (over --reps more runs with
// a dispatcher Observer): reshape/split/concat (zero-copy views, so ~0), sum, and the posting of
// sends and receives ("post recv" includes the copy when the message has already arrived: Open
// MPI's shared-memory transport copies it inside MPI_Irecv/MPI_Test); "rest" is the wall time
// not spent in any task on rank 0 (waiting for transfers, hand-offs between executors).
// --timeline_bytes=N prints every task start and end of one ring (or --timeline_pipe: ring-pipe)
// run of N bytes, per rank, in microseconds from a common barrier: where a transfer waited.
// --exchange_max_bytes sets ring_allreduce's switch to the one-step exchange for small buffers
// (graphs/allreduce.hpp): 0 never takes it, 1099511627776 always; --ring_steps how it moves
// larger ones (auto: as purine train chooses for the ranks' machines, direct on one machine).
// --ways adds two columns that compare the ways in one run: ring-alone (the ring's steps at every
// size, never the exchange) and direct (direct steps at every size); with --machines (ranks
// pretended on machines, e.g. 0,0,0,0,1,1,1,1: one host standing in for two) a third, machines
// (machine steps of that placement at every size).
// --in_run=K adds in-run: K independent ring allreduces of the size in one graph run, per
// allreduce (the run's time / K). A training step reduces its buckets so, inside one run, while
// the ring column pays a whole run (waking and handing over between threads) per allreduce.
#include <gflags/gflags.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/error.hpp"
#include "dispatcher/observer.hpp"
#include "graphs/allreduce.hpp"
#include "purine/graph.hpp"
#include "purine/mpi.hpp"
#include "purine/runnable.hpp"
#include "train/options.hpp"
#include "train/ring_steps.hpp"

DEFINE_int64(min_bytes, 1024, "smallest buffer in bytes");
DEFINE_int64(max_bytes, 64 << 20, "largest buffer in bytes");
DEFINE_int32(factor, 4, "size step: each size is this many times the previous");
DEFINE_int32(reps, 15, "timed repetitions per size and method");
DEFINE_string(stat, "median", "statistic of the timed runs to print: median or min");
DEFINE_int32(burst, 4,
             "calls per timed run, back to back as a training step's allreduces are; the run's "
             "time is their mean");
DEFINE_int32(warmup, 3, "untimed repetitions per size and method first");
DEFINE_bool(variants, true, "also time graph-mpi, ring-pipe and mpi-ring (see the header)");
DEFINE_int64(segment_bytes, 256 << 10, "ring-pipe: largest segment in bytes (0: whole chunks)");
DEFINE_int64(timeline_bytes, 0,
             "print every rank's task start/end times in one ring run of this size (0: none)");
DEFINE_bool(timeline_pipe, false, "--timeline_bytes: trace ring-pipe instead of ring");
DEFINE_int64(exchange_max_bytes, purine::kExchangeMaxBytes,
             "ring: reduce by the one-step exchange when each rank would receive at most this many "
             "bytes that way (0: always the ring; graphs/allreduce.hpp)");
DEFINE_string(
    ring_steps, "auto",
    "ring: how chunks move above the exchange's range: direct, ring, machines, or auto as "
    "purine train chooses (graphs/allreduce.hpp, train/ring_steps.hpp)");
DEFINE_bool(ways, false, "also time ring-alone and direct (see the header)");
DEFINE_string(machines, "",
              "pretend rank r runs on machine r of this list (e.g. 0,0,1,1), for machine steps "
              "and --ring_steps=auto; --ways then also times machine steps (default: the ranks' "
              "own machines)");
DEFINE_int32(in_run, 0,
             "K > 0: also time K ring allreduces of each size in one graph run, per allreduce "
             "(see the header)");
DEFINE_bool(pattern_split, false,
            "with --variants, also time mpi-ring-g with receives posted at their step (g-late) "
            "and with sums in place (g-inplace): which part of the graph's pattern costs");
DEFINE_bool(profile, false, "print rank 0's mean busy time per op type in a ring run, per size");

namespace {

using purine::Blob;
using purine::Graph;
using purine::Location;

// The value rank r's element i holds: small integers, so every sum order is exact in float.
float input_value(int rank, int64_t i) { return static_cast<float>(rank + 1 + (i % 7)); }
float expected_sum(int ranks, int64_t i) {
  return static_cast<float>(ranks * (ranks + 1) / 2 + ranks * (i % 7));
}

void fill_input(float* data, int64_t count, int rank) {
  for (int64_t i = 0; i < count; ++i) data[i] = input_value(rank, i);
}

// Throws (ends the job) if `data` is not the exact sum; `offset` is the index of data[0].
void check_sum(const char* method, const float* data, int64_t count, int ranks,
               int64_t offset = 0) {
  for (int64_t i = 0; i < count; ++i) {
    if (data[i] != expected_sum(ranks, offset + i))
      throw purine::Error(purine::str(method, ": element ", offset + i, " is ", data[i],
                                      ", expected ", expected_sum(ranks, offset + i)));
  }
}

// The chunk sizes ring_allreduce uses: count / n, the first count % n one larger.
std::vector<int64_t> chunk_sizes(int64_t count, int n) {
  std::vector<int64_t> sizes(n);
  for (int c = 0; c < n; ++c) sizes[c] = count / n + (c < count % n ? 1 : 0);
  return sizes;
}

// One way of summing a buffer over all ranks: prepared once per size, then run repeatedly.
class Method {
 public:
  virtual ~Method() = default;
  virtual void run() = 0;
  // Throws if this rank's result is not the exact sum.
  virtual void check() = 0;
};

// Runs a graph that spans every rank; `results` are this rank's output blobs, in order.
class GraphMethod : public Method {
 public:
  GraphMethod(std::unique_ptr<Graph> graph, std::vector<Blob*> inputs, std::vector<Blob*> results,
              const char* name, int64_t count)
      : graph_(std::move(graph)),
        inputs_(inputs),
        results_(std::move(results)),
        name_(name),
        count_(count),
        rank_(purine::mpi_world_rank()),
        ranks_(purine::mpi_world_size()) {
    runnable_ = std::make_unique<purine::Runnable>(*graph_);
    int64_t offset = 0;
    for (Blob* in : inputs) {
      float* data = in->tensor().mutable_data();
      const int64_t n = in->shape().count();
      for (int64_t i = 0; i < n; ++i) data[i] = input_value(rank_, offset + i);
      offset += n;
    }
  }
  void run() override { runnable_->run(); }
  void check() override {
    int64_t offset = 0;
    for (Blob* out : results_) {
      const int64_t n = out->shape().count();
      check_sum(name_, out->tensor().data(), n, ranks_, offset);
      offset += n;
    }
    if (offset != count_) throw purine::Error(purine::str(name_, ": results cover ", offset));
  }
  purine::Runnable& runnable() { return *runnable_; }
  Graph& graph() { return *graph_; }
  const std::vector<Blob*>& inputs() const { return inputs_; }
  const std::vector<Blob*>& results() const { return results_; }

 private:
  std::unique_ptr<Graph> graph_;
  std::vector<Blob*> inputs_;
  std::vector<Blob*> results_;
  const char* name_;
  int64_t count_;
  int rank_, ranks_;
  std::unique_ptr<purine::Runnable> runnable_;
};

// --ring_steps, auto resolved for the ranks' machines at start-up (run()), and those machines.
purine::RingSteps ring_steps_of_flag = purine::RingSteps::kDirect;
std::vector<int> machine_of_rank;

// The ring's choices as the flags set them.
purine::RingOptions flag_ring_options() {
  return {FLAGS_exchange_max_bytes, ring_steps_of_flag, -1, machine_of_rank};
}

// The product: ring_allreduce over one blob of `count` floats per rank; with `copies` > 1, that
// many independent ones in one graph (a training step's buckets, reduced in one run).
std::unique_ptr<GraphMethod> make_ring(int64_t count, int ranks, int rank,
                                       const purine::RingOptions& options = flag_ring_options(),
                                       const char* name = "ring", int copies = 1) {
  auto g = std::make_unique<Graph>("bench");
  std::vector<Blob*> ins, outs;
  for (int k = 0; k < copies; ++k) {
    const std::string suffix = copies == 1 ? "" : "_" + std::to_string(k);
    std::vector<Blob*> parts;
    for (int r = 0; r < ranks; ++r) {
      Graph::Placement placement(*g, Location::cpu(r), Graph::kCommThread);
      parts.push_back(g->add_blob("grad" + std::to_string(r) + suffix, {count}));
    }
    std::vector<Blob*> sums = purine::ring_allreduce(*g, name + suffix, parts, options);
    ins.push_back(parts[rank]);
    outs.push_back(sums[rank]);
  }
  return std::make_unique<GraphMethod>(std::move(g), ins, outs, name, count * copies);
}

// One "mpi_allreduce" op per rank, run as a graph.
std::unique_ptr<GraphMethod> make_graph_mpi(int64_t count, int ranks, int rank) {
  auto g = std::make_unique<Graph>("bench");
  std::vector<Blob*> parts;
  for (int r = 0; r < ranks; ++r) {
    Graph::Placement placement(*g, Location::cpu(r), Graph::kCommThread);
    parts.push_back(g->add_blob("grad" + std::to_string(r), {count}));
  }
  std::vector<Blob*> sums = purine::mpi_allreduce(*g, "allreduce", parts);
  return std::make_unique<GraphMethod>(std::move(g), std::vector<Blob*>{parts[rank]},
                                       std::vector<Blob*>{sums[rank]}, "graph-mpi", count);
}

// MPI_Allreduce on the ring graph's own input and output tensors.
class DirectMpi : public Method {
 public:
  DirectMpi(const float* in, float* out, int64_t count) : in_(in), out_(out), count_(count) {}
  void run() override {
    MPI_Allreduce(in_, out_, static_cast<int>(count_), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  }
  void check() override { check_sum("mpi", out_, count_, purine::mpi_world_size()); }

 private:
  const float* in_;
  float* out_;
  int64_t count_;
};

// What the hand-written rings share: this rank's input and output, the chunk layout of
// ring_allreduce (chunk c at offsets[c], sizes[c] elements) and the ring's neighbours.
class HandWrittenRing : public Method {
 public:
  HandWrittenRing(int64_t count, const char* name)
      : name_(name),
        count_(count),
        rank_(purine::mpi_world_rank()),
        n_(purine::mpi_world_size()),
        next_((rank_ + 1) % n_),
        prev_((rank_ - 1 + n_) % n_),
        sizes_(chunk_sizes(count, n_)),
        offsets_(n_ + 1, 0),
        in_(count),
        out_(count) {
    for (int c = 0; c < n_; ++c) offsets_[c + 1] = offsets_[c] + sizes_[c];
    fill_input(in_.data(), count, rank_);
  }
  void check() override { check_sum(name_, out_.data(), count_, n_); }

 protected:
  int chunk(int c) const { return ((c % n_) + n_) % n_; }
  int count_of(int c) const { return static_cast<int>(sizes_[c]); }

  const char* name_;
  int64_t count_;
  int rank_, n_, next_, prev_;
  std::vector<int64_t> sizes_, offsets_;
  std::vector<float> in_, out_;
};

// The ring by hand: at reduce-scatter step s rank r sends its running sum of chunk r-s to r+1
// and receives chunk r-s-1 from r-1, which it adds to its own input into the output; then the
// all-gather passes the finished chunks on, in place. No copies beyond the algorithm's.
class HandRing : public HandWrittenRing {
 public:
  explicit HandRing(int64_t count) : HandWrittenRing(count, "mpi-ring"), tmp_(sizes_[0]) {}
  void run() override {
    for (int s = 0; s + 1 < n_; ++s) {
      const int send = chunk(rank_ - s), recv = chunk(rank_ - s - 1);
      const float* src = (s == 0 ? in_.data() : out_.data()) + offsets_[send];
      MPI_Sendrecv(src, count_of(send), MPI_FLOAT, next_, s, tmp_.data(), count_of(recv), MPI_FLOAT,
                   prev_, s, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      const float* mine = in_.data() + offsets_[recv];
      float* dst = out_.data() + offsets_[recv];
      const float* got = tmp_.data();
      for (int64_t i = 0; i < sizes_[recv]; ++i) dst[i] = mine[i] + got[i];
    }
    for (int s = 0; s + 1 < n_; ++s) {
      const int send = chunk(rank_ + 1 - s), recv = chunk(rank_ - s);
      MPI_Sendrecv(out_.data() + offsets_[send], count_of(send), MPI_FLOAT, next_, n_ + s,
                   out_.data() + offsets_[recv], count_of(recv), MPI_FLOAT, prev_, n_ + s,
                   MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
  }

 private:
  std::vector<float> tmp_;
};

// The same ring by hand in the ring graph's pattern: every receive posted at the start into a
// buffer of its own (the graph's receive ops are sources), every sum into a fresh buffer (a sum
// op writes a new blob), every pending request tested while waiting (the executor polls all its
// transfers). Against mpi-ring it prices that pattern without any dispatcher; against ring, the
// dispatcher without the pattern. `post_early` false posts each receive only at its step (as
// MPI_Sendrecv does), `fresh_sums` false sums into the output in place (as mpi-ring does): with
// one of them off, the table prices the other (--pattern_split).
class GraphLikeRing : public HandWrittenRing {
 public:
  GraphLikeRing(int64_t count, const char* name, bool post_early = true, bool fresh_sums = true)
      : HandWrittenRing(count, name),
        post_early_(post_early),
        fresh_sums_(fresh_sums),
        received_(n_, std::vector<float>(sizes_[0])),
        summed_(n_, std::vector<float>(sizes_[0])) {}
  void run() override {
    // Receives of the reduce-scatter at [s], of the all-gather at [n + s]; sends after them.
    std::vector<MPI_Request> pending(4 * n_, MPI_REQUEST_NULL);
    auto post_scatter = [&](int s) {
      MPI_Irecv(received_[s].data(), count_of(chunk(rank_ - s - 1)), MPI_FLOAT, prev_, s,
                MPI_COMM_WORLD, &pending[s]);
    };
    auto post_gather = [&](int s) {
      const int gathered = chunk(rank_ - s);
      MPI_Irecv(out_.data() + offsets_[gathered], count_of(gathered), MPI_FLOAT, prev_, n_ + s,
                MPI_COMM_WORLD, &pending[n_ + s]);
    };
    // In place, the reduce-scatter writes chunks of the output that the all-gather receives
    // into: those receives are posted once it is done (MPI forbids touching a posted buffer).
    const bool gather_early = post_early_ && fresh_sums_;
    for (int s = 0; s + 1 < n_ && post_early_; ++s) {
      post_scatter(s);
      if (gather_early) post_gather(s);
    }
    auto wait_for = [&](int k) {
      while (pending[k] != MPI_REQUEST_NULL) {
        for (MPI_Request& r : pending) {
          int done = 0;
          if (r != MPI_REQUEST_NULL) MPI_Test(&r, &done, MPI_STATUS_IGNORE);
        }
        if (pending[k] != MPI_REQUEST_NULL) std::this_thread::yield();
      }
    };
    const float* sum = nullptr;
    for (int s = 0; s + 1 < n_; ++s) {
      const int send = chunk(rank_ - s), recv = chunk(rank_ - s - 1);
      if (!post_early_) post_scatter(s);
      MPI_Isend(s == 0 ? in_.data() + offsets_[send] : sum, count_of(send), MPI_FLOAT, next_, s,
                MPI_COMM_WORLD, &pending[2 * n_ + s]);
      wait_for(s);
      const float* mine = in_.data() + offsets_[recv];
      const float* got = received_[s].data();
      float* dst = fresh_sums_ ? summed_[s].data() : out_.data() + offsets_[recv];
      for (int64_t i = 0; i < sizes_[recv]; ++i) dst[i] = mine[i] + got[i];
      sum = dst;
    }
    const int owned = chunk(rank_ + 1);
    if (fresh_sums_) std::copy(sum, sum + sizes_[owned], out_.data() + offsets_[owned]);
    // An in-place sum may still be read by the last send: finish the sends first.
    if (!fresh_sums_) MPI_Waitall(n_, pending.data() + 2 * n_, MPI_STATUSES_IGNORE);
    for (int s = 0; s + 1 < n_ && post_early_ && !gather_early; ++s) post_gather(s);
    for (int s = 0; s + 1 < n_; ++s) {
      const int send = chunk(rank_ + 1 - s);
      if (!post_early_) post_gather(s);
      MPI_Isend(out_.data() + offsets_[send], count_of(send), MPI_FLOAT, next_, n_ + s,
                MPI_COMM_WORLD, &pending[3 * n_ + s]);
      wait_for(n_ + s);
    }
    MPI_Waitall(static_cast<int>(pending.size()), pending.data(), MPI_STATUSES_IGNORE);
  }

 private:
  const bool post_early_, fresh_sums_;
  std::vector<std::vector<float>> received_, summed_;
};

// Busy time per op type on this rank, from task start/end events.
class TypeProfile : public purine::dispatch::Observer {
 public:
  explicit TypeProfile(const Graph& graph) {
    for (const auto& op : graph.ops()) type_of_[op->name()] = op->type();
  }
  void on_task_start(const purine::dispatch::TaskEvent& e) override {
    std::lock_guard<std::mutex> lock(mu_);
    start_[e.executor] = e.time;
  }
  void on_task_end(const purine::dispatch::TaskEvent& e) override {
    std::string name = *e.task_name;
    std::string kind;
    const size_t paren = name.find(" (");
    if (paren != std::string::npos) {
      // Cross-rank copies are named "<op> (send to rank R)" / "(receive from rank R)".
      kind = name.compare(paren, 7, " (send ") == 0 ? "post send" : "post recv";
    } else {
      auto it = type_of_.find(name);
      kind = it == type_of_.end() ? "?" : it->second;
    }
    std::lock_guard<std::mutex> lock(mu_);
    busy_[kind] += std::chrono::duration<double>(e.time - start_[e.executor]).count();
  }
  std::map<std::string, double> take() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::move(busy_);
  }

 private:
  std::unordered_map<std::string, std::string> type_of_;
  std::mutex mu_;
  std::map<int, std::chrono::steady_clock::time_point> start_;
  std::map<std::string, double> busy_;
};

// Every task start and end of one run on this rank, for --timeline.
class Timeline : public purine::dispatch::Observer {
 public:
  void on_task_start(const purine::dispatch::TaskEvent& e) override { add(e, "start"); }
  void on_task_end(const purine::dispatch::TaskEvent& e) override { add(e, "end"); }
  // "<us since `origin`> <start|end> <executor> <task>" lines, in time order.
  std::string text(std::chrono::steady_clock::time_point origin) {
    std::lock_guard<std::mutex> lock(mu_);
    std::sort(rows_.begin(), rows_.end(),
              [](const Row& a, const Row& b) { return a.time < b.time; });
    std::string out;
    char buf[64];
    for (const Row& r : rows_) {
      std::snprintf(buf, sizeof buf, "%10.1f us  %-5s ",
                    std::chrono::duration<double, std::micro>(r.time - origin).count(), r.what);
      out += buf + r.executor + "  " + r.task + "\n";
    }
    return out;
  }

 private:
  struct Row {
    std::chrono::steady_clock::time_point time;
    const char* what;
    std::string executor, task;
  };
  void add(const purine::dispatch::TaskEvent& e, const char* what) {
    std::lock_guard<std::mutex> lock(mu_);
    rows_.push_back({e.time, what, *e.executor_name, *e.task_name});
  }
  std::mutex mu_;
  std::vector<Row> rows_;
};

// The slowest rank's mean time per call of `method` over `calls` back-to-back calls, started
// together after a barrier.
double time_once(Method& method, int calls) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int c = 0; c < calls; ++c) method.run();
  double mine = (MPI_Wtime() - start) / calls, slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

// The median or (--stat=min) the fastest of the timed runs.
double statistic(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (FLAGS_stat == "min") return v[0];
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

std::string human_bytes(int64_t bytes) {
  char buf[32];
  if (bytes >= (1 << 20))
    std::snprintf(buf, sizeof buf, "%lld MB", static_cast<long long>(bytes >> 20));
  else if (bytes >= 1024)
    std::snprintf(buf, sizeof buf, "%lld KB", static_cast<long long>(bytes >> 10));
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  return buf;
}

// Bus bandwidth in GB/s: what each rank sends per second in a ring allreduce.
double bus_gbps(int64_t bytes, int ranks, double seconds) {
  return 2.0 * (ranks - 1) / ranks * static_cast<double>(bytes) / seconds / 1e9;
}

int run(int argc, char** argv) {
  purine::MpiContext mpi(&argc, &argv);
  gflags::SetUsageMessage(
      "the graph-composed ring allreduce against MPI_Allreduce, per size (mpirun -np 2 or more)");
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  const int rank = mpi.rank(), ranks = mpi.size();
  const bool leader = rank == 0;
  purine::require(ranks >= 2, "bench_allreduce needs at least 2 ranks; launch it with mpirun -np 2",
                  " (or more)");
  purine::require(FLAGS_min_bytes >= 4 && FLAGS_max_bytes >= FLAGS_min_bytes && FLAGS_factor >= 2,
                  "need 4 <= --min_bytes <= --max_bytes and --factor >= 2");
  purine::require(FLAGS_reps >= 1 && FLAGS_warmup >= 0 && FLAGS_burst >= 1,
                  "need --reps >= 1, --warmup >= 0 and --burst >= 1");
  purine::require(FLAGS_stat == "median" || FLAGS_stat == "min",
                  "--stat must be median or min, got '", FLAGS_stat, "'");
  const std::optional<purine::RingSteps> steps = purine::parse_ring_steps(FLAGS_ring_steps);
  machine_of_rank = FLAGS_machines.empty()
                        ? purine::mpi_machine_of_ranks()
                        : purine::parse_device_list(FLAGS_machines, "--machines");
  purine::require(static_cast<int>(machine_of_rank.size()) == ranks, "--machines lists ",
                  machine_of_rank.size(), " machines for ", ranks, " ranks");
  ring_steps_of_flag = steps ? *steps : purine::choose_ring_steps(machine_of_rank).steps;
  if (leader) {
    double load[3] = {0, 0, 0};
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
      std::fclose(f);
    }
    std::printf(
        "allreduce of float32 buffers on %d ranks; %s of %d runs (slowest rank, mean of %d "
        "back-to-back calls each) after %d warm-up calls; --ring_steps=%s; load average %.2f\n",
        ranks, FLAGS_stat == "min" ? "fastest" : "median", FLAGS_reps, FLAGS_burst, FLAGS_warmup,
        purine::name_of(ring_steps_of_flag), load[0]);
    std::printf(
        "bus bandwidth = 2(N-1)/N * bytes / time; ring/MPI = ring bandwidth / MPI "
        "bandwidth\n\n");
    std::printf("%8s %10s %9s %10s %9s %8s", "size", "ring ms", "ring GB/s", "MPI ms", "MPI GB/s",
                "ring/MPI");
    if (FLAGS_variants)
      std::printf(" %13s %13s %13s %13s", "graph-mpi ms", "ring-pipe ms", "mpi-ring ms",
                  "mpi-ring-g ms");
    if (FLAGS_variants && FLAGS_pattern_split)
      std::printf(" %13s %13s", "g-late ms", "g-inplace ms");
    if (FLAGS_ways) std::printf(" %13s %13s", "ring-alone ms", "direct ms");
    if (FLAGS_ways && !FLAGS_machines.empty()) std::printf(" %13s", "machines ms");
    if (FLAGS_in_run > 0) std::printf(" %13s", "in-run ms");
    std::printf("\n");
    std::fflush(stdout);
  }
  std::vector<std::string> profiles;
  for (int64_t bytes = FLAGS_min_bytes; bytes <= FLAGS_max_bytes; bytes *= FLAGS_factor) {
    const int64_t count = std::max<int64_t>(1, bytes / 4);
    // Observers are declared first: they must outlive the runnable that calls them.
    std::unique_ptr<TypeProfile> profile;
    std::unique_ptr<Timeline> timeline;
    std::unique_ptr<GraphMethod> ring = make_ring(count, ranks, rank);
    // MPI_Allreduce reads the ring's input and writes the ring's output: the same buffers.
    DirectMpi direct(ring->inputs()[0]->tensor().data(),
                     ring->results()[0]->tensor().mutable_data(), count);
    std::vector<std::pair<const char*, Method*>> methods = {{"ring", ring.get()}, {"mpi", &direct}};
    std::unique_ptr<GraphMethod> graph_mpi, pipe, alone, direct_steps, machine_steps, in_run;
    std::unique_ptr<HandRing> hand;
    std::unique_ptr<GraphLikeRing> graph_like, late, in_place;
    if (FLAGS_variants) {
      graph_mpi = make_graph_mpi(count, ranks, rank);
      pipe = make_ring(count, ranks, rank, {0, purine::RingSteps::kRing, FLAGS_segment_bytes},
                       "ring-pipe");
      hand = std::make_unique<HandRing>(count);
      methods.push_back({"graph-mpi", graph_mpi.get()});
      methods.push_back({"ring-pipe", pipe.get()});
      graph_like = std::make_unique<GraphLikeRing>(count, "mpi-ring-g");
      methods.push_back({"mpi-ring", hand.get()});
      methods.push_back({"mpi-ring-g", graph_like.get()});
      if (FLAGS_pattern_split) {
        late = std::make_unique<GraphLikeRing>(count, "g-late", false, true);
        in_place = std::make_unique<GraphLikeRing>(count, "g-inplace", true, false);
        methods.push_back({"g-late", late.get()});
        methods.push_back({"g-inplace", in_place.get()});
      }
    }
    if (FLAGS_ways) {
      alone = make_ring(count, ranks, rank, {0, purine::RingSteps::kRing, -1}, "ring-alone");
      direct_steps = make_ring(count, ranks, rank, {0, purine::RingSteps::kDirect, -1}, "direct");
      methods.push_back({"ring-alone", alone.get()});
      methods.push_back({"direct", direct_steps.get()});
      if (!FLAGS_machines.empty()) {
        machine_steps = make_ring(
            count, ranks, rank, {0, purine::RingSteps::kMachines, -1, machine_of_rank}, "machines");
        methods.push_back({"machines", machine_steps.get()});
      }
    }
    if (FLAGS_in_run > 0) {
      in_run = make_ring(count, ranks, rank, flag_ring_options(), "ring-in-run", FLAGS_in_run);
      methods.push_back({"ring-in-run", in_run.get()});
    }
    for (auto& [name, method] : methods) {
      for (int w = 0; w < FLAGS_warmup; ++w) method->run();
      method->check();
    }
    std::vector<std::vector<double>> times(methods.size());
    for (int rep = 0; rep < FLAGS_reps; ++rep) {
      for (size_t m = 0; m < methods.size(); ++m)
        times[m].push_back(time_once(*methods[m].second, FLAGS_burst));
    }
    for (auto& [name, method] : methods) method->check();
    if (FLAGS_profile) {
      profile = std::make_unique<TypeProfile>(ring->graph());
      ring->runnable().add_observer(profile.get());
      std::vector<double> walls;
      for (int rep = 0; rep < FLAGS_reps; ++rep) walls.push_back(time_once(*ring, 1));
      double wall = 0;
      for (double w : walls) wall += w / FLAGS_reps;
      std::map<std::string, double> busy = profile->take();
      for (auto& [kind, seconds] : busy) seconds /= FLAGS_reps;
      if (leader) {
        char line[512];
        int used = std::snprintf(line, sizeof line,
                                 "%8s  wall %7.3f ms:", human_bytes(bytes).c_str(), wall * 1e3);
        double total = 0;
        for (auto& [kind, seconds] : busy) {
          total += seconds;
          used += std::snprintf(line + used, sizeof line - used, "  %s %.3f", kind.c_str(),
                                seconds * 1e3);
        }
        std::snprintf(line + used, sizeof line - used, "  (rest %.3f)", (wall - total) * 1e3);
        profiles.push_back(line);
      }
    }
    if (bytes == FLAGS_timeline_bytes) {
      GraphMethod* traced = FLAGS_timeline_pipe && pipe ? pipe.get() : ring.get();
      timeline = std::make_unique<Timeline>();
      traced->runnable().add_observer(timeline.get());
      MPI_Barrier(MPI_COMM_WORLD);
      const auto origin = std::chrono::steady_clock::now();
      traced->run();
      const std::string text = timeline->text(origin);
      // Ranks print in turn (ranks share a clock on one machine, not across machines).
      for (int r = 0; r < ranks; ++r) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (r == rank)
          std::fprintf(stderr, "timeline of rank %d, %s:\n%s", rank, human_bytes(bytes).c_str(),
                       text.c_str());
        std::fflush(stderr);
      }
      MPI_Barrier(MPI_COMM_WORLD);
    }
    if (leader) {
      const double ring_s = statistic(times[0]), mpi_s = statistic(times[1]);
      std::printf("%8s %10.3f %9.3f %10.3f %9.3f %7.2fx", human_bytes(bytes).c_str(), ring_s * 1e3,
                  bus_gbps(bytes, ranks, ring_s), mpi_s * 1e3, bus_gbps(bytes, ranks, mpi_s),
                  mpi_s / ring_s);
      for (size_t m = 2; m < methods.size(); ++m)
        std::printf(" %13.3f", statistic(times[m]) * 1e3 /
                                   (methods[m].second == in_run.get() ? FLAGS_in_run : 1));
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  if (leader && !profiles.empty()) {
    std::printf(
        "\nrank 0 mean busy time per op type in a ring run (ms; reshape/split/concat are zero-copy "
        "views; post recv includes a copy of an already arrived message; rest = wall time in no "
        "task: waiting for transfers, hand-offs):\n");
    for (const std::string& line : profiles) std::printf("%s\n", line.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
