#include "graphs/model_parallel.hpp"

#include "base/error.hpp"

namespace purine {

namespace {

// Where an entry's axis follows its layer name: its last ':' that is not half of a scope's "::"
// ("googlenet::inception_4a:batch"); npos when it gives no axis.
size_t axis_colon(const std::string& entry) {
  size_t at = entry.rfind(':');
  while (at != std::string::npos && at > 0 && entry[at - 1] == ':')  // the end of a "::"
    at = at >= 2 ? entry.rfind(':', at - 2) : std::string::npos;
  return at;
}

}  // namespace

std::string split_layer_name(const std::string& entry) {
  return entry.substr(0, axis_colon(entry));
}

void model_parallel(Graph& graph, const std::vector<std::string>& layers,
                    const std::vector<Location>& locations) {
  require(!layers.empty(), "model parallel: no layers to split");
  int alternating = 0;  // entries without an axis so far
  for (const std::string& entry : layers) {
    const size_t colon = axis_colon(entry);
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
