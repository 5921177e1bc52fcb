#include "operators/dropout.hpp"

#include <algorithm>

#include "base/error.hpp"
#include "operators/cpu/threading.hpp"
#include "operators/formulas.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

double checked_ratio(const Attrs& attrs) {
  const double ratio = attrs.get_float("ratio", 0.5);
  require(ratio >= 0.0 && ratio < 1.0, "dropout: attribute 'ratio' is ", ratio,
          "; expected 0 <= ratio < 1 (the probability of dropping an element)");
  return ratio;
}

bool checked_train(const Attrs& attrs) {
  const std::string mode = attrs.get_string("mode", "train");
  require(mode == "train" || mode == "test", "dropout: attribute 'mode' is '", mode,
          "'; expected 'train' or 'test'");
  return mode == "train";
}

}  // namespace

DropoutOp::DropoutOp(Attrs attrs)
    : TypedOperator(std::move(attrs)),
      ratio_(checked_ratio(attrs_)),
      train_(checked_train(attrs_)) {}

GradientSpec DropoutOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back({DropoutGradOp::kType, {}, {output(1), output_grad(0)}, {input_grad(0)}});
  return spec;
}

void DropoutOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, OpContext& context) {
  const int64_t n = inputs[0]->count();
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
  float* mask = outputs[1]->mutable_data();
  if (train_) {
    const formula::DropoutMask keep{static_cast<float>(ratio_),
                                    static_cast<float>(1.0 / (1.0 - ratio_))};
    const uint64_t key = draw_key(*context.rng);  // drawn even for an empty tensor, as on a GPU
    // keep(key, i) in two steps per block: the uniforms, then the selects. In one loop GCC
    // branches on every random comparison (9 ns per element against 2 on this machine).
    constexpr int64_t kBlock = 1024;
    parallel_for((n + kBlock - 1) / kBlock, n > kParallelMinArithmetic, [&](int64_t block) {
      const int64_t begin = block * kBlock, end = std::min(n, begin + kBlock);
      for (int64_t i = begin; i < end; ++i) mask[i] = counter_uniform01(key, uint64_t(i));
      for (int64_t i = begin; i < end; ++i) {
        mask[i] = keep.of_uniform(mask[i]);
        y[i] = x[i] * mask[i];
      }
    });
  } else {
    parallel_for(n, n > kParallelMinArithmetic, [&](int64_t i) {
      y[i] = x[i];
      mask[i] = 1.0f;
    });
  }
}

void DropoutGradOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                const std::vector<Tensor*>& outputs, OpContext&) {
  const int64_t n = inputs[0]->count();
  const float* mask = inputs[0]->data();
  const float* dy = inputs[1]->data();
  float* dx = outputs[0]->mutable_data();
  parallel_for(n, n > kParallelMinArithmetic, [&](int64_t i) { dx[i] = mask[i] * dy[i]; });
}

PURINE_REGISTER_OPERATOR(DropoutOp);
PURINE_REGISTER_OPERATOR(DropoutGradOp);

}  // namespace purine
