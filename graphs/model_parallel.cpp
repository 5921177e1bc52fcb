#include "graphs/model_parallel.hpp"

#include "base/error.hpp"

namespace purine {

std::string split_layer_name(const std::string& entry) { return entry.substr(0, entry.find(':')); }

void model_parallel(Graph& graph, const std::vector<std::string>& layers,
                    const std::vector<Location>& locations) {
  require(!layers.empty(), "model parallel: no layers to split");
  int alternating = 0;  // entries without an axis so far
  for (const std::string& entry : layers) {
    const size_t colon = entry.find(':');
    SplitAxis axis = alternating % 2 == 0 ? SplitAxis::kOutputs : SplitAxis::kInputs;
    if (colon == std::string::npos) {
      ++alternating;
    } else {
      const std::string name = entry.substr(colon + 1);
      require(name == "outputs" || name == "inputs" || name == "batch", "model parallel: '", entry,
              "': the axis must be outputs, inputs or batch");
      axis = name == "outputs"  ? SplitAxis::kOutputs
             : name == "inputs" ? SplitAxis::kInputs
                                : SplitAxis::kBatch;
    }
    graph.split(split_layer_name(entry), {locations, axis});
  }
}

}  // namespace purine
