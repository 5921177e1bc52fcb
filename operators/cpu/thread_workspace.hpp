// Memory a CPU kernel needs only while it runs (oneDNN's reordered copies and scratchpads,
// im2col columns, packed rows), taken from one buffer per calling thread rather than held by
// every op. The kernels an executor thread runs one after another then share that buffer: the
// process holds the largest kernel's need instead of the sum of all of them, and what one op
// leaves in the buffer is still in cache for the next.
//
// A kernel lays out its pieces once (WorkspaceLayout::add) and takes the calling thread's
// buffer at the start of each run (thread_workspace). The buffer is the calling thread's alone;
// a kernel's OpenMP team may write into it during that run, but nothing the kernel calls while
// it runs may take the buffer again (it could move or be overwritten).
#pragma once

#include <cstddef>

namespace purine {

// Offsets of a kernel's pieces within its workspace, each 64-byte aligned.
class WorkspaceLayout {
 public:
  // Adds a piece of `bytes` bytes; returns its offset.
  size_t add(size_t bytes) {
    const size_t offset = bytes_;
    bytes_ += (bytes + 63) / 64 * 64;
    return offset;
  }
  size_t bytes() const { return bytes_; }

 private:
  size_t bytes_ = 0;
};

// Which of a thread's two workspaces: a kernel's own (kKernel), or the copies of its arguments
// that a wrapper makes around its run (kArguments: the plain copies of arguments held in channel
// blocks, conv_onednn.cpp's BlockedArgsKernel), which must stay put while the kernel takes its own.
enum class Workspace { kKernel, kArguments };

// The calling thread's workspace `which`, at least `bytes` long and 64-byte aligned. It grows (its
// old contents lost) when asked for more than the thread ever did, and is freed when the thread
// ends; in steady state no call allocates.
char* thread_workspace(size_t bytes, Workspace which = Workspace::kKernel);

// The piece of `workspace` at `offset`, as floats.
inline float* workspace_floats(char* workspace, size_t offset) {
  return reinterpret_cast<float*>(workspace + offset);
}

}  // namespace purine
