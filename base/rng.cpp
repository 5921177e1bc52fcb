#include "base/rng.hpp"

#include <cmath>
#include <sstream>

#include "base/error.hpp"

namespace purine {

std::string Rng::state() const {
  std::ostringstream out;
  out << engine_;
  return out.str();
}

void Rng::set_state(const std::string& state) {
  std::istringstream in(state);
  std::mt19937 engine;
  in >> engine;
  require(!in.fail(), "random generator state: not an mt19937 state (", state.size(), " bytes)");
  engine_ = engine;
}

float Rng::gaussian(float mean, float stddev) {
  // 1 - u keeps the logarithm's argument in (0, 1].
  double u1 = 1.0 - static_cast<double>(uniform01());
  double u2 = static_cast<double>(uniform01());
  double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  return mean + stddev * static_cast<float>(z);
}

}  // namespace purine
