#include "operators/attrs.hpp"

#include <sstream>

#include "base/error.hpp"

namespace purine {

namespace {
template <typename T>
const T& get_as(const std::map<std::string, AttrValue>& values, const std::string& key,
                const char* type_name) {
  auto it = values.find(key);
  require(it != values.end(), "missing attribute '", key, "'");
  const T* v = std::get_if<T>(&it->second);
  require(v != nullptr, "attribute '", key, "' is not ", type_name);
  return *v;
}
}  // namespace

int64_t Attrs::get_int(const std::string& key) const {
  return get_as<int64_t>(values_, key, "an int");
}
int64_t Attrs::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
double Attrs::get_float(const std::string& key) const {
  auto it = values_.find(key);
  if (it != values_.end()) {
    if (const int64_t* i = std::get_if<int64_t>(&it->second)) return static_cast<double>(*i);
  }
  return get_as<double>(values_, key, "a float");
}
double Attrs::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
std::string Attrs::get_string(const std::string& key) const {
  return get_as<std::string>(values_, key, "a string");
}
std::string Attrs::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}
std::vector<int64_t> Attrs::get_ints(const std::string& key) const {
  return get_as<std::vector<int64_t>>(values_, key, "an int list");
}
std::vector<int64_t> Attrs::get_ints(const std::string& key, std::vector<int64_t> fallback) const {
  return has(key) ? get_ints(key) : fallback;
}

std::string Attrs::to_string() const {
  std::ostringstream out;
  bool first = true;
  for (const auto& [key, value] : values_) {
    if (!first) out << ' ';
    first = false;
    out << key << '=';
    if (auto i = std::get_if<int64_t>(&value)) out << *i;
    if (auto f = std::get_if<double>(&value)) out << *f;
    if (auto s = std::get_if<std::string>(&value)) out << *s;
    if (auto l = std::get_if<std::vector<int64_t>>(&value)) {
      for (size_t k = 0; k < l->size(); ++k) out << (k ? "," : "") << (*l)[k];
    }
  }
  return out.str();
}

}  // namespace purine
