// Tensor: an N-dimensional float32 array at a Location (host or device memory). Storage is shared
// between a tensor and its views (offset + shape + strides), so slices and concatenations need no
// copy. Copying a Tensor object copies the handle, not the data; copy_from() copies data. Reads use
// data(), writes mutable_data(). A caller's mistake (shapes or locations that do not match, a view
// or slice outside the tensor, reading a tensor without memory) throws purine::Error naming the
// shapes and locations; CHECK stays for the storage's own invariants. Not thread-safe: the
// dispatcher guarantees one writer per run.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/location.hpp"
#include "base/shape.hpp"

namespace purine {

// A block of device or host memory holding `count` floats, zero-filled when allocated. Host
// memory may be page-locked (`pinned`, by the device runtime) so that copies to and from a GPU
// run asynchronously; where it cannot be (no runtime, no driver) it is ordinary memory.
class Buffer {
 public:
  Buffer(int64_t count, Location location, bool pinned = false);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* ptr() const { return ptr_; }
  int64_t count() const { return count_; }
  Location location() const { return location_; }
  bool pinned() const { return pinned_; }

 private:
  float* ptr_ = nullptr;
  int64_t count_ = 0;
  Location location_;
  bool pinned_ = false;
};

// The memory of a tensor and its views: `count` floats at the start of a Buffer. Usually the
// buffer is its own; a deferred storage gets one later (bind()), possibly shared with storages
// whose contents are never needed at the same time (the memory plan: purine/compile.hpp).
// Owned by shared_ptr from tensors.
class Storage {
 public:
  // Allocates a buffer of its own.
  Storage(int64_t count, Location location, bool pinned = false);
  // A storage without memory until bind(); reading or writing it before is a fatal error.
  static std::shared_ptr<Storage> deferred(int64_t count, Location location);
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  float* ptr() const {
    if (!buffer_) fail_unbound();
    return buffer_->ptr();
  }
  int64_t count() const { return count_; }
  Location location() const { return location_; }
  bool pinned() const { return buffer_ && buffer_->pinned(); }
  bool bound() const { return buffer_ != nullptr; }
  // Gives a deferred storage its memory: a buffer at its location of at least count() floats.
  void bind(std::shared_ptr<Buffer> buffer);
  const std::shared_ptr<Buffer>& buffer() const { return buffer_; }
  // Exchanges the buffers of two storages of equal size and location.
  void swap_contents(Storage& other);

 private:
  Storage(int64_t count, Location location, std::shared_ptr<Buffer> buffer)
      : count_(count), location_(location), buffer_(std::move(buffer)) {}
  [[noreturn]] void fail_unbound() const;
  int64_t count_ = 0;
  Location location_;
  std::shared_ptr<Buffer> buffer_;
};

class Tensor {
 public:
  Tensor() = default;
  // Allocates a zero-filled contiguous tensor.
  explicit Tensor(Shape shape, Location location = Location::cpu());
  // The same in page-locked host memory where the device runtime can give it (for the host end
  // of copies to and from GPUs); ordinary memory otherwise. CPU locations only.
  static Tensor pinned(Shape shape, Location location);
  // A contiguous tensor whose memory is given later (Storage::bind() on storage()).
  static Tensor deferred(Shape shape, Location location);

  const Shape& shape() const { return shape_; }
  Location location() const { return location_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t count() const { return shape_.count(); }
  bool allocated() const { return storage_ != nullptr; }
  bool is_contiguous() const;

  // Channel blocks (CPU tensors of shape [N, C, H, W] only): with a block b > 0 the memory holds
  // [N, C/b, H, W, b], the order oneDNN's blocked convolutions read and write (nChw16c, nChw8c),
  // so that a convolution next to another needs no reorder (graphs/channel_blocks.hpp). The
  // shape and everything read or written through values(), set_values() and copy_from() stay
  // [N, C, H, W]; only a kernel's data() sees the blocks. A blocked tensor is dense (contiguous
  // strides) and has no view but slices along axis 0 (whole images). 0: plain row-major order.
  int channel_block() const { return channel_block_; }
  // Sets the block of a whole tensor before it holds values (a blob's tensor as it is made).
  // Throws purine::Error unless the tensor is a contiguous [N, C, H, W] at a CPU location whose
  // C is a multiple of `block` (or `block` is 0).
  void set_channel_block(int block);

  // Pointers into the storage: host memory for CPU locations, device memory for GPU ones (for
  // kernels only; the host reads and writes those with values() and set_values()). They go stale
  // when the storage's buffer is exchanged: every run() of a graph with weight swaps
  // (Graph::add_swap, the SGD graph) moves the weights to the other buffer. Keep the Tensor (or
  // its Blob) and call data() again after each run, or copy the elements out with values().
  const float* data() const;
  float* mutable_data();
  // A copy of the elements in row-major order (views and strided slices too), at any location.
  std::vector<float> values() const;
  // Writes count() elements in row-major order, at any location.
  void set_values(const std::vector<float>& values);

  // This tensor over the memory it has now, which later swaps (swap_memory) do not move: what a
  // device kernel's arguments are once it is launched or recorded (an emulated device's kernels
  // keep these, so that they read what a real device's would). Unallocated or unbound: itself.
  Tensor at_current_memory() const;
  // A contiguous view of `shape.count()` elements starting `offset` elements into this
  // (contiguous) tensor.
  Tensor view(int64_t offset, Shape shape) const;
  // A strided view of [begin, end) along `axis`.
  Tensor slice(int axis, int64_t begin, int64_t end) const;
  // The same contiguous memory under another shape of equal count.
  Tensor reshaped(Shape shape) const;

  // Exchanges the memory of two tensors of equal shape and location (the parameter swap that
  // turns a run of the training graph into one SGD step). Both must cover their whole storage
  // (covers_storage()). The storages exchange their buffers, so every view of either tensor
  // follows it: a view of the weights reads the new weights after the swap.
  void swap_memory(Tensor& other);
  // True when this tensor is allocated and spans its storage exactly (offset 0, contiguous).
  bool covers_storage() const;
  bool shares_storage(const Tensor& other) const { return storage_ == other.storage_; }
  // Whether the memory is page-locked host memory (see pinned()).
  bool is_pinned() const { return storage_ && storage_->pinned(); }
  // The storage this tensor and its views share (null when unallocated).
  Storage* storage() const { return storage_.get(); }

  // Copies values from `source` (same shape; any strides between CPU tensors, contiguous ones to
  // or from a GPU).
  void copy_from(const Tensor& source);
  void fill(float value);

 private:
  // Throws purine::Error, naming `use` ("reading"), when the tensor has no storage.
  void check_allocated(const char* use) const;
  // Throws purine::Error, naming `what`, when the tensor is held in channel blocks.
  void require_plain(const char* what) const;
  // The strides of [N, C/b, H, W, b] over this tensor's memory (plain or in blocks of b).
  std::vector<int64_t> block_strides(int64_t b) const;
  std::shared_ptr<Storage> storage_;
  Shape shape_;
  std::vector<int64_t> strides_;
  int64_t offset_ = 0;
  Location location_;
  int channel_block_ = 0;
};

}  // namespace purine
