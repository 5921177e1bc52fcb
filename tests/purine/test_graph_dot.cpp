// Graph pictures (purine/graph_dot.hpp): the layout attributes, the update cycle of weights and
// gradients, gradient labels, communication groups named by layer, every rank of a layout built
// in one process, size and dpi. Asserts the GraphViz text; nothing is rendered.
#include <catch2/catch.hpp>

#include "purine/graph_dot.hpp"
#include "purine/internal/dot_names.hpp"
#include "train/trainer.hpp"

using namespace purine;

namespace {

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

// The training graph of an mlp on small synthetic images, as `purine graph` builds it.
std::unique_ptr<Graph> mlp_graph(int ranks) {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = "synthetic:1x8x8:4";
  o.batch = 8;
  o.evaluate = false;
  o.ranks = ranks;
  o.rank = 0;
  if (ranks > 1) o.parallel = ParallelLayout::kData;
  std::unique_ptr<Graph> g = build_training_graph(o);
  g->validate();
  return g;
}

}  // namespace

TEST_CASE("a collapsed picture runs forward left to right, backward right to left beneath it",
          "[graph][dot]") {
  const std::unique_ptr<Graph> g = mlp_graph(1);
  const std::string dot = draw_dot(*g, DotPicture{});
  CHECK(has(dot, "rankdir=LR;"));
  CHECK(has(dot, "dpi=96;"));
  CHECK_FALSE(has(dot, "  size="));  // no limit unless asked
  // A layer's forward and backward in one rank, the forward above (the invisible edge).
  CHECK(has(dot,
            "{ rank=same; \"replica0::mlp::fc2|forward|rank0:cpu\"; "
            "\"replica0::mlp::fc2|backward|rank0:cpu\"; "
            "\"replica0::mlp::fc2|backward|rank0:cpu\" -> "
            "\"replica0::mlp::fc2|forward|rank0:cpu\" [style=invis]; }"));
  // Backward edges are written head to tail with dir=back, so that they run right to left.
  CHECK(has(dot,
            "\"replica0::mlp::fc1|backward|rank0:cpu\" -> "
            "\"replica0::mlp::fc2::inner_product::grad::in0\" [dir=back"));
  CHECK(count(dot, "dir=back") >= 8);
  // A forward tensor the backward reads takes no part in the layout.
  CHECK(has(dot,
            "\"replica0::mlp::relu1::top\" -> \"replica0::mlp::fc2|backward|rank0:cpu\" "
            "[color=\"#bbbbbb\", constraint=false]"));
}

TEST_CASE("a collapsed picture draws weights and gradients with the update cycle", "[graph][dot]") {
  const std::unique_ptr<Graph> g = mlp_graph(1);
  const std::string dot = draw_dot(*g, DotPicture{});
  const std::string weights = "\"weights|replica0::mlp::fc1|rank0:cpu\"";
  const std::string gradients = "\"gradients|replica0::mlp::fc1|rank0:cpu\"";
  const std::string forward = "\"replica0::mlp::fc1|forward|rank0:cpu\"";
  const std::string backward = "\"replica0::mlp::fc1|backward|rank0:cpu\"";
  const std::string update = "\"replica0::mlp::fc1|optimizer|rank0:cpu\"";
  CHECK(has(dot, weights + " [shape=box, style=filled, fillcolor=\"#fff2cc\", "
                           "label=\"fc1.weight [256,64]\\nfc1.bias [256]\""));
  CHECK(has(dot, gradients + " [shape=box"));
  CHECK(has(dot, "label=\"d fc1.weight [256,64]\\nd fc1.bias [256]\""));
  CHECK(has(dot, weights + " -> " + forward + ";"));              // weights -> forward
  CHECK(has(dot, gradients + " -> " + backward + " [dir=back"));  // backward -> grads
  CHECK(has(dot, gradients + " -> " + update + ";"));             // grads -> update
  CHECK(has(dot, update + " -> " + weights + " [style=dashed"));  // update -> weights
  CHECK(has(dot, update + " [shape=circle, style=filled, fillcolor=\"#d9ead3\", "
                          "label=\"fc1\\nupdate\""));
  // The learning rate feeds every update alike: not drawn; neither is momentum, inside them.
  CHECK_FALSE(has(dot, "sgd::lr"));
  CHECK_FALSE(has(dot, "history"));
  // No gradient is named by autodiff's scopes.
  CHECK_FALSE(has(dot, "label=\"grad::"));
  // fc1's bias and ReLU are one bias_relu op of fc1 (fused, as purine train builds it): the
  // gradient fc2 sends back is relu1's output's.
  CHECK(has(dot, "label=\"d relu1.top\\n[8,256]\""));
}

TEST_CASE("a GPU's fused updates are drawn as updates of so many parameters", "[graph][dot]") {
  TrainOptions o;
  o.model = "mlp";
  o.data_dir = "synthetic:1x8x8:4";
  o.batch = 8;
  o.evaluate = false;
  o.devices = {0};  // built, not run
  std::unique_ptr<Graph> g = build_training_graph(o);
  g->validate();
  const std::string dot = draw_dot(*g, DotPicture{});
  // Weights with decay, and biases without: two updates of three parameters each.
  CHECK(count(dot, "label=\"update\\n3 parameters\"") == 2);
  CHECK(has(dot, "\"gradients|replica0::mlp::fc2|rank0:gpu0\" -> \"sgd::update0@rank0:gpu0\""));
  o.optimizer = Optimizer::kAdam;  // four tensors per parameter, then the rate and the step
  g = build_training_graph(o);
  g->validate();
  CHECK(count(draw_dot(*g, DotPicture{}), "label=\"update\\n3 parameters\"") == 2);
}

TEST_CASE("gradients are named by what they are the gradient of", "[graph][dot]") {
  const std::unique_ptr<Graph> g = mlp_graph(1);
  const Blob* grad = g->blob("replica0::mlp::fc1::inner_product::grad::in1");
  REQUIRE(dot::gradient_of(*g, grad) == g->blob("replica0::mlp::fc1::weight"));
  CHECK(dot::gradient_of(*g, g->blob("replica0::mlp::fc1::weight")) == nullptr);
  CHECK(dot::short_label("replica0::mlp::fc1::weight") == "fc1.weight");
  CHECK(dot::tensor_name("replica0::googlenet::inception_3a::concat::top",
                         {"replica0::googlenet::inception_3a"}) == "inception_3a.top");
  CHECK(dot::tensor_name("replica0::images", {"replica0::mlp::fc1"}) == "images");
  // An op's outputs named by Graph::apply are named after the op.
  CHECK(dot::tensor_name("replica1::net::bn1::square_sums::out0", {"replica1::net::bn1"}) ==
        "bn1.square_sums");
  CHECK(dot::tensor_name("replica1::net::bn1::sums::out2", {"replica1::net::bn1"}) == "bn1.sums2");
  CHECK(dot::name_list({"a", "b", "c", "d"}) == "a ... d (4)");
  // Expanded, each op is drawn, and the gradients still say what they are of.
  DotPicture expanded;
  expanded.collapse = false;
  const std::string dot = draw_dot(*g, expanded);
  CHECK(has(dot, "label=\"d fc1.weight\\n[256,64]\""));
  CHECK_FALSE(has(dot, "label=\"grad::"));
  // Weights are yellow there too, gradients orange.
  CHECK(has(dot,
            "\"replica0::mlp::fc1::weight\" [shape=box, style=filled, fillcolor=\"#fff2cc\", "
            "label=\"fc1.weight\\n[256,64]\""));
  CHECK(count(dot, "fillcolor=\"#fff2cc\"") == 6);  // 3 layers' weights and biases
  CHECK(count(dot, "shape=circle") > count(draw_dot(*g, DotPicture{}), "shape=circle"));
}

TEST_CASE("two ranks built in one process are drawn with their communication named by layer",
          "[graph][dot]") {
  const std::unique_ptr<Graph> g = mlp_graph(2);
  const std::string dot = draw_dot(*g, DotPicture{});
  CHECK(has(dot, "label=\"rank0:cpu\""));
  CHECK(has(dot, "label=\"rank1:cpu\""));
  CHECK(has(dot, "\"replica1::mlp::fc1|forward|rank1:cpu\""));
  // The fused bucket of the small gradients, one group between the ranks, named by its layers.
  CHECK(has(dot,
            "shape=ellipse, style=filled, fillcolor=\"#e4d7f5\", label=\"bucket\\nfc1, "
            "fc2, fc3\""));
  CHECK(has(dot, "\"gradients|replica1::mlp::fc3|rank1:cpu\" -> \"communication|"));
  // No op of the reductions is drawn alone by its type.
  CHECK_FALSE(has(dot, "label=\"split\\n@comm\""));
  CHECK_FALSE(has(dot, "label=\"concat\\n@comm\""));
  CHECK(count(dot, "fillcolor=\"#e4d7f5\"") < 12);
}

TEST_CASE("a picture takes Graphviz's size and dpi, and wraps long chains into bands",
          "[graph][dot]") {
  const std::unique_ptr<Graph> g = mlp_graph(1);
  DotPicture picture;
  picture.size = "16,10";
  picture.dpi = 150;
  const std::string dot = draw_dot(*g, picture);
  CHECK(has(dot, "size=\"16,10\";"));
  CHECK(has(dot, "dpi=150;"));
  picture.band_layers = 2;
  const std::string banded = draw_dot(*g, picture);
  // fc1, fc2, fc3 (each with its bias and ReLU) and the loss: two bands of two.
  CHECK(has(banded, "subgraph cluster_0_0 {"));
  CHECK(has(banded, "subgraph cluster_0_1 {"));
  CHECK_FALSE(has(banded, "subgraph cluster_0_2 {"));
  // An edge from one band to the next does not stretch the layout.
  CHECK(has(banded, "constraint=false"));
  picture.dpi = 0;
  CHECK_THROWS_WITH(draw_dot(*g, picture), "a picture needs a positive dpi, got 0");
}

TEST_CASE("GoogLeNet collapsed is some 140 vertices in bands, expanded every op", "[graph][dot]") {
  TrainOptions o;
  o.model = "googlenet";
  o.data_dir = "synthetic:1x28x28:10";
  o.evaluate = false;
  const std::unique_ptr<Graph> g = build_training_graph(o);
  g->validate();
  const std::string collapsed = draw_dot(*g, DotPicture{});
  CHECK(count(collapsed, "shape=circle") < 100);
  CHECK(count(collapsed, "shape=box") < 100);
  // Laid out left to right in bands of layers, each inception's weights one box and the parts
  // of a gradient its branches send back one box.
  CHECK(has(collapsed, "rankdir=LR;"));
  // (Fused, as purine train builds it: each convolution's bias and ReLU are in its op, so a ReLU
  // layer has no op of its own and GoogLeNet has three bands.)
  CHECK(has(collapsed, "subgraph cluster_0_2 {"));
  CHECK(has(collapsed, "label=\"inception_3a: 12 weights\\n163.7k values\""));
  // Two parts: the 1x1 and reduce branches are one op (fused siblings), and the pool branch.
  CHECK(has(collapsed, "label=\"d pool2.top\\n[64,192,4,4]\\n(2 parts)\""));
  DotPicture expanded;
  expanded.collapse = false;
  CHECK(count(draw_dot(*g, expanded), "shape=circle") > 350);
  // Unfused, the picture has the bias and relu ops and a band more.
  o.fuse = false;
  const std::unique_ptr<Graph> unfused = build_training_graph(o);
  CHECK(has(draw_dot(*unfused, DotPicture{}), "subgraph cluster_0_3 {"));
  CHECK(count(draw_dot(*unfused, expanded), "shape=circle") > 500);
}
