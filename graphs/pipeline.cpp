#include "graphs/pipeline.hpp"

#include "base/error.hpp"

namespace purine {

std::vector<ModelLayer> model_layers(const std::function<void(Graph&)>& build) {
  Graph scratch("layers");
  build(scratch);
  scratch.validate();  // sets every composite up, so that its parameters exist
  std::vector<ModelLayer> layers;
  for (const std::string& name : scratch.layer_names()) layers.push_back({name, 0});
  for (const Parameter& p : scratch.parameters()) {
    // The layer whose scope holds the parameter.
    for (ModelLayer& layer : layers)
      if (p.blob->name().rfind(layer.name + "::", 0) == 0)
        layer.parameters += p.blob->shape().count();
  }
  return layers;
}

std::vector<int> assign_stages(const std::vector<ModelLayer>& layers, int stages,
                               const std::string& model) {
  std::vector<size_t> parametric;
  std::string names;
  for (size_t i = 0; i < layers.size(); ++i) {
    if (layers[i].parameters == 0) continue;
    parametric.push_back(i);
    names += str(names.empty() ? "" : ", ", layers[i].name);
  }
  require(stages >= 1, "pipeline of model '", model, "': --stages must be at least 1, got ",
          stages);
  require(static_cast<size_t>(stages) <= parametric.size(), "pipeline of model '", model,
          "': ", stages, " stages, but it has ", parametric.size(), " layers with parameters (",
          names, "); use at most ", parametric.size());
  const size_t p = parametric.size();
  std::vector<int> stage_of(layers.size(), 0);
  int stage = 0;
  for (size_t i = 0, k = 0; i < layers.size(); ++i) {
    if (layers[i].parameters > 0) {
      stage = static_cast<int>(k * stages / p);  // parametric layer k's stage
      ++k;
    }
    stage_of[i] = stage;
  }
  return stage_of;
}

void place_stages(Graph& graph, const std::vector<ModelLayer>& layers,
                  const std::vector<int>& stage_of, const std::vector<Location>& locations) {
  require(stage_of.size() == layers.size(), "place_stages: ", layers.size(), " layers, ",
          stage_of.size(), " stage numbers");
  for (size_t i = 0; i < layers.size(); ++i) {
    require(stage_of[i] >= 0 && static_cast<size_t>(stage_of[i]) < locations.size(),
            "place_stages: layer '", layers[i].name, "' is in stage ", stage_of[i], " of ",
            locations.size());
    graph.place(layers[i].name, locations[stage_of[i]]);
  }
}

}  // namespace purine
