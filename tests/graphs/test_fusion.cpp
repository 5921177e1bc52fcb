// graphs/fusion.hpp: conv + bias + relu become one conv_bias_relu op, and bias + relu one bias_relu
// op, where nothing else reads the intermediate blobs, and the fused graph computes the unfused
// one's floats, forward and backward; a graph's local updates become one sgd_update per set of
// attributes, the same floats.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <string>

#include "graphs/data_parallel.hpp"
#include "graphs/fusion.hpp"
#include "graphs/initialize.hpp"
#include "graphs/layers.hpp"
#include "graphs/sgd.hpp"
#include "purine/autodiff.hpp"
#include "purine/dsl.hpp"
#include "purine/runnable.hpp"
#include "tests/same_bits.hpp"

using namespace purine;
using purine::testing::same_bits;

namespace {

int count_type(const Graph& g, const std::string& type) {
  int n = 0;
  for (const auto& op : g.ops()) n += op->type() == type;
  return n;
}

// images -> conv1 (3x3, 6) -> relu1 -> conv2 (3x3, 8, stride 2) -> relu2 -> fc -> softmax loss.
struct Net {
  Graph g;
  Blob* images = nullptr;
  Blob* labels = nullptr;
  Blob* loss = nullptr;
  Gradients grads;
  std::vector<Blob*> wrt;

  explicit Net(bool fuse) {
    images = g.add_blob("images", {4, 2, 9, 9});
    labels = g.add_blob("labels", {4});
    Blob* x = (B{images} >> g.add<ConvLayer>("conv1", ConvLayer::Options{6, 3, 1, 1}) >>
               g.add<ActivationLayer>("relu1", "relu") >>
               g.add<ConvLayer>("conv2", ConvLayer::Options{8, 3, 2, 1}) >>
               g.add<ActivationLayer>("relu2", "relu") >>
               g.add<InnerProductLayer>("fc", InnerProductLayer::Options{3}))
                  .top(0);
    auto& xent = g.add<SoftmaxLossLayer>("loss");
    B{x, labels} >> xent;
    loss = xent.top(0);
    if (fuse) REQUIRE(fuse_conv_bias_relu(g) == 2);
    wrt = {images};
    for (const Parameter& p : g.parameters()) wrt.push_back(p.blob);
    grads = backward(g, loss, wrt);
    initialize_parameters(g, 5);
    Rng rng(6);
    std::vector<float> pixels(images->shape().count()), classes{0, 2, 1, 2};
    for (float& v : pixels) v = static_cast<float>(rng.uniform(-1, 1));
    images->tensor().set_values(pixels);
    labels->tensor().set_values(classes);
  }
};

}  // namespace

TEST_CASE("conv, bias and relu become one conv_bias_relu op", "[fusion]") {
  Net net(true);
  const Graph& g = net.g;
  CHECK(count_type(g, "conv_bias_relu") == 2);
  CHECK(count_type(g, "conv") == 0);
  CHECK(count_type(g, "bias") == 1);  // fc's, which no relu follows
  CHECK(count_type(g, "relu") == 0);
  const Op* fused = g.op("conv2::conv_bias_relu");
  REQUIRE(fused->inputs().size() == 3);
  CHECK(fused->inputs()[1]->name() == "conv2::weight");
  CHECK(fused->inputs()[2]->name() == "conv2::bias");
  CHECK(fused->outputs()[0]->name() == "relu2::top");  // the relu's output keeps its name
  CHECK(fused->kernel().attrs().get_int("stride", 1) == 2);
  CHECK(g.find_blob("conv2::top") == nullptr);  // the pre-activation is gone
  // The parameters (what checkpoints hold) are the unfused graph's.
  Net plain(false);
  REQUIRE(g.parameters().size() == plain.g.parameters().size());
  for (size_t i = 0; i < g.parameters().size(); ++i)
    CHECK(g.parameters()[i].blob->name() == plain.g.parameters()[i].blob->name());
  // The backward pass differentiates the fused op: bias_relu_grad reads its output.
  CHECK(g.find_op("conv2::conv_bias_relu::grad::op0") != nullptr);
  CHECK(g.find_op("relu2::relu::grad::op0") == nullptr);
  // Its temporary, the pre-activation's gradient, is named after what makes it.
  CHECK(g.find_blob("conv2::conv_bias_relu::grad::bias_relu_grad") != nullptr);
}

// Runs both nets (Net or Mlp) once: the same loss and gradients, bit for bit.
template <typename Network>
void check_same_floats(Network& fused, Network& plain) {
  Runnable(fused.g).run();
  Runnable(plain.g).run();
  CHECK(same_bits(fused.loss->tensor(), plain.loss->tensor()));
  REQUIRE(fused.wrt.size() == plain.wrt.size());
  for (size_t i = 0; i < fused.wrt.size(); ++i) {
    INFO(plain.wrt[i]->name());
    CHECK(
        same_bits(fused.grads.of(fused.wrt[i])->tensor(), plain.grads.of(plain.wrt[i])->tensor()));
  }
}

TEST_CASE("a fused graph computes the unfused graph's loss and gradients bit for bit",
          "[fusion][determinism]") {
  Net fused(true), plain(false);
  check_same_floats(fused, plain);
  for (Blob* w : plain.wrt) {  // gradients that are all zero would prove nothing
    INFO(w->name());
    const std::vector<float> grad = plain.grads.of(w)->tensor().values();
    CHECK(std::any_of(grad.begin(), grad.end(), [](float v) { return v != 0; }));
  }
}

namespace {

// images -> conv (3x3, 5) -> bn -> relu -> fc -> softmax loss, the batch norm in `mode`;
// `peek`: another op reads the batch norm's output too.
struct BnNet {
  Graph g;
  Blob* loss = nullptr;
  Gradients grads;
  std::vector<Blob*> wrt;

  BnNet(bool fuse, const std::string& mode, bool peek = false) {
    Blob* images = g.add_blob("images", {4, 2, 6, 6});
    Blob* labels = g.add_blob("labels", {4});
    Blob* normalized =
        (B{images} >> g.add<ConvLayer>("conv", ConvLayer::Options{5, 3, 1, 1}) >>
         g.add<BatchNormLayer>("bn", BatchNormLayer::Options{1e-5, 0.9, mode == "train"}))
            .top(0);
    if (peek) g.apply("peek", "relu", {}, {normalized});
    Blob* x = (B{normalized} >> g.add<ActivationLayer>("relu", "relu") >>
               g.add<InnerProductLayer>("fc", InnerProductLayer::Options{3}))
                  .top(0);
    auto& xent = g.add<SoftmaxLossLayer>("loss");
    B{x, labels} >> xent;
    loss = xent.top(0);
    if (fuse) fuse_forward(g, /*siblings=*/true);
    wrt = {images};
    for (const Parameter& p : g.parameters()) wrt.push_back(p.blob);
    grads = backward(g, loss, wrt);
    initialize_parameters(g, 11);
    Rng rng(12);
    std::vector<float> pixels(images->shape().count());
    for (float& v : pixels) v = static_cast<float>(rng.uniform(-1, 1));
    images->tensor().set_values(pixels);
    labels->tensor().set_values({1, 0, 2, 1});
  }
};

}  // namespace

TEST_CASE("batch_norm and relu become one batch_norm_relu op, the same floats",
          "[fusion][determinism]") {
  for (const char* mode : {"train", "test"}) {
    INFO(mode);
    BnNet fused(true, mode), plain(false, mode);
    CHECK(count_type(fused.g, "batch_norm_relu") == 1);
    CHECK(count_type(fused.g, "batch_norm") == 0);
    CHECK(count_type(fused.g, "relu") == 0);
    CHECK(count_type(fused.g, "batch_norm_relu_grad") == 1);
    CHECK(count_type(fused.g, "relu_grad") == 0);
    const Op* op = fused.g.op("bn::batch_norm_relu");
    CHECK(op->kernel().attrs().get_string("mode") == mode);
    CHECK(op->outputs()[0]->name() == "relu::top");
    CHECK(fused.g.find_blob("bn::top") == nullptr);
    check_same_floats(fused, plain);
    // Every blob both graphs have (the running statistics among them) holds the same bits.
    int compared = 0;
    for (const auto& blob : plain.g.blobs()) {
      Blob* twin = fused.g.find_blob(blob->name());
      if (!twin) continue;
      INFO(blob->name());
      CHECK(same_bits(twin->tensor(), blob->tensor()));
      ++compared;
    }
    // Not compared by name: bn::top and its gradient, gone, and the batch norm's three input
    // gradients, named after the op that makes them (bn::bn::grad::in0 becomes
    // bn::batch_norm_relu::grad::in0; check_same_floats compared the gradients they lead to).
    CHECK(compared + 5 == static_cast<int>(plain.g.blobs().size()));
  }
  BnNet peeked(true, "train", /*peek=*/true);
  CHECK(count_type(peeked.g, "batch_norm_relu") == 0);
  CHECK(count_type(peeked.g, "batch_norm") == 1);
}

namespace {

// images -> conv_relu (3x3, 4) -> r0; block1: relu(conv (3x3, 4) of r0 + r0) -> r1; block2:
// relu(conv of r1 + r1) -> r2 -> fc -> softmax loss. r1 feeds block2's convolution and its sum,
// so autodiff sums two gradients into r1's before block1's relu gradient.
struct ResidualNet {
  Graph g;
  Blob* loss = nullptr;
  Gradients grads;
  std::vector<Blob*> wrt;

  explicit ResidualNet(bool fuse) {
    Blob* images = g.add_blob("images", {3, 2, 5, 5});
    Blob* labels = g.add_blob("labels", {3});
    Blob* x = (B{images} >> g.add<ConvLayer>("stem", ConvLayer::Options{4, 3, 1, 1}) >>
               g.add<ActivationLayer>("stem_relu", "relu"))
                  .top(0);
    for (const char* block : {"block1", "block2"}) {
      Graph::Scope scope(g, block);
      Blob* branch = (B{x} >> g.add<ConvLayer>("conv", ConvLayer::Options{4, 3, 1, 1})).top(0);
      x = (B{branch, x} >> g.add<SumLayer>("sum") >> g.add<ActivationLayer>("relu", "relu")).top(0);
    }
    auto& xent = g.add<SoftmaxLossLayer>("loss");
    B{(B{x} >> g.add<InnerProductLayer>("fc", InnerProductLayer::Options{3})).top(0), labels} >>
        xent;
    loss = xent.top(0);
    if (fuse) fuse_forward(g, /*siblings=*/true);
    wrt = {images};
    for (const Parameter& p : g.parameters()) wrt.push_back(p.blob);
    grads = backward(g, loss, wrt);
    if (fuse) REQUIRE(fuse_relu_grad_sums(g) == 1);
    initialize_parameters(g, 21);
    Rng rng(22);
    std::vector<float> pixels(images->shape().count());
    for (float& v : pixels) v = static_cast<float>(rng.uniform(-1, 1));
    images->tensor().set_values(pixels);
    labels->tensor().set_values({2, 0, 1});
  }
};

}  // namespace

TEST_CASE(
    "a residual join's sum and relu become one sum_relu op, and the gradients gathered "
    "into its output one relu_grad, the same floats",
    "[fusion][determinism]") {
  ResidualNet fused(true), plain(false);
  CHECK(count_type(fused.g, "sum_relu") == 2);
  CHECK(count_type(fused.g, "relu") == 0);
  // Two joins, and the gradients gathered into r0 and r1; r0's go into conv_bias_relu's
  // gradient, not a relu_grad.
  CHECK(count_type(plain.g, "sum") == 4);
  CHECK(count_type(fused.g, "sum") == 1);
  const Op* join = fused.g.op("block1::sum::sum_relu");
  REQUIRE(join->inputs().size() == 2);
  CHECK(join->inputs()[1]->name() == "stem_relu::top");
  CHECK(join->outputs()[0]->name() == "block1::relu::top");
  CHECK(fused.g.find_blob("block1::sum::top") == nullptr);
  // block1's relu gradient reads r1 and the two gradients that r1's readers give it: block2's
  // data gradient, and block2's relu gradient, which its sum passes on.
  const Op* grad = fused.g.op("block1::sum::sum_relu::grad::op0");
  CHECK(grad->type() == "relu_grad");
  REQUIRE(grad->inputs().size() == 3);
  CHECK(grad->inputs()[0]->name() == "block1::relu::top");
  CHECK((grad->inputs()[1]->name() == "block2::sum::sum_relu::grad::relu_grad" ||
         grad->inputs()[2]->name() == "block2::sum::sum_relu::grad::relu_grad"));
  CHECK(fused.g.find_blob("block1::relu::top::grad") == nullptr);  // the sum's output, gone
  CHECK(fused.g.op("block2::sum::sum_relu::grad::op0")->inputs().size() == 2);  // fc's alone
  // Every input of a sum_relu gets its relu_grad's output as its gradient: the branch's
  // gradient ops read it, and so does the sum of the shortcut's (r0's) gradients.
  std::set<std::string> readers;
  for (const Op* reader : grad->outputs()[0]->readers()) readers.insert(reader->name());
  CHECK(readers ==
        std::set<std::string>{"block1::conv::add_bias::grad::op0", "block1::conv::conv::grad::op0",
                              "block1::conv::conv::grad::op1", "stem_relu::top::grad_sum"});
  check_same_floats(fused, plain);
  for (Blob* w : plain.wrt) {  // gradients that are all zero would prove nothing
    INFO(w->name());
    const std::vector<float> values = plain.grads.of(w)->tensor().values();
    CHECK(std::any_of(values.begin(), values.end(), [](float v) { return v != 0; }));
  }
}

TEST_CASE("sum and relu stay apart at a GPU or where the sum has another reader", "[fusion]") {
  Graph g;
  Blob* a = g.add_blob("a", {2, 3});
  Blob* b = g.add_blob("b", {2, 3});
  Blob* peeked = g.apply("peeked", "sum", {}, {a, b})[0];
  g.apply("peeked_relu", "relu", {}, {peeked});
  g.apply("peek", "scale", {}, {peeked});
  {
    Graph::Placement gpu(g, Location::gpu(0));
    Blob* c = g.add_blob("c", {2, 3});
    g.apply("gpu_relu", "relu", {}, {g.apply("gpu_sum", "sum", {}, {c, c})[0]});
  }
  CHECK(fuse_sum_relu(g) == 0);
  CHECK(count_type(g, "sum") == 2);
  CHECK(count_type(g, "relu") == 2);
}

TEST_CASE("a chain whose pre-activation has another reader is not fused", "[fusion]") {
  SECTION("the biased output is read by the relu and by another op") {
    Graph g;
    Blob* images = g.add_blob("images", {2, 2, 6, 6});
    auto& conv = g.add<ConvLayer>("conv", ConvLayer::Options{4, 3, 1, 1});
    Blob* pre = (B{images} >> conv).top(0);
    Blob* post = (B{pre} >> g.add<ActivationLayer>("relu", "relu")).top(0);
    g.apply("skip", "sum", {}, {pre, post});  // a residual-style second reader
    CHECK(fuse_conv_bias_relu(g) == 0);
    CHECK(count_type(g, "conv") == 1);
    CHECK(count_type(g, "relu") == 1);
  }
  SECTION("the convolution's output is read by the bias and by another op") {
    Graph g;
    Blob* images = g.add_blob("images", {2, 2, 6, 6});
    Blob* w = g.add_blob("w", {4, 2, 3, 3});
    Blob* b = g.add_blob("b", {4});
    Blob* z = g.apply("conv", "conv", Attrs().set("pad", 1), {images, w})[0];
    Blob* y = g.apply("bias", "bias", {}, {z, b})[0];
    g.apply("relu", "relu", {}, {y});
    g.apply("peek", "relu", {}, {z});
    CHECK(fuse_conv_bias_relu(g) == 0);
    CHECK(count_type(g, "conv") == 1);
  }
  SECTION("the biased output is copied to another location") {
    Graph g;
    Blob* images = g.add_blob("images", {2, 2, 6, 6});
    Blob* pre = (B{images} >> g.add<ConvLayer>("conv", ConvLayer::Options{4, 3, 1, 1})).top(0);
    (B{pre} >> g.add<ActivationLayer>("relu", "relu")).top(0);
    g.copy_to(pre, Location::cpu(0, 1), Graph::kMainThread);
    CHECK(fuse_conv_bias_relu(g) == 0);
  }
  SECTION("the relu runs at another location") {
    Graph g;
    Blob* images = g.add_blob("images", {2, 2, 6, 6});
    Blob* pre = (B{images} >> g.add<ConvLayer>("conv", ConvLayer::Options{4, 3, 1, 1})).top(0);
    Graph::Placement elsewhere(g, Location::cpu(0, 1));
    (B{pre} >> g.add<ActivationLayer>("relu", "relu")).top(0);
    CHECK(fuse_conv_bias_relu(g) == 0);
    CHECK(count_type(g, "relu") == 1);
  }
}

namespace {

// images -> three 1x1 convolutions with ReLUs ("a", "b", "c": 5, 3 and 2 channels) and a 3x3 one
// ("d": 4 channels, pad 1), all reading the images; their outputs concatenated -> fc -> softmax
// loss. Fused as training fuses (the conv chains, then the siblings when `siblings`).
// Equal within 1e-6 of the largest magnitude in `want`, which must not be all zeros.
void check_close(const Tensor& got, const Tensor& want) {
  const std::vector<float> a = got.values(), b = want.values();
  REQUIRE(a.size() == b.size());
  float largest = 0;
  for (float v : b) largest = std::max(largest, std::abs(v));
  CHECK(largest > 0);
  for (size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).margin(1e-6f * largest));
}

struct SiblingNet {
  Graph g;
  Blob* loss = nullptr;
  Gradients grads;
  std::vector<Blob*> wrt, tops;

  SiblingNet(bool siblings, int64_t plane) {
    Blob* images = g.add_blob("images", {4, 6, plane, plane});
    Blob* labels = g.add_blob("labels", {4});
    auto conv_relu = [&](const std::string& name, int64_t outputs, int64_t kernel) {
      return (B{images} >>
              g.add<ConvLayer>(name, ConvLayer::Options{outputs, kernel, 1, kernel / 2}) >>
              g.add<ActivationLayer>(name + "_relu", "relu"))
          .top(0);
    };
    tops = {conv_relu("a", 5, 1), conv_relu("b", 3, 1), conv_relu("c", 2, 1), conv_relu("d", 4, 3)};
    Blob* x = (B{tops} >> g.add<ConcatLayer>("concat", 1) >>
               g.add<InnerProductLayer>("fc", InnerProductLayer::Options{3}))
                  .top(0);
    auto& xent = g.add<SoftmaxLossLayer>("loss");
    B{x, labels} >> xent;
    loss = xent.top(0);
    REQUIRE(fuse_forward(g, siblings) == (siblings ? 4 + 1 : 4));  // 4 conv chains, 1 group
    wrt = {images};
    for (const Parameter& p : g.parameters()) wrt.push_back(p.blob);
    grads = backward(g, loss, wrt);
    initialize_parameters(g, 13);
    Rng rng(14);
    std::vector<float> pixels(images->shape().count());
    for (float& v : pixels) v = static_cast<float>(rng.uniform(-1, 1));
    images->tensor().set_values(pixels);
    labels->tensor().set_values({1, 2, 0, 1});
  }
};

}  // namespace

TEST_CASE("sibling convolutions of one input become one op over all their channels", "[fusion]") {
  // 2x2 planes: the channels-last GEMMs GoogLeNet's 4a-4e take; 3x3: the general kernels.
  for (int64_t plane : {2, 3}) {
    INFO("planes of " << plane << "x" << plane);
    SiblingNet fused(true, plane), plain(false, plane);
    const Graph& g = fused.g;
    CHECK(count_type(g, "conv_bias_relu") == 2);  // a+b+c's and d's (another kernel size)
    const Op* op = g.op("a+b+c::conv_bias_relu");
    REQUIRE(op->inputs().size() == 3);
    CHECK(op->inputs()[0]->name() == "images");
    CHECK(op->inputs()[1]->name() == "a+b+c::weight");
    CHECK(op->inputs()[1]->shape() == Shape{10, 6, 1, 1});
    CHECK(op->inputs()[2]->shape() == Shape{10});
    CHECK(op->outputs()[0]->shape() == Shape{4, 10, plane, plane});
    std::vector<std::string> joined;
    for (const Blob* b : g.op("a+b+c::weight::concat")->inputs()) joined.push_back(b->name());
    CHECK(joined == std::vector<std::string>{"a::weight", "b::weight", "c::weight"});
    // Each member's output keeps its name, written by the split.
    const Op* split = g.op("a+b+c::split");
    REQUIRE(split->outputs().size() == 3);
    for (size_t i = 0; i < 3; ++i) {
      CHECK(split->outputs()[i] == fused.tops[i]);
      CHECK(fused.tops[i]->writers() == std::vector<Op*>{const_cast<Op*>(split)});
    }
    CHECK(g.find_op("a::conv_bias_relu") == nullptr);
    CHECK(g.op("d::conv_bias_relu")->inputs()[0]->name() == "images");
    REQUIRE(g.parameters().size() == plain.g.parameters().size());
    for (size_t i = 0; i < g.parameters().size(); ++i)
      CHECK(g.parameters()[i].blob->name() == plain.g.parameters()[i].blob->name());

    // Close to the separate ops, not the same floats: the images' gradient is one sum over the
    // 10 channels instead of three added, and a GEMM over more columns may sum in another order
    // (oneDNN's AVX2 sgemm does over the 2x2 planes).
    Runnable(fused.g).run();
    Runnable(plain.g).run();
    for (size_t i = 0; i < fused.tops.size(); ++i)
      check_close(fused.tops[i]->tensor(), plain.tops[i]->tensor());
    check_close(fused.loss->tensor(), plain.loss->tensor());
    for (size_t i = 0; i < fused.wrt.size(); ++i) {
      INFO(plain.wrt[i]->name());
      check_close(fused.grads.of(fused.wrt[i])->tensor(), plain.grads.of(plain.wrt[i])->tensor());
    }
  }
}

TEST_CASE("sibling convolutions are left apart at a GPU, in an order or with other attributes",
          "[fusion]") {
  Graph g;
  Blob* x = g.add_blob("x", {2, 4, 3, 3});
  auto conv_relu = [&](const std::string& name, int64_t stride) {
    return (B{x} >> g.add<ConvLayer>(name, ConvLayer::Options{2, 1, stride, 0}) >>
            g.add<ActivationLayer>(name + "_relu", "relu"))
        .top(0);
  };
  conv_relu("a", 1);
  conv_relu("b", 2);  // another stride
  REQUIRE(fuse_conv_bias_relu(g) == 2);
  CHECK(fuse_sibling_convolutions(g) == 0);
  {
    Graph::Placement gpu(g, Location::gpu(0));
    Blob* y = g.add_blob("y", {2, 4, 3, 3});
    for (const char* name : {"c", "d"})
      B{y} >> g.add<ConvLayer>(name, ConvLayer::Options{2, 1, 1, 0}) >>
          g.add<ActivationLayer>(std::string(name) + "_relu", "relu");
  }
  Blob* z = g.add_blob("z", {2, 4, 3, 3});
  for (const char* name : {"e", "f"})
    B{z} >> g.add<ConvLayer>(name, ConvLayer::Options{2, 1, 1, 0}) >>
        g.add<ActivationLayer>(std::string(name) + "_relu", "relu");
  REQUIRE(fuse_conv_bias_relu(g) == 4);
  g.add_order(g.op("e::conv_bias_relu"), g.op("f::conv_bias_relu"));
  CHECK(fuse_sibling_convolutions(g) == 0);
  CHECK(count_type(g, "conv_bias_relu") == 6);
}

TEST_CASE("replace_ops refuses a chain whose inner blob is read outside it", "[fusion]") {
  Graph g;
  Blob* x = g.add_blob("x", {2, 3});
  Blob* y = g.apply("a", "relu", {}, {x})[0];
  Blob* z = g.apply("b", "relu", {}, {y})[0];
  g.apply("c", "relu", {}, {y});
  CHECK_THROWS_WITH(g.replace_ops({g.op("a"), g.op("b")}, {y}, "ab", "relu", {}, {x}, {z}),
                    Catch::Contains("is used by op 'c', which is not replaced"));
  CHECK(g.ops().size() == 3);  // nothing changed
  CHECK(g.find_blob("a::out0") != nullptr);
  CHECK_THROWS_WITH(g.replace_ops({g.op("b")}, {z}, "b2", "relu", {}, {y}, {}, {z}),
                    Catch::Contains("blob 'b::out0' is both removed and released"));
}

namespace {

// images -> fc1 -> relu1 -> fc2 -> relu2 -> fc3 -> softmax loss: the MLP's bias + relu pairs.
// `wrt_images`: differentiate the images too.
struct Mlp {
  Graph g;
  Blob* loss = nullptr;
  Gradients grads;
  std::vector<Blob*> wrt;

  // `products`: then also the inner products with their biases (as at a GPU).
  Mlp(bool fuse, bool wrt_images, bool products = false) {
    Blob* images = g.add_blob("images", {4, 1, 5, 5});
    Blob* labels = g.add_blob("labels", {4});
    Blob* x = (B{images} >> g.add<InnerProductLayer>("fc1", InnerProductLayer::Options{7}) >>
               g.add<ActivationLayer>("relu1", "relu") >>
               g.add<InnerProductLayer>("fc2", InnerProductLayer::Options{6}) >>
               g.add<ActivationLayer>("relu2", "relu") >>
               g.add<InnerProductLayer>("fc3", InnerProductLayer::Options{3}))
                  .top(0);
    auto& xent = g.add<SoftmaxLossLayer>("loss");
    B{x, labels} >> xent;
    loss = xent.top(0);
    if (fuse)
      REQUIRE(fuse_forward(g, /*siblings=*/true) == 2);  // at a CPU: the bias_relu pairs only
    if (fuse && products) REQUIRE(fuse_inner_product_bias(g, /*gpus_only=*/false) == 3);
    if (wrt_images) wrt.push_back(images);
    for (const Parameter& p : g.parameters()) wrt.push_back(p.blob);
    grads = backward(g, loss, wrt);
    initialize_parameters(g, 8);
    Rng rng(9);
    std::vector<float> pixels(images->shape().count());
    for (float& v : pixels) v = static_cast<float>(rng.uniform(-1, 1));
    images->tensor().set_values(pixels);
    labels->tensor().set_values({2, 0, 1, 2});
  }
};

}  // namespace

TEST_CASE("an inner product's bias and relu become one bias_relu op, the same floats",
          "[fusion][determinism]") {
  for (bool wrt_images : {true, false}) {
    INFO("images differentiated: " << wrt_images);
    Mlp fused(true, wrt_images), plain(false, wrt_images);
    CHECK(count_type(fused.g, "bias_relu") == 2);
    CHECK(count_type(fused.g, "bias") == 1);  // fc3's, which no relu follows
    CHECK(count_type(fused.g, "relu") == 0);
    const Op* op = fused.g.op("fc1::bias_relu");
    CHECK(op->inputs()[0]->name() == "fc1::inner_product::out0");
    CHECK(op->inputs()[1]->name() == "fc1::bias");
    CHECK(op->outputs()[0]->name() == "relu1::top");
    check_same_floats(fused, plain);
  }
}

TEST_CASE(
    "an inner product and its bias (and relu) become one inner_product_bias op, the same "
    "floats",
    "[fusion][determinism]") {
  for (bool wrt_images : {true, false}) {
    INFO("images differentiated: " << wrt_images);
    Mlp fused(true, wrt_images, true), plain(false, wrt_images);
    CHECK(count_type(fused.g, "inner_product_bias") == 3);
    for (const char* gone : {"inner_product", "bias", "bias_relu", "relu"}) {
      INFO(gone);
      CHECK(count_type(fused.g, gone) == 0);
    }
    const Op* fc1 = fused.g.op("fc1::inner_product_bias");
    CHECK(fc1->kernel().attrs().get_int("relu") == 1);
    CHECK(fc1->inputs()[0]->name() == "images");
    CHECK(fc1->inputs()[1]->name() == "fc1::weight");
    CHECK(fc1->inputs()[2]->name() == "fc1::bias");
    CHECK(fc1->outputs()[0]->name() == "relu1::top");
    CHECK(fused.g.op("fc3::inner_product_bias")->kernel().attrs().get_int("relu") == 0);
    check_same_floats(fused, plain);
  }
  // Training graphs fuse products only at GPUs: on a CPU the same two passes.
  Mlp cpu(true, false);
  CHECK(fuse_inner_product_bias(cpu.g, /*gpus_only=*/true) == 0);
  CHECK(count_type(cpu.g, "bias_relu") == 2);
}

TEST_CASE("bias_relu's bias gradient is computed where its input's gradient is not wanted",
          "[fusion]") {
  // bias + relu straight on the images: the bias's gradient needs the images' gradient, which
  // nothing else wants.
  std::vector<float> db[2];
  for (bool fuse : {true, false}) {
    Graph g;
    Blob* images = g.add_blob("images", {3, 4});
    Blob* labels = g.add_blob("labels", {3});
    Blob* b = g.add_blob("b", {4});
    Blob* y = g.apply("add_bias", "bias", {}, {images, b})[0];
    Blob* z = g.apply("relu", "relu", {}, {y})[0];
    Blob* loss = g.apply("loss", "softmax_cross_entropy", {}, {z, labels})[0];
    if (fuse) REQUIRE(fuse_bias_relu(g) == 1);
    const Gradients grads = backward(g, loss, {b});
    images->tensor().set_values({1, -2, 3, -4, 0.5, 2, -1, 1, -3, 1, 2, 3});
    labels->tensor().set_values({0, 3, 1});
    b->tensor().set_values({0.5, 1, -1, 2});
    Runnable(g).run();
    db[fuse] = grads.of(b)->tensor().values();
  }
  REQUIRE(db[1].size() == 4);
  CHECK(std::any_of(db[0].begin(), db[0].end(), [](float v) { return v != 0; }));
  CHECK(std::memcmp(db[0].data(), db[1].data(), 4 * sizeof(float)) == 0);
}

namespace {

// The MLP above with SGD (momentum, weight decay: the biases have none), its updates fused or
// not, after `runs` steps: every weight.
std::vector<std::vector<float>> trained_mlp(bool fuse_updates_too, int runs, int* update_ops) {
  Mlp net(true, false);
  SgdOptions options;
  options.weight_decay = 5e-4;
  SgdGraph sgd = add_sgd(net.g, net.grads, options);
  if (fuse_updates_too) CHECK(fuse_updates(net.g, /*gpus_only=*/false) == 6);
  *update_ops = count_type(net.g, "sgd_update");
  initialize_parameters(net.g, 8);  // the states too
  Runnable run(net.g);
  for (int k = 0; k < runs; ++k) {
    sgd.set_learning_rate(0.1 / (k + 1), 0);
    run.run();
  }
  std::vector<std::vector<float>> weights;
  for (const Parameter& p : net.g.parameters()) weights.push_back(p.blob->tensor().values());
  return weights;
}

}  // namespace

TEST_CASE("the updates of a graph become one sgd_update per set of attributes, the same floats",
          "[fusion][determinism]") {
  int fused_ops = 0, plain_ops = 0;
  const std::vector<std::vector<float>> fused = trained_mlp(true, 3, &fused_ops);
  const std::vector<std::vector<float>> plain = trained_mlp(false, 3, &plain_ops);
  CHECK(plain_ops == 6);
  CHECK(fused_ops == 2);  // the weights (decayed) and the biases (not)
  REQUIRE(fused.size() == plain.size());
  for (size_t i = 0; i < fused.size(); ++i) {
    INFO("parameter " << i);
    CHECK(fused[i] == plain[i]);
  }
  Mlp net(true, false);
  add_sgd(net.g, net.grads, SgdOptions{});
  CHECK(fuse_updates(net.g, /*gpus_only=*/true) == 0);  // all at a CPU
  CHECK(fuse_updates(net.g, /*gpus_only=*/false) == 6);
  const Op* op = net.g.op("sgd::update0@rank0:cpu");
  CHECK(op->inputs().size() == 6 * 3 + 1);
  CHECK(op->inputs().back()->name() == "sgd::lr@rank0:cpu");
  CHECK(op->inputs()[0]->name() == "fc1::weight");
  CHECK(op->outputs()[0]->name() == "fc1::weight::updated");
  CHECK(op->role() == OpRole::kOptimizer);
}

TEST_CASE("an update behind a gradient reduction is left alone", "[fusion]") {
  Graph g;
  DataParallelOptions options;
  const std::vector<Location> locations = {Location::cpu(0, 0), Location::cpu(0, 1)};
  build_data_parallel(
      g, locations,
      [](Graph& graph, int, int) {
        Blob* images = graph.add_blob("images", {2, 1, 4, 4});
        Blob* labels = graph.add_blob("labels", {2});
        Blob* x =
            (B{images} >> graph.add<InnerProductLayer>("fc1", InnerProductLayer::Options{5}) >>
             graph.add<InnerProductLayer>("fc2", InnerProductLayer::Options{3}))
                .top(0);
        auto& xent = graph.add<SoftmaxLossLayer>("loss");
        B{x, labels} >> xent;
        return ReplicaOutputs{xent.top(0), nullptr};
      },
      options);
  const int updates = count_type(g, "sgd_update");
  CHECK(updates >= 4);
  CHECK(fuse_updates(g, /*gpus_only=*/false) == 0);
  CHECK(count_type(g, "sgd_update") == updates);
}

TEST_CASE("updates at a CPU count the non-finite weights they write, keeping their names",
          "[fusion]") {
  Mlp net(true, false);
  SgdGraph sgd = add_sgd(net.g, net.grads, SgdOptions{});
  std::vector<Blob*> weights;  // the new weights, as the trainer's divergence check lists them
  for (const Parameter& p : net.g.parameters())
    weights.push_back(net.g.blob(p.blob->name() + "::updated"));
  Blob* elsewhere = net.g.add_blob("written_elsewhere", {2});  // no update writes it
  weights.push_back(elsewhere);
  // Updates in an order stay as they are (replace_ops refuses them).
  net.g.add_order(net.g.op("fc1::weight::update"), net.g.op("fc3::bias::update"));
  std::vector<Blob*> uncounted, counts;
  {
    Graph::Scope scope(net.g, "divergence", true);
    counts = count_in_updates(net.g, weights, &uncounted);
  }
  REQUIRE(counts.size() == 4);
  CHECK(uncounted == std::vector<Blob*>{net.g.blob("fc1::weight::updated"),
                                        net.g.blob("fc3::bias::updated"), elsewhere});
  const Op* update = net.g.op("fc2::weight::update");  // the same name
  CHECK(update->kernel().attrs().get_int("count_non_finite", 0) == 1);
  REQUIRE(update->outputs().size() == 3);
  CHECK(update->outputs()[0]->name() == "fc2::weight::updated");
  CHECK(update->outputs()[2]->name() == "divergence::fc2::weight::update::non_finite");
  CHECK(update->outputs()[2] == counts[1]);
  CHECK(update->role() == OpRole::kOptimizer);
  CHECK(net.g.op("fc1::weight::update")->outputs().size() == 2);

  // A history that makes one new weight infinite: its update counts 1, the others 0.
  initialize_parameters(net.g, 8);  // the states too
  net.g.blob("fc2::weight::history")->tensor().mutable_data()[3] = INFINITY;
  sgd.set_learning_rate(0.1, 0);
  Runnable(net.g).run();
  std::vector<float> counted;
  for (Blob* count : counts) counted.push_back(count->tensor().values()[0]);
  CHECK(counted == std::vector<float>{0, 1, 0, 0});  // fc1 bias, fc2 weight, fc2 bias, fc3 weight
}
