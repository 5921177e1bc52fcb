#include "operators/softmax_cross_entropy.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

// Checks scores [N, C] (input 0) against labels [N] (input 1).
void check_scores_and_labels(const std::string& type, const char* scores_name, const Shape& scores,
                             const Shape& labels) {
  require(scores.ndim() == 2, type, ": input 0 (", scores_name, ") has shape ", scores,
          "; expected 2 dimensions [N, C]");
  require(labels.ndim() == 1 && labels[0] == scores[0], type, ": input 1 (labels) has shape ",
          labels, "; expected [", scores[0], "] (one label per row of input 0 ", scores, ")");
}

// The label of row `n` as an index, or an Error naming the row and the value.
int64_t label_index(const std::string& type, const float* labels, int64_t n, int64_t classes) {
  const float value = labels[n];
  const bool ok =
      value >= 0.0f && value < static_cast<float>(classes) && value == std::floor(value);
  require(ok, type, ": label of row ", n, " is ", value, "; expected an integer in [0, ", classes,
          ")");
  return static_cast<int64_t>(value);
}

}  // namespace

std::vector<Shape> SoftmaxCrossEntropyOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 2);
  check_scores_and_labels(type(), "logits", inputs[0], inputs[1]);
  return {Shape{}, inputs[0]};
}

GradientSpec SoftmaxCrossEntropyOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back({SoftmaxCrossEntropyGradOp::kType,
                      {},
                      {output(1), input(1), output_grad(0)},
                      {input_grad(0)}});
  return spec;
}

void SoftmaxCrossEntropyOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                        const std::vector<Tensor*>& outputs, OpContext&) {
  const int64_t rows = inputs[0]->shape()[0];
  const int64_t classes = inputs[0]->shape()[1];
  const float* logits = inputs[0]->data();
  const float* labels = inputs[1]->data();
  float* probs = outputs[1]->mutable_data();
  // Validate every label before writing anything.
  for (int64_t n = 0; n < rows; ++n) label_index(type(), labels, n, classes);
  // Row losses are summed serially in row order, so the loss does not depend on the threads.
  std::vector<double> row_loss(rows);
  parallel_for(rows, rows * classes > kParallelMinNormalization, [&](int64_t n) {
    const float* x = logits + n * classes;
    float* p = probs + n * classes;
    float max = x[0];
    for (int64_t c = 1; c < classes; ++c) max = std::max(max, x[c]);
    float sum = 0.0f;
    for (int64_t c = 0; c < classes; ++c) {
      p[c] = std::exp(x[c] - max);
      sum += p[c];
    }
    const float inv = 1.0f / sum;
    for (int64_t c = 0; c < classes; ++c) p[c] *= inv;
    const int64_t label = static_cast<int64_t>(labels[n]);
    row_loss[n] = std::log(static_cast<double>(sum)) + max - x[label];
  });
  double total = 0.0;
  for (int64_t n = 0; n < rows; ++n) total += row_loss[n];
  *outputs[0]->mutable_data() = rows > 0 ? static_cast<float>(total / rows) : 0.0f;
}

std::vector<Shape> SoftmaxCrossEntropyGradOp::output_shapes(
    const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  check_scores_and_labels(type(), "probs", inputs[0], inputs[1]);
  require(inputs[2].count() == 1, type(), ": input 2 (dloss) has shape ", inputs[2],
          "; expected a scalar {}");
  return {inputs[0]};
}

void SoftmaxCrossEntropyGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                            const std::vector<Tensor*>& outputs, OpContext&) {
  const int64_t rows = inputs[0]->shape()[0];
  const int64_t classes = inputs[0]->shape()[1];
  const float* probs = inputs[0]->data();
  const float* labels = inputs[1]->data();
  float* dlogits = outputs[0]->mutable_data();
  for (int64_t n = 0; n < rows; ++n) label_index(type(), labels, n, classes);
  const float scale = rows > 0 ? *inputs[2]->data() / static_cast<float>(rows) : 0.0f;
  const int64_t count = rows * classes;
  parallel_for(count, count > kParallelMinNormalization,
               [&](int64_t i) { dlogits[i] = scale * probs[i]; });
  for (int64_t n = 0; n < rows; ++n) {
    dlogits[n * classes + static_cast<int64_t>(labels[n])] -= scale;
  }
}

PURINE_REGISTER_OPERATOR(SoftmaxCrossEntropyOp);
PURINE_REGISTER_OPERATOR(SoftmaxCrossEntropyGradOp);

}  // namespace purine
