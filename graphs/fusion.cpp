#include "graphs/fusion.hpp"

#include <set>
#include <string>
#include <vector>

namespace purine {

namespace {

// The op writing `blob`, when it is the only writer, of type `type`, and `reader` is the blob's
// only reader; else null.
Op* sole_link(const Blob* blob, const char* type, const Op* reader) {
  if (blob->writers().size() != 1 || blob->readers().size() != 1 || blob->readers()[0] != reader ||
      blob->accumulating())
    return nullptr;
  Op* writer = blob->writers()[0];
  return writer->type() == type ? writer : nullptr;
}

bool same_place(const Op* a, const Op* b) {
  return a->location() == b->location() && a->thread() == b->thread() && a->role() == b->role();
}

// The scope of an op's full name ("a::b::conv" -> "a::b::"; "" at top level).
std::string scope_of(const std::string& name) {
  const size_t at = name.rfind("::");
  return at == std::string::npos ? "" : name.substr(0, at + 2);
}

}  // namespace

int fuse_conv_bias_relu(Graph& graph) {
  graph.validate();             // sets up every pending composite: all readers are in the graph
  std::set<const Op*> ordered;  // ops in an order (add_order): left alone
  for (const auto& op : graph.ops())
    for (const Op* before : op->ordered_after()) {
      ordered.insert(before);
      ordered.insert(op.get());
    }
  std::vector<Op*> relus;
  for (const auto& op : graph.ops())
    if (op->type() == "relu") relus.push_back(op.get());
  int fused = 0;
  for (Op* relu : relus) {
    if (relu->inputs().size() != 1 || relu->outputs().size() != 1) continue;
    Blob* biased = relu->inputs()[0];
    Op* bias = sole_link(biased, "bias", relu);
    if (!bias || bias->inputs().size() != 2) continue;
    Blob* convolved = bias->inputs()[0];
    Op* conv = sole_link(convolved, "conv", bias);
    if (!conv || conv->inputs().size() != 2 || convolved == bias->inputs()[1]) continue;
    if (!same_place(conv, bias) || !same_place(bias, relu)) continue;
    if (ordered.count(conv) || ordered.count(bias) || ordered.count(relu)) continue;
    if (graph.held_outside_ops(convolved) || graph.held_outside_ops(biased)) continue;
    graph.replace_ops(
        {conv, bias, relu}, {convolved, biased}, scope_of(conv->name()) + "conv_bias_relu",
        "conv_bias_relu", conv->kernel().attrs(),
        {conv->inputs()[0], conv->inputs()[1], bias->inputs()[1]}, {relu->outputs()[0]});
    ++fused;
  }
  return fused;
}

}  // namespace purine
