// purine::Error is what every user mistake throws: a bad graph, a shape or location mismatch, a
// missing or corrupt file, an unknown operator, a wrong MPI world size. Its message names the
// vertex or file, the expected and the actual value, and what to do. Internal invariants use glog
// CHECK instead. purine::str() concatenates anything streamable, for building those messages.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace purine {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Parts>
std::string str(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// Throws purine::Error with the concatenated parts when `condition` is false.
template <typename... Parts>
void require(bool condition, const Parts&... parts) {
  if (!condition) throw Error(str(parts...));
}

}  // namespace purine
