#include "operators/kernel_determinism.hpp"

#include <atomic>

namespace purine {

namespace {
std::atomic<bool> deterministic{true};
}  // namespace

void set_deterministic_kernels(bool on) { deterministic.store(on); }
bool deterministic_kernels() { return deterministic.load(); }

}  // namespace purine
