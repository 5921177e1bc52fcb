// The model zoo: forward-only builder functions registered by name. A model reads an image
// batch blob [N, C, H, W] and returns its logits blob [N, classes]; `training` selects the
// training or evaluation form of layers such as dropout and batch norm. Backward and optimizer
// graphs are derived from it (purine/autodiff.hpp, graphs/sgd.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "purine/graph.hpp"

namespace purine {

struct ModelSpec {
  bool training = true;
  int64_t classes = 10;
};

using ModelBuilder = std::function<Blob*(Graph& graph, Blob* images, const ModelSpec& spec)>;

bool register_model(const std::string& name, ModelBuilder builder);
// Throws purine::Error listing the known models when `name` is unknown.
const ModelBuilder& find_model(const std::string& name);
std::vector<std::string> model_names();

}  // namespace purine

#define PURINE_REGISTER_MODEL(name, function) \
  static const bool purine_model_##function = ::purine::register_model(name, function)
