#include "graphs/initialize.hpp"

#include "operators/registry.hpp"

namespace purine {

void fill_parameters(const std::vector<Parameter>& parameters, uint64_t seed) {
  Rng rng(seed);
  OpContext context{&rng};
  for (const Parameter& p : parameters)
    OperatorRegistry::create(p.filler, p.filler_attrs)->compute({}, {&p.blob->tensor()}, context);
}

void initialize_parameters(const Graph& graph, uint64_t seed, int rank) {
  std::vector<Parameter> local;
  for (const auto* list : {&graph.parameters(), &graph.states()})
    for (const Parameter& p : *list)
      if (p.blob->location().rank == rank) local.push_back(p);
  fill_parameters(local, seed);
}

}  // namespace purine
