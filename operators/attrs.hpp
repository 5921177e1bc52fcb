// Attrs: an operator's named parameters (kernel size, stride, momentum, ...), as ints, floats,
// strings or int lists. Ordered by name, so graph export and GraphViz dumps are stable.
// Getters with a default never throw; getters without one throw purine::Error naming the key.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace purine {

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;

class Attrs {
 public:
  Attrs() = default;
  Attrs& set(const std::string& key, int64_t v) {
    values_[key] = v;
    return *this;
  }
  Attrs& set(const std::string& key, int v) {
    values_[key] = int64_t{v};
    return *this;
  }
  Attrs& set(const std::string& key, double v) {
    values_[key] = v;
    return *this;
  }
  Attrs& set(const std::string& key, std::string v) {
    values_[key] = std::move(v);
    return *this;
  }
  Attrs& set(const std::string& key, const char* v) {
    values_[key] = std::string(v);
    return *this;
  }
  Attrs& set(const std::string& key, std::vector<int64_t> v) {
    values_[key] = std::move(v);
    return *this;
  }

  bool has(const std::string& key) const { return values_.count(key) > 0; }
  int64_t get_int(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  // Ints are accepted where floats are expected.
  double get_float(const std::string& key) const;
  double get_float(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  std::vector<int64_t> get_ints(const std::string& key) const;
  std::vector<int64_t> get_ints(const std::string& key, std::vector<int64_t> fallback) const;

  const std::map<std::string, AttrValue>& values() const { return values_; }
  // "kernel=5 pad=2 stride=1"
  std::string to_string() const;

 private:
  std::map<std::string, AttrValue> values_;
};

}  // namespace purine
