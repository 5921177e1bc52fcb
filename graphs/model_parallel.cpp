#include "graphs/model_parallel.hpp"

#include "base/error.hpp"

namespace purine {

void model_parallel(Graph& graph, const std::vector<std::string>& layers,
                    const std::vector<Location>& locations) {
  require(!layers.empty(), "model parallel: no layers to split");
  for (size_t i = 0; i < layers.size(); ++i)
    graph.split(layers[i],
                {locations, i % 2 == 0 ? SplitAxis::kOutputs : SplitAxis::kInputs});
}

}  // namespace purine
