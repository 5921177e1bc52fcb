#include "operators/registry.hpp"

#include <glog/logging.h>

#include <map>

#include "base/error.hpp"

namespace purine {

namespace {
std::map<std::string, OperatorFactory>& factories() {
  static std::map<std::string, OperatorFactory> table;
  return table;
}
std::map<std::string, std::string>& signatures() {
  static std::map<std::string, std::string> table;
  return table;
}
}  // namespace

bool OperatorRegistry::add(const std::string& type, OperatorFactory factory,
                           const std::string& signature) {
  CHECK(factories().emplace(type, std::move(factory)).second)
      << "operator type '" << type << "' registered twice";
  signatures()[type] = signature;
  return true;
}

std::string OperatorRegistry::signature(const std::string& type) {
  auto it = signatures().find(type);
  require(it != signatures().end(), "unknown operator type '", type, "'");
  return it->second;
}

bool OperatorRegistry::has(const std::string& type) { return factories().count(type) > 0; }

std::vector<std::string> OperatorRegistry::names() {
  std::vector<std::string> out;
  for (const auto& entry : factories()) out.push_back(entry.first);
  return out;
}

std::unique_ptr<Operator> OperatorRegistry::create(const std::string& type, const Attrs& attrs) {
  auto it = factories().find(type);
  if (it == factories().end()) {
    std::string known;
    for (const auto& name : names()) known += (known.empty() ? "" : ", ") + name;
    throw Error(str("unknown operator type '", type, "'; known types: ", known));
  }
  return it->second(attrs);
}

}  // namespace purine
