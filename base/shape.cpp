#include "base/shape.hpp"

#include <ostream>

namespace purine {

int64_t Shape::count() const { return count_from(0); }

int64_t Shape::count_from(int axis) const {
  int64_t n = 1;
  for (int i = axis; i < ndim(); ++i) n *= dims_[i];
  return n;
}

int64_t Shape::count_to(int axis) const {
  int64_t n = 1;
  for (int i = 0; i < axis && i < ndim(); ++i) n *= dims_[i];
  return n;
}

std::vector<int64_t> Shape::contiguous_strides() const {
  std::vector<int64_t> strides(dims_.size(), 1);
  for (int i = ndim() - 2; i >= 0; --i) strides[i] = strides[i + 1] * dims_[i + 1];
  return strides;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

std::ostream& operator<<(std::ostream& out, const Shape& shape) { return out << shape.to_string(); }

}  // namespace purine
