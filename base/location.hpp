// Location: where a vertex lives, an MPI rank and a device (-1 = CPU, 0..n = GPU ordinal). A
// process may hold several CPU locations, told apart by `cpu_index`, as a process with several
// GPUs holds several GPU locations: each has its own tensors and its own executor threads, and
// the process's compute threads are shared among them (purine/runnable.hpp).
#pragma once

#include <ostream>
#include <string>
#include <tuple>

namespace purine {

struct Location {
  int rank = 0;
  int device = -1;
  int cpu_index = 0;  // which CPU location of the rank; 0 for GPU locations

  static Location cpu(int rank = 0, int index = 0) { return {rank, -1, index}; }
  static Location gpu(int device, int rank = 0) { return {rank, device, 0}; }
  bool is_cpu() const { return device < 0; }
  // "rank0:cpu", "rank0:cpu1", "rank1:gpu0": the first CPU location is plain "cpu".
  std::string to_string() const {
    std::string where = is_cpu() ? (cpu_index == 0 ? "cpu" : "cpu" + std::to_string(cpu_index))
                                 : "gpu" + std::to_string(device);
    return "rank" + std::to_string(rank) + ":" + where;
  }
  bool operator==(const Location& o) const {
    return rank == o.rank && device == o.device && cpu_index == o.cpu_index;
  }
  bool operator!=(const Location& o) const { return !(*this == o); }
  bool operator<(const Location& o) const {
    return std::tie(rank, device, cpu_index) < std::tie(o.rank, o.device, o.cpu_index);
  }
};

inline std::ostream& operator<<(std::ostream& out, const Location& l) {
  return out << l.to_string();
}

}  // namespace purine
