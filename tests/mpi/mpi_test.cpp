// Helpers for the multi-rank tests: world rank and size, collectives on plain values.
#include "mpi_test.hpp"

#include <mpi.h>

#include <exception>
#include <sstream>

namespace purine::mpitest {

int rank() { return mpi_world_rank(); }
int size() { return mpi_world_size(); }
void barrier() { MPI_Barrier(MPI_COMM_WORLD); }

RunOptions run_options() {
  RunOptions options;
  options.rank = rank();
  options.world_size = size();
  options.stall_timeout = kStallTimeout;
  return options;
}

bool all_ranks(bool ok) {
  int mine = ok ? 1 : 0, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
  return all != 0;
}

std::vector<std::vector<float>> allgather(const std::vector<float>& values) {
  const int n = static_cast<int>(values.size());
  std::vector<float> flat(static_cast<size_t>(n) * size());
  MPI_Allgather(values.data(), n, MPI_FLOAT, flat.data(), n, MPI_FLOAT, MPI_COMM_WORLD);
  std::vector<std::vector<float>> out;
  for (int r = 0; r < size(); ++r)
    out.emplace_back(flat.begin() + r * n, flat.begin() + (r + 1) * n);
  return out;
}

std::vector<std::string> allgather(const std::string& text) {
  int length = static_cast<int>(text.size());
  std::vector<int> lengths(size()), offsets(size());
  MPI_Allgather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string flat(total, '\0');
  MPI_Allgatherv(text.data(), length, MPI_CHAR, flat.data(), lengths.data(), offsets.data(),
                 MPI_CHAR, MPI_COMM_WORLD);
  std::vector<std::string> out;
  for (int r = 0; r < size(); ++r) out.push_back(flat.substr(offsets[r], lengths[r]));
  return out;
}

std::vector<uint64_t> allgather(uint64_t value) {
  std::vector<uint64_t> out(size());
  MPI_Allgather(&value, 1, MPI_UINT64_T, out.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  return out;
}

uint64_t hash_of(const std::vector<float>& values) {
  uint64_t h = 1469598103934665603ULL;
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) h = (h ^ bytes[i]) * 1099511628211ULL;
  return h;
}

std::string run_and_catch(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::exception& e) {
    std::string what = e.what();
    return what.empty() ? "(exception without a message)" : what;
  }
  return "";
}

std::string mismatch(const std::vector<float>& got, const std::vector<float>& expected) {
  if (got.size() != expected.size())
    return std::to_string(got.size()) + " values, expected " + std::to_string(expected.size());
  size_t differing = 0, first = 0;
  for (size_t i = got.size(); i-- > 0;)
    if (got[i] != expected[i]) {
      ++differing;
      first = i;
    }
  if (differing == 0) return "";
  std::ostringstream out;
  out << differing << " of " << got.size() << " values differ; first at " << first << ": "
      << got[first] << ", expected " << expected[first];
  return out.str();
}

std::vector<float> values_of(const Tensor& tensor) {
  const float* p = tensor.data();
  return std::vector<float>(p, p + tensor.count());
}

}  // namespace purine::mpitest
