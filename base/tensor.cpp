#include "base/tensor.hpp"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/device_runtime.hpp"
#include "base/error.hpp"

namespace purine {

namespace {
// 64-byte multiples: AVX-512 loads and oneDNN like the alignment, aligned_alloc needs the size.
size_t storage_bytes(int64_t count) {
  const size_t bytes = ((static_cast<size_t>(count) * sizeof(float) + 63) / 64) * 64;
  return bytes == 0 ? 64 : bytes;
}
}  // namespace

Buffer::Buffer(int64_t count, Location location, bool pinned) : count_(count), location_(location) {
  const size_t bytes = storage_bytes(count);
  if (!location.is_cpu()) {
    DeviceRuntime& device =
        require_device(location.device, "tensor memory at " + location.to_string());
    ptr_ = static_cast<float*>(device.allocate(location.device, bytes));
    return;
  }
  // Only a request for pinned memory asks for the runtime (and so loads the backend).
  DeviceRuntime* runtime = pinned ? device_runtime() : nullptr;
  if (runtime && runtime->device_count() > 0) {
    ptr_ = static_cast<float*>(runtime->allocate_pinned(bytes));  // zero-filled; null: failed
    pinned_ = ptr_ != nullptr;
    if (pinned_) return;
  }
  ptr_ = static_cast<float*>(std::aligned_alloc(64, bytes));
  require(ptr_ != nullptr, "out of host memory allocating ", bytes, " bytes");
  std::memset(ptr_, 0, bytes);
}

Buffer::~Buffer() {
  if (pinned_) {
    device_runtime()->release_pinned(ptr_);
  } else if (location_.is_cpu()) {
    std::free(ptr_);
  } else {
    device_runtime()->release(location_.device, ptr_, storage_bytes(count_));
  }
}

Storage::Storage(int64_t count, Location location, bool pinned)
    : count_(count),
      location_(location),
      buffer_(std::make_shared<Buffer>(count, location, pinned)) {}

std::shared_ptr<Storage> Storage::deferred(int64_t count, Location location) {
  return std::shared_ptr<Storage>(new Storage(count, location, nullptr));
}

void Storage::bind(std::shared_ptr<Buffer> buffer) {
  CHECK(!buffer_) << "binding memory to a storage that has some";
  CHECK(buffer && buffer->count() >= count_ && buffer->location() == location_)
      << "a storage of " << count_ << " floats at " << location_ << " bound to a buffer of "
      << (buffer ? buffer->count() : 0) << " at " << (buffer ? buffer->location() : location_);
  buffer_ = std::move(buffer);
}

void Storage::fail_unbound() const {
  LOG(FATAL) << "a tensor of " << count_ << " floats at " << location_
             << " was used before its memory was planned (a deferred storage never bound)";
  std::abort();
}

Tensor::Tensor(Shape shape, Location location)
    : storage_(std::make_shared<Storage>(shape.count(), location)),
      shape_(std::move(shape)),
      strides_(shape_.contiguous_strides()),
      location_(location) {}

Tensor Tensor::deferred(Shape shape, Location location) {
  Tensor t;
  t.storage_ = Storage::deferred(shape.count(), location);
  t.shape_ = std::move(shape);
  t.strides_ = t.shape_.contiguous_strides();
  t.location_ = location;
  return t;
}

Tensor Tensor::pinned(Shape shape, Location location) {
  require(location.is_cpu(), "page-locked memory is host memory: a pinned tensor of shape ", shape,
          " cannot be at ", location);
  Tensor t;
  t.storage_ = std::make_shared<Storage>(shape.count(), location, /*pinned=*/true);
  t.shape_ = std::move(shape);
  t.strides_ = t.shape_.contiguous_strides();
  t.location_ = location;
  return t;
}

bool Tensor::is_contiguous() const { return strides_ == shape_.contiguous_strides(); }

void Tensor::set_channel_block(int block) {
  if (block == 0) {
    channel_block_ = 0;
    return;
  }
  require(block > 0 && location_.is_cpu() && shape_.ndim() == 4 && is_contiguous() &&
              shape_[1] % block == 0,
          "channel blocks of ", block, " for a tensor of shape ", shape_, " at ", location_,
          ": they need a contiguous [N, C, H, W] at a CPU location, C a multiple of the block");
  channel_block_ = block;
}

// Refuses a view other than whole images of a channel-blocked tensor (`what` names it).
void Tensor::require_plain(const char* what) const {
  require(channel_block_ == 0, what, " of a tensor of shape ", shape_,
          " held in channel blocks of ", channel_block_,
          ": only slices along axis 0 keep whole images (copy it to a plain "
          "tensor first)");
}

// Not require(): the message is built only on failure (data() is on every kernel's path).
void Tensor::check_allocated(const char* use) const {
  if (!storage_)
    throw Error(str(use, " a tensor of shape ", shape_, " at ", location_,
                    " that has no memory (a default-constructed Tensor; a blob's tensor gets "
                    "its memory when the graph is compiled)"));
}

const float* Tensor::data() const {
  check_allocated("reading");
  return storage_->ptr() + offset_;
}

float* Tensor::mutable_data() {
  check_allocated("writing");
  return storage_->ptr() + offset_;
}

Tensor Tensor::at_current_memory() const {
  if (!storage_ || !storage_->bound()) return *this;
  Tensor t = *this;
  t.storage_ = Storage::deferred(storage_->count(), storage_->location());
  t.storage_->bind(storage_->buffer());
  return t;
}

Tensor Tensor::view(int64_t offset, Shape shape) const {
  require_plain("a view");
  require(is_contiguous(), "a view of ", shape, " into a strided tensor of shape ", shape_,
          ": views need contiguous memory (copy it first)");
  require(offset >= 0 && offset + shape.count() <= count(), "a view of ", shape, " at offset ",
          offset, " does not fit in a tensor of shape ", shape_, " (", count(), " elements)");
  Tensor v = *this;
  v.offset_ = offset_ + offset;
  v.shape_ = std::move(shape);
  v.strides_ = v.shape_.contiguous_strides();
  return v;
}

Tensor Tensor::slice(int axis, int64_t begin, int64_t end) const {
  require(axis >= 0 && axis < shape_.ndim(), "slice along axis ", axis, " of a tensor of shape ",
          shape_, ", which has ", shape_.ndim(), " axes");
  require(0 <= begin && begin <= end && end <= shape_[axis], "slice [", begin, ", ", end,
          ") along axis ", axis, " of a tensor of shape ", shape_, ": outside [0, ", shape_[axis],
          "]");
  if (axis != 0) require_plain("a slice along an axis other than 0");
  Tensor v = *this;
  v.offset_ = offset_ + begin * strides_[axis];
  v.shape_[axis] = end - begin;
  return v;
}

Tensor Tensor::reshaped(Shape shape) const {
  require_plain("a reshape");
  require(is_contiguous(), "reshape of a strided tensor of shape ", shape_, " to ", shape,
          ": copy it to contiguous memory first");
  require(shape.count() == count(), "reshape of a tensor of shape ", shape_, " (", count(),
          " elements) to ", shape, " (", shape.count(), " elements)");
  Tensor v = *this;
  v.shape_ = std::move(shape);
  v.strides_ = v.shape_.contiguous_strides();
  return v;
}

bool Tensor::covers_storage() const {
  return storage_ && offset_ == 0 && is_contiguous() && count() == storage_->count();
}

void Storage::swap_contents(Storage& other) {
  CHECK_EQ(count_, other.count_);
  CHECK(location_ == other.location_);
  std::swap(buffer_, other.buffer_);
}

void Tensor::swap_memory(Tensor& other) {
  require(shape_ == other.shape_ && location_ == other.location_, "swap of a tensor of shape ",
          shape_, " at ", location_, " with one of shape ", other.shape_, " at ", other.location_,
          ": both must have one shape and location");
  require(covers_storage() && other.covers_storage(), "swap of tensors of shape ", shape_,
          " that are views of part of a larger memory block (swaps exchange whole blocks)");
  if (storage_ != other.storage_) storage_->swap_contents(*other.storage_);
}

namespace {
// Copies an arbitrary-strided block, innermost dimension contiguous or not.
void strided_copy(int dim, const Shape& shape, const float* src, const std::vector<int64_t>& ss,
                  float* dst, const std::vector<int64_t>& ds) {
  if (dim == shape.ndim() - 1) {
    if (ss[dim] == 1 && ds[dim] == 1) {
      std::memcpy(dst, src, shape[dim] * sizeof(float));
    } else {
      for (int64_t i = 0; i < shape[dim]; ++i) dst[i * ds[dim]] = src[i * ss[dim]];
    }
    return;
  }
  for (int64_t i = 0; i < shape[dim]; ++i)
    strided_copy(dim + 1, shape, src + i * ss[dim], ss, dst + i * ds[dim], ds);
}
}  // namespace

std::vector<int64_t> Tensor::block_strides(int64_t b) const {
  const std::vector<int64_t>& s = strides_;
  if (channel_block_ == 0) return {s[0], b * s[1], s[2], s[3], s[1]};
  // The blocks of C/b, then H, W, and b lanes (a slice of images keeps the image stride).
  const int64_t lanes = channel_block_, plane = shape_[2] * shape_[3];
  return {s[0], plane * lanes, shape_[3] * lanes, lanes, 1};
}

std::vector<float> Tensor::values() const {
  Tensor dense(shape_, Location::cpu(location_.rank));
  dense.copy_from(*this);
  return std::vector<float>(dense.data(), dense.data() + dense.count());
}

void Tensor::set_values(const std::vector<float>& values) {
  require(static_cast<int64_t>(values.size()) == count(), values.size(),
          " values for a tensor of shape ", shape_, ", which holds ", count());
  Tensor host(shape_, Location::cpu(location_.rank));
  std::copy(values.begin(), values.end(), host.mutable_data());
  copy_from(host);
}

void Tensor::copy_from(const Tensor& source) {
  require(shape_ == source.shape_, "copy of a tensor of shape ", source.shape_, " at ",
          source.location_, " into one of shape ", shape_, " at ", location_);
  if (count() == 0) return;
  if (!location_.is_cpu() || !source.location_.is_cpu()) {
    // A GPU side: contiguous blocks only (the device runtime copies bytes).
    require(is_contiguous() && source.is_contiguous(), "copy of a strided tensor of shape ", shape_,
            " between ", source.location_, " and ", location_,
            ": copies to and from a GPU take contiguous tensors");
    require(channel_block_ == 0 && source.channel_block_ == 0, "copy of a tensor of shape ", shape_,
            " held in channel blocks between ", source.location_, " and ", location_,
            ": copies to and from a GPU take plain tensors");
    const int device = location_.is_cpu() ? source.location_.device : location_.device;
    require_device(device,
                   "copy from " + source.location_.to_string() + " to " + location_.to_string())
        .copy(mutable_data(), location_, source.data(), source.location_, count() * sizeof(float));
    return;
  }
  if (channel_block_ != source.channel_block_) {
    require(channel_block_ == 0 || source.channel_block_ == 0, "copy of a tensor of shape ", shape_,
            " in channel blocks of ", source.channel_block_, " into one in blocks of ",
            channel_block_, ": copy through a plain tensor");
    // Both as [N, C/b, H, W, b] (b the blocked side's; plain is a block of 1), one strided copy.
    const int64_t b = std::max(channel_block_, source.channel_block_);
    const Shape blocks{shape_[0], shape_[1] / b, shape_[2], shape_[3], b};
    strided_copy(0, blocks, source.data(), source.block_strides(b), mutable_data(),
                 block_strides(b));
  } else if (is_contiguous() && source.is_contiguous()) {
    std::memcpy(mutable_data(), source.data(), count() * sizeof(float));
  } else if (shape_.ndim() == 0) {
    *mutable_data() = *source.data();
  } else {
    strided_copy(0, shape_, source.data(), source.strides_, mutable_data(), strides_);
  }
}

void Tensor::fill(float value) {
  require(is_contiguous(), "fill of a strided tensor of shape ", shape_,
          " (fill the tensor it is a view of)");
  if (!location_.is_cpu()) {
    set_values(std::vector<float>(static_cast<size_t>(count()), value));
    return;
  }
  float* p = mutable_data();
  for (int64_t i = 0; i < count(); ++i) p[i] = value;
}

}  // namespace purine
