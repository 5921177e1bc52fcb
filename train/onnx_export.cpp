// The op mapping (Purine op -> ONNX opset 13 nodes):
//   conv           Conv (weights OIHW as they are; strides, pads on both sides)
//   bias           Add, the bias an initializer of shape [C, 1, ...] for inputs of rank > 2
//   inner_product  Flatten (axis 1, inputs of rank > 2) + Gemm (transB = 1)
//   relu, sigmoid, tanh   Relu, Sigmoid, Tanh
//   pool           MaxPool / AveragePool (ceil_mode 0: Purine rounds down; average divides by
//                  the whole window, count_include_pad = 1)
//   lrn            LRN (Purine's alpha is ONNX's: both divide it by size)
//   batch_norm     BatchNormalization with the running statistics ("test" mode only)
//   dropout        Identity ("test" mode only)
//   softmax        Softmax (the same axis; opset 13 normalizes along that axis alone)
//   concat         Concat; reshape: Reshape (a first dimension equal to the batch becomes 0,
//                  "copy the input's", so the batch stays symbolic)
//   sum, mul, scale   Sum, Mul, Mul by a scalar initializer
#include "train/onnx_export.hpp"

#include <cstring>
#include <set>

#include "base/error.hpp"
#include "models/models.hpp"
#include "operators/conv.hpp"
#include "operators/pool.hpp"
#include "purine/durable_file.hpp"
#include "purine/graph.hpp"
#include "purine/serialize.hpp"

#ifdef PURINE_HAVE_ONNX
#include <onnx/onnx_pb.h>
#endif

namespace purine {

#ifdef PURINE_HAVE_ONNX

namespace {

constexpr int64_t kOpset = 13;
constexpr char kBatch[] = "batch";

class OnnxWriter {
 public:
  OnnxWriter(Blob* input, onnx::GraphProto* out) : input_(input), out_(out) {}

  void add_op(const Op& op) {
    const std::string type = op.type();
    const Attrs& a = op.attrs();
    const std::vector<Blob*>& in = op.inputs();
    const std::vector<Blob*>& outs = op.outputs();
    auto refuse = [&](const std::string& why) {
      throw Error(str("ONNX export: op '", op.name(), "' of type '", type, "' ", why));
    };
    if (type == "conv") {
      // The op's own reading of its attributes (stride/pad or their _h/_w forms, defaults).
      const ConvGeometry g = static_cast<const ConvOpBase&>(op.kernel())
                                 .geometry(in[0]->shape(), 0, in[1]->shape(), 1);
      onnx::NodeProto* n = node(op, "Conv", {in[0]->name(), weight(in[1])}, {outs[0]->name()});
      ints(n, "kernel_shape", {g.kh, g.kw});
      ints(n, "strides", {g.stride_h, g.stride_w});
      ints(n, "pads", {g.pad_h, g.pad_w, g.pad_h, g.pad_w});
    } else if (type == "bias") {
      const int64_t rank = in[0]->shape().ndim();
      std::vector<int64_t> dims{in[1]->shape().count()};
      for (int64_t i = 2; i < rank; ++i) dims.push_back(1);
      node(op, "Add", {in[0]->name(), weight(in[1], dims)}, {outs[0]->name()});
    } else if (type == "inner_product") {
      std::string x = in[0]->name();
      if (in[0]->shape().ndim() != 2) {
        const std::string flat = op.name() + "::flatten";
        onnx::NodeProto* f = node(op, "Flatten", {x}, {flat}, flat);
        integer(f, "axis", 1);
        x = flat;
      }
      onnx::NodeProto* n = node(op, "Gemm", {x, weight(in[1])}, {outs[0]->name()});
      integer(n, "transB", 1);
    } else if (type == "relu" || type == "sigmoid" || type == "tanh") {
      const char* onnx_type = type == "relu" ? "Relu" : type == "sigmoid" ? "Sigmoid" : "Tanh";
      node(op, onnx_type, {in[0]->name()}, {outs[0]->name()});
    } else if (type == "pool") {
      const PoolGeometry g = static_cast<const PoolOpBase&>(op.kernel()).geometry(in[0]->shape());
      onnx::NodeProto* n =
          node(op, g.max ? "MaxPool" : "AveragePool", {in[0]->name()}, {outs[0]->name()});
      ints(n, "kernel_shape", {g.kernel_h, g.kernel_w});
      ints(n, "strides", {g.stride_h, g.stride_w});
      ints(n, "pads", {g.pad_h, g.pad_w, g.pad_h, g.pad_w});
      integer(n, "ceil_mode", 0);
      if (!g.max) integer(n, "count_include_pad", 1);
    } else if (type == "lrn") {
      onnx::NodeProto* n = node(op, "LRN", {in[0]->name()}, {outs[0]->name()});
      integer(n, "size", a.get_int("size", 5));
      real(n, "alpha", a.get_float("alpha", 1e-4));
      real(n, "beta", a.get_float("beta", 0.75));
      real(n, "bias", a.get_float("k", 1.0));
    } else if (type == "batch_norm") {
      if (a.get_string("mode", "train") != "test")
        refuse("is in training mode (its batch statistics); export a model built for inference");
      for (size_t i = 1; i < outs.size(); ++i)
        if (!outs[i]->readers().empty())
          refuse("has its output '" + outs[i]->name() + "' read; ONNX gives only y");
      onnx::NodeProto* n =
          node(op, "BatchNormalization",
               {in[0]->name(), weight(in[1]), weight(in[2]), weight(in[3]), weight(in[4])},
               {outs[0]->name()});
      real(n, "epsilon", a.get_float("eps", 1e-5));
    } else if (type == "dropout") {
      if (a.get_string("mode", "train") != "test")
        refuse("is in training mode (random); export a model built for inference");
      if (!outs[1]->readers().empty()) refuse("has its mask read; ONNX gives only y");
      node(op, "Identity", {in[0]->name()}, {outs[0]->name()});
    } else if (type == "softmax") {
      onnx::NodeProto* n = node(op, "Softmax", {in[0]->name()}, {outs[0]->name()});
      integer(n, "axis", a.get_int("axis", 1));
    } else if (type == "concat") {
      std::vector<std::string> names;
      for (Blob* b : in) names.push_back(b->name());
      onnx::NodeProto* n = node(op, "Concat", names, {outs[0]->name()});
      integer(n, "axis", a.get_int("axis", 1));
    } else if (type == "reshape") {
      std::vector<int64_t> shape = outs[0]->shape().dims();
      if (shape.empty() || shape[0] != in[0]->shape()[0])
        refuse("changes the batch dimension (" + str(in[0]->shape()) + " to " +
               str(outs[0]->shape()) + "); the exported batch is symbolic");
      shape[0] = 0;  // ONNX: the input's first dimension, the batch
      const std::string name = op.name() + "::shape";
      constant(name, {static_cast<int64_t>(shape.size())}, shape);
      node(op, "Reshape", {in[0]->name(), name}, {outs[0]->name()});
    } else if (type == "sum" || type == "mul") {
      std::vector<std::string> names;
      for (Blob* b : in) names.push_back(is_source(b) ? weight(b) : b->name());
      node(op, type == "sum" ? "Sum" : "Mul", names, {outs[0]->name()});
    } else if (type == "scale") {
      const std::string name = op.name() + "::alpha";
      constant_float(name, {}, {static_cast<float>(a.get_float("alpha", 1.0))});
      node(op, "Mul", {in[0]->name(), name}, {outs[0]->name()});
    } else {
      refuse(
          "has no ONNX mapping (exported: conv, bias, inner_product, relu, sigmoid, tanh, pool, "
          "lrn, batch_norm, dropout, softmax, concat, reshape, sum, mul, scale)");
    }
  }

 private:
  bool is_source(const Blob* b) const { return b != input_ && b->writers().empty(); }

  onnx::NodeProto* node(const Op& op, const std::string& type, const std::vector<std::string>& in,
                        const std::vector<std::string>& outs, const std::string& name = "") {
    onnx::NodeProto* n = out_->add_node();
    n->set_name(name.empty() ? op.name() : name);
    n->set_op_type(type);
    for (const std::string& s : in) n->add_input(s);
    for (const std::string& s : outs) n->add_output(s);
    return n;
  }
  static void ints(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  }
  static void integer(onnx::NodeProto* n, const std::string& name, int64_t v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void real(onnx::NodeProto* n, const std::string& name, double v) {
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(static_cast<float>(v));
  }

  // The initializer of a weight blob (its values), under the blob's name, or, when `dims` differ
  // from its shape (a bias broadcast as [C, 1, 1]), under "<name>@<dims>".
  std::string weight(Blob* b, std::vector<int64_t> dims = {}) {
    if (!is_source(b))
      throw Error(str("ONNX export: '", b->name(),
                      "' is computed, where a weight (an initializer) is expected"));
    if (dims.empty()) dims = b->shape().dims();
    std::string name = b->name();
    if (dims != b->shape().dims()) name += "@" + str(Shape(dims));
    if (emitted_.insert(name).second) constant_float(name, dims, b->tensor().values());
    return name;
  }
  void constant_float(const std::string& name, const std::vector<int64_t>& dims,
                      const std::vector<float>& values) {
    onnx::TensorProto* t = out_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) t->add_dims(d);
    std::string raw(values.size() * sizeof(float), '\0');  // little-endian, as x86 and ARM
    std::memcpy(&raw[0], values.data(), raw.size());
    t->set_raw_data(raw);
  }
  void constant(const std::string& name, const std::vector<int64_t>& dims,
                const std::vector<int64_t>& values) {
    onnx::TensorProto* t = out_->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (int64_t d : dims) t->add_dims(d);
    for (int64_t v : values) t->add_int64_data(v);
  }

  Blob* input_;
  onnx::GraphProto* out_;
  std::set<std::string> emitted_;
};

// A graph input or output: float, the first dimension the symbolic batch.
void value_info(onnx::ValueInfoProto* v, const Blob* b) {
  v->set_name(b->name());
  onnx::TypeProto::Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  const std::vector<int64_t>& dims = b->shape().dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    onnx::TensorShapeProto::Dimension* d = t->mutable_shape()->add_dim();
    if (i == 0)
      d->set_dim_param(kBatch);
    else
      d->set_dim_value(dims[i]);
  }
}

}  // namespace

bool onnx_export_supported() { return true; }
static void require_onnx() {}

std::string graph_to_onnx(Graph& graph, Blob* input, Blob* output, const std::string& model_name) {
  require(input != nullptr && output != nullptr, "graph_to_onnx: give the input and the output");
  onnx::ModelProto model;
  model.set_ir_version(onnx::IR_VERSION);
  model.set_producer_name("purine");
  model.set_model_version(1);
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(kOpset);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(model_name);
  value_info(g->add_input(), input);
  value_info(g->add_output(), output);
  OnnxWriter writer(input, g);
  // Only the ops `output` depends on: walk back from it, then emit in topological order.
  std::set<const Op*> needed;
  std::vector<const Blob*> pending{output};
  while (!pending.empty()) {
    const Blob* b = pending.back();
    pending.pop_back();
    for (const Op* w : b->writers())
      if (needed.insert(w).second)
        for (const Blob* i : w->inputs()) pending.push_back(i);
  }
  for (const Op* op : graph.topological_order())
    if (needed.count(op)) writer.add_op(*op);
  return model.SerializeAsString();
}

#else  // no libonnx-dev

namespace {
void require_onnx() {
  throw Error(
      "ONNX export: this build of purine lacks it (libonnx-dev was not found when it was "
      "configured); install libonnx-dev (tools/setup.sh), re-run cmake and rebuild");
}
}  // namespace

bool onnx_export_supported() { return false; }
std::string graph_to_onnx(Graph&, Blob*, Blob*, const std::string&) {
  require_onnx();
  return {};
}

#endif

void export_onnx(const PredictorOptions& o, const std::string& path) {
  require_onnx();
  require(o.images.ndim() == 4 && o.images.count() > 0, "ONNX export: images must be [batch, C, ",
          "H, W] with positive sizes, got ", o.images);
  require(o.classes > 0, "ONNX export: classes must be positive, got ", o.classes);
  Graph g(o.model);
  Blob* images = g.add_blob("images", o.images);
  ModelSpec spec;
  spec.training = false;
  spec.classes = o.classes;
  Blob* logits = find_model(o.model)(g, images, spec);
  Blob* probabilities = g.apply("softmax", "softmax", {}, {logits}, {"probabilities"})[0];
  g.validate();
  CheckpointExpectation expected;
  expected.model = o.model;
  expected.map_only = true;
  load_checkpoint(whole_blobs(g), o.weights, expected);
  write_file_durably(path, graph_to_onnx(g, images, probabilities, o.model));
}

}  // namespace purine
