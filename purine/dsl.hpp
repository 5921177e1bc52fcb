// The >> builder DSL over a Graph:
//   B{x, w} >> g.add_op("fc", "inner_product") >> B{y};   // blobs into an op, op into blobs
//   B{data} >> conv1 >> relu1 >> pool1;                    // blobs into composites, chained
//   Blob* out = pool1.top(0);                              // tops a composite created itself
//   B{h} >> fc2 >> B{logits};                              // or tops given by the caller
// C++ forbids a bare braced list as an operand of >>, hence the B{...} (a std::vector<Blob*>).
#pragma once

#include <vector>

#include "purine/graph.hpp"

namespace purine {

using B = std::vector<Blob*>;

// Connects `inputs` to `op` and returns the op, so its outputs can follow.
inline Op* operator>>(const B& inputs, Op* op) {
  op->graph().set_inputs(op, inputs);
  return op;
}

// Connects `op` to the blobs it writes and returns them.
inline B operator>>(Op* op, const B& outputs) {
  op->graph().set_outputs(op, outputs);
  return outputs;
}

// Gives `composite` its bottom blobs; returns it for chaining.
inline Composite& operator>>(const B& bottom, Composite& composite) {
  composite.set_bottom(bottom);
  return composite;
}

// Feeds `from`'s tops to `to` as its bottom; returns `to`.
inline Composite& operator>>(Composite& from, Composite& to) {
  to.set_bottom(from.top());
  return to;
}

// Makes `composite` write into the given blobs; returns them.
inline B operator>>(Composite& composite, const B& top) {
  composite.set_top(top);
  return composite.top();
}

}  // namespace purine
