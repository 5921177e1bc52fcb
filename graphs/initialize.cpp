#include "graphs/initialize.hpp"

#include <algorithm>
#include <map>

#include "base/error.hpp"
#include "base/hash.hpp"
#include "operators/registry.hpp"

namespace purine {

void initialize_parameters(const CheckpointMap& map, const Graph& graph, uint64_t seed, int rank) {
  std::map<const Blob*, const Parameter*> registered;
  for (const auto* list : {&graph.parameters(), &graph.states()})
    for (const Parameter& p : *list) registered[p.blob] = &p;

  for (const StoredTensor& stored : map) {
    const Parameter* filled_by = nullptr;
    bool held_here = false;
    for (const TensorPiece& piece : stored.loaded_into) {
      held_here |= piece.blob->location().rank == rank;
      auto it = registered.find(piece.blob);
      if (!filled_by && it != registered.end()) filled_by = it->second;
    }
    require(filled_by != nullptr, "initialize_parameters: no piece of tensor '", stored.name,
            "' is a parameter or state of graph '", graph.name(), "'");
    if (!held_here) continue;

    Tensor whole(stored.shape);
    Attrs attrs = filled_by->filler_attrs;
    attrs.set("shape", stored.shape.dims());
    Rng rng(seed_for_name(seed, stored.name));
    OpContext context{&rng};
    OperatorRegistry::create(filled_by->filler, attrs)->compute({}, {&whole}, context);

    const float* values = whole.data();
    for (const TensorPiece& piece : stored.loaded_into) {
      if (piece.blob->location().rank != rank) continue;
      piece.blob->tensor().set_values(gather_piece(values, whole.count(), piece, stored.name));
    }
  }
}

void initialize_parameters(const Graph& graph, uint64_t seed, int rank) {
  initialize_parameters(whole_blobs(graph), graph, seed, rank);
}

}  // namespace purine
