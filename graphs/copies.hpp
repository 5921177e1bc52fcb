// Copies as composites, for the >> DSL. The builder already inserts a copy wherever an op reads
// a blob from another location; these say it explicitly:
//   Copy:       one blob to `to`             x >> g.add<Copy>("x_to_1", Location::cpu(1));
//   Distribute: one blob to every location   x >> g.add<Distribute>("w_out", locations);
//   Aggregate:  many blobs summed (or averaged) at one location, in bottom order, so every
//               run gives bit-identical results   B{g0, g1} >> g.add<Aggregate>("sum", server);
// Their copies are the graph's own (Graph::copy_to): one per (blob, location), shared with the
// builder's, named "<blob>@<location>", and a blob already at the destination is not copied. A
// top given by the caller (>> B{...}) gets a copy op of its own writing into it instead. The
// copy and sum ops run on the thread current when the composite is created.
#pragma once

#include <vector>

#include "purine/graph.hpp"

namespace purine {

class Copy : public Composite {
 public:
  Copy(Graph& graph, const std::string& name, Location to);

 protected:
  void setup() override;

 private:
  Location to_;
};

class Distribute : public Composite {
 public:
  // Throws purine::Error on an empty list.
  Distribute(Graph& graph, const std::string& name, std::vector<Location> to);

 protected:
  void setup() override;

 private:
  std::vector<Location> to_;
};

class Aggregate : public Composite {
 public:
  enum class Mode { kSum, kAverage };
  Aggregate(Graph& graph, const std::string& name, Location at, Mode mode = Mode::kSum);

 protected:
  // Throws purine::Error on no bottoms or bottoms of different shapes, naming the blobs.
  void setup() override;

 private:
  Location at_;
  Mode mode_;
};

}  // namespace purine
