#include "operators/accuracy.hpp"

#include <cmath>

#include "base/error.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

int64_t checked_top_k(const Attrs& attrs) {
  const int64_t k = attrs.get_int("top_k", 1);
  require(k >= 1, "accuracy: attribute 'top_k' is ", k, "; expected at least 1");
  return k;
}

}  // namespace

AccuracyOp::AccuracyOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), top_k_(checked_top_k(attrs_)) {}

std::vector<Shape> AccuracyOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  require(inputs[0].ndim() == 2, type(), ": input 0 (scores) has shape ", inputs[0],
          "; expected 2 dimensions [N, C]");
  require(inputs[1].ndim() == 1 && inputs[1][0] == inputs[0][0], type(),
          ": input 1 (labels) has shape ", inputs[1], "; expected [", inputs[0][0],
          "] (one label per row of input 0 ", inputs[0], ")");
  return {Shape{}};
}

void AccuracyOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                             const std::vector<Tensor*>& outputs, OpContext&) {
  const int64_t rows = inputs[0]->shape()[0];
  const int64_t classes = inputs[0]->shape()[1];
  const float* scores = inputs[0]->data();
  const float* labels = inputs[1]->data();
  int64_t correct = 0;
  for (int64_t n = 0; n < rows; ++n) {
    const float value = labels[n];
    require(value >= 0.0f && value < static_cast<float>(classes) && value == std::floor(value),
            type(), ": label of row ", n, " is ", value, "; expected an integer in [0, ", classes,
            ")");
    const float* row = scores + n * classes;
    const float target = row[static_cast<int64_t>(value)];
    // A row with a NaN score ranks nothing: it counts as wrong, never as right.
    bool nan = false;
    int64_t greater = 0;
    for (int64_t c = 0; c < classes; ++c) {
      nan |= std::isnan(row[c]);
      greater += row[c] > target ? 1 : 0;
    }
    correct += !nan && greater < top_k_ ? 1 : 0;
  }
  *outputs[0]->mutable_data() =
      rows > 0 ? static_cast<float>(static_cast<double>(correct) / rows) : 0.0f;
}

PURINE_REGISTER_OPERATOR(AccuracyOp);

}  // namespace purine
