// Layers: composites that build the ops and parameters of one network layer. Each takes its
// bottom blobs through the >> DSL and creates its top blobs unless given; parameters are named
// "<layer>::weight", "<layer>::bias", ... and registered with their fillers on the graph.
//   auto& conv1 = g.add<ConvLayer>("conv1", ConvLayer::Options{32, 5, 1, 2});
//   B{images} >> conv1 >> g.add<ActivationLayer>("relu1", "relu");
#pragma once

#include <string>
#include <vector>

#include "purine/graph.hpp"

namespace purine {

// What an inner product and a convolution share: y = op(x, W) (+ b, one per output), W of
// shape [outputs, ...] with x's axis 1 (its features or channels) as W's inputs. Built whole,
// or split over locations when a Graph::split rule names the layer: by outputs (each location
// holds a slice of W and b and computes a slice of y; the slices are joined at the layer's
// location, by a deferred join that a following element-wise layer and a layer split by inputs
// take apart without moving anything), or by inputs (x is cut along axis 1, each location
// holds the matching columns of W and computes a partial y; the partial results are summed at
// the layer's location, in location order, and b is added there), or by batch (x is cut along
// axis 0, every location computes its images' output with W and b sent from the layer's
// location; autodiff sums their gradients there; the output is joined later like a split by
// outputs, along axis 0). Parameters keep their
// single-device names in checkpoints (Parameter::whole): "<layer>::part<k>::weight" is a piece
// of "<layer>::weight".
class LinearLayer : public Composite {
 protected:
  LinearLayer(Graph& graph, const std::string& name) : Composite(graph, name) {}
  void build_linear(const std::string& op_type, const Attrs& attrs, const Shape& weight_shape,
                    const std::string& weight_filler, bool bias);

 private:
  void build_split_by_outputs(const std::string& op_type, const Attrs& attrs,
                              const Shape& weight_shape, const std::string& weight_filler,
                              bool bias, const std::vector<Location>& locations);
  void build_split_by_inputs(const std::string& op_type, const Attrs& attrs,
                             const Shape& weight_shape, const std::string& weight_filler, bool bias,
                             const std::vector<Location>& locations);
  void build_split_by_batch(const std::string& op_type, const Attrs& attrs,
                            const Shape& weight_shape, const std::string& weight_filler, bool bias,
                            const std::vector<Location>& locations);
  // The input's slices along `axis` at `locations` of `sizes`: those a split layer left
  // (Graph::slices_of) when they match, else cut here.
  std::vector<Blob*> input_slices(int64_t axis, const std::vector<int64_t>& sizes,
                                  const std::vector<Location>& locations);
};

class InnerProductLayer : public LinearLayer {
 public:
  struct Options {
    int64_t outputs = 0;
    bool bias = true;
    std::string weight_filler = "fill_xavier";
  };
  InnerProductLayer(Graph& graph, const std::string& name, Options options);

 protected:
  void setup() override;

 private:
  Options options_;
};

class ConvLayer : public LinearLayer {
 public:
  struct Options {
    int64_t outputs = 0;
    int64_t kernel = 3;
    int64_t stride = 1;
    int64_t pad = 0;
    bool bias = true;
    std::string weight_filler = "fill_kaiming";
  };
  ConvLayer(Graph& graph, const std::string& name, Options options);

 protected:
  void setup() override;

 private:
  Options options_;
};

class PoolLayer : public Composite {
 public:
  struct Options {
    std::string mode = "max";  // "max" or "avg"
    int64_t kernel = 2;
    int64_t stride = 0;  // 0: equal to kernel
    int64_t pad = 0;
  };
  PoolLayer(Graph& graph, const std::string& name, Options options);

 protected:
  void setup() override;

 private:
  Options options_;
};

// Element-wise activation: "relu", "sigmoid" or "tanh". On a blob joined from slices at several
// locations (Graph::join_later) it works on each slice where it is, and its top is joined in
// turn (so does PoolLayer).
class ActivationLayer : public Composite {
 public:
  ActivationLayer(Graph& graph, const std::string& name, std::string type);

 protected:
  void setup() override;

 private:
  std::string type_;
};

class DropoutLayer : public Composite {
 public:
  // `training` false makes the layer the identity (evaluation graphs).
  DropoutLayer(Graph& graph, const std::string& name, double ratio, bool training);

 protected:
  void setup() override;

 private:
  double ratio_;
  bool training_;
};

class LrnLayer : public Composite {
 public:
  struct Options {
    int64_t size = 5;
    double alpha = 1e-4;
    double beta = 0.75;
    double k = 1.0;
  };
  LrnLayer(Graph& graph, const std::string& name, Options options);

 protected:
  void setup() override;

 private:
  Options options_;
};

// Batch normalization with learned scale and shift. Its running statistics are graph state:
// the op writes new ones each training run and the graph swaps them in afterwards. Training
// inside a data-parallel graph that sums over replicas (DataParallelOptions::sync_batch_norm,
// Graph::ReplicaSums), it is synchronized: its statistics and its gradient's per-channel sums
// cover every replica's batch (operators/sync_batch_norm.hpp); otherwise its own batch's.
// Copies of a model sharing their parameters (Graph::share_parameters: the micro-batches of a
// pipeline or of gradient accumulation) share the running statistics too, as GPipe does: each
// copy normalizes by its own micro-batch's statistics, and its op updates the running
// statistics from the value the copy set up before it wrote (micro-batch m after m - 1, a data
// edge), the last copy's value swapped in after the run: M momentum updates in a fixed order.
class BatchNormLayer : public Composite {
 public:
  struct Options {
    double eps = 1e-5;
    double momentum = 0.9;
    bool training = true;
  };
  BatchNormLayer(Graph& graph, const std::string& name, Options options);

 protected:
  void setup() override;

 private:
  Options options_;
};

// Bottoms (logits [N,C], labels [N]); tops (mean loss {}, probabilities [N,C]).
class SoftmaxLossLayer : public Composite {
 public:
  SoftmaxLossLayer(Graph& graph, const std::string& name);

 protected:
  void setup() override;
};

// [N, ...] -> [N, the rest]: a view of the bottom as a matrix, one row per image (the logits of a
// network that ends in a pooling of 1x1 maps). A layer, so that a pipeline's cut places it with
// the layer before it.
class FlattenLayer : public Composite {
 public:
  FlattenLayer(Graph& graph, const std::string& name);

 protected:
  void setup() override;
};

class ConcatLayer : public Composite {
 public:
  ConcatLayer(Graph& graph, const std::string& name, int64_t axis = 1);

 protected:
  void setup() override;

 private:
  int64_t axis_;
};

// Element-wise sum of two or more bottoms of one shape (a residual connection: B{x, f} >> sum).
// Its gradient passes dy to every bottom unchanged.
class SumLayer : public Composite {
 public:
  SumLayer(Graph& graph, const std::string& name);

 protected:
  void setup() override;
};

// GoogLeNet's inception module: 1x1; 1x1 then 3x3; 1x1 then 5x5; 3x3 max pool then 1x1; the
// four branches concatenated along channels, each convolution followed by ReLU.
class InceptionLayer : public Composite {
 public:
  struct Options {
    int64_t conv1x1 = 64;
    int64_t reduce3x3 = 96;
    int64_t conv3x3 = 128;
    int64_t reduce5x5 = 16;
    int64_t conv5x5 = 32;
    int64_t pool_proj = 32;
  };
  InceptionLayer(Graph& graph, const std::string& name, Options options);

 protected:
  void setup() override;

 private:
  Options options_;
};

}  // namespace purine
