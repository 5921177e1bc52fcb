#include "models/models.hpp"

#include <glog/logging.h>

#include <map>

#include "base/error.hpp"

namespace purine {

namespace {
std::map<std::string, ModelBuilder>& table() {
  static std::map<std::string, ModelBuilder> models;
  return models;
}
}  // namespace

bool register_model(const std::string& name, ModelBuilder builder) {
  CHECK(table().emplace(name, std::move(builder)).second) << "model '" << name << "' twice";
  return true;
}

const ModelBuilder& find_model(const std::string& name) {
  auto it = table().find(name);
  if (it == table().end()) {
    std::string known;
    for (const auto& n : model_names()) known += (known.empty() ? "" : ", ") + n;
    throw Error(str("unknown model '", name, "'; known models: ", known));
  }
  return it->second;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& entry : table()) names.push_back(entry.first);
  return names;
}

}  // namespace purine
