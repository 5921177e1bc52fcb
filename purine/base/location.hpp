// Location: where a vertex lives, an MPI rank and a device (-1 = CPU, 0..n = GPU ordinal).
#pragma once

#include <ostream>
#include <string>
#include <tuple>

namespace purine {

struct Location {
  int rank = 0;
  int device = -1;

  static Location cpu(int rank = 0) { return {rank, -1}; }
  static Location gpu(int device, int rank = 0) { return {rank, device}; }
  bool is_cpu() const { return device < 0; }
  // "rank0:cpu", "rank1:gpu0"
  std::string to_string() const {
    return "rank" + std::to_string(rank) + (is_cpu() ? ":cpu" : ":gpu" + std::to_string(device));
  }
  bool operator==(const Location& o) const { return rank == o.rank && device == o.device; }
  bool operator!=(const Location& o) const { return !(*this == o); }
  bool operator<(const Location& o) const {
    return std::tie(rank, device) < std::tie(o.rank, o.device);
  }
};

inline std::ostream& operator<<(std::ostream& out, const Location& l) {
  return out << l.to_string();
}

}  // namespace purine
