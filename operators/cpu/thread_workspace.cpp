#include "operators/cpu/thread_workspace.hpp"

#include <cstdlib>
#include <memory>
#include <new>

namespace purine {

char* thread_workspace(size_t bytes, Workspace which) {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<char, Free> memories[2];
  thread_local size_t capacities[2] = {0, 0};
  const int slot = which == Workspace::kKernel ? 0 : 1;
  std::unique_ptr<char, Free>& memory = memories[slot];
  size_t& capacity = capacities[slot];
  if (bytes > capacity) {
    memory.reset();  // before allocating: the old contents need not survive
    capacity = 0;
    const size_t rounded = (bytes + 63) / 64 * 64;
    memory.reset(static_cast<char*>(std::aligned_alloc(64, rounded)));
    if (!memory) throw std::bad_alloc();
    capacity = rounded;
  }
  return memory.get();
}

}  // namespace purine
