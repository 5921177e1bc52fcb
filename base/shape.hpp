// Shape: the dimensions of an N-dimensional tensor (any rank, including 0 for a scalar).
// A small value type; copy freely.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace purine {

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int ndim() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int axis) const { return dims_[axis]; }
  int64_t& operator[](int axis) { return dims_[axis]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  // Number of elements: the product of the dimensions (1 for a scalar).
  int64_t count() const;
  // Product of the dimensions from `axis` (inclusive) to the end.
  int64_t count_from(int axis) const;
  // Product of the dimensions before `axis`.
  int64_t count_to(int axis) const;
  // Row-major strides in elements.
  std::vector<int64_t> contiguous_strides() const;
  // "[64,1,28,28]"
  std::string to_string() const;

  bool operator==(const Shape& other) const { return dims_ == other.dims_; }
  bool operator!=(const Shape& other) const { return dims_ != other.dims_; }

 private:
  std::vector<int64_t> dims_;
};

std::ostream& operator<<(std::ostream& out, const Shape& shape);

}  // namespace purine
