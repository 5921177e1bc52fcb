#include "softsign.hpp"

#include <cmath>

#include "operators/registry.hpp"

namespace skip_connection {

purine::GradientSpec SoftsignOp::gradient() const {
  purine::GradientSpec spec;
  spec.ops.push_back({SoftsignGradOp::kType,
                      {},
                      {purine::output(0), purine::output_grad(0)},
                      {purine::input_grad(0)}});
  return spec;
}

void SoftsignOp::compute_cpu(const std::vector<const purine::Tensor*>& inputs,
                             const std::vector<purine::Tensor*>& outputs, purine::OpContext&) {
  const int64_t n = inputs[0]->count();
  const float* x = inputs[0]->data();
  float* y = outputs[0]->mutable_data();
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] / (1.0f + std::fabs(x[i]));
}

void SoftsignGradOp::compute_cpu(const std::vector<const purine::Tensor*>& inputs,
                                 const std::vector<purine::Tensor*>& outputs, purine::OpContext&) {
  const int64_t n = inputs[0]->count();
  const float* y = inputs[0]->data();
  const float* dy = inputs[1]->data();
  float* dx = outputs[0]->mutable_data();
  for (int64_t i = 0; i < n; ++i) {
    const float s = 1.0f - std::fabs(y[i]);
    dx[i] = dy[i] * s * s;
  }
}

PURINE_REGISTER_OPERATOR(SoftsignOp);
PURINE_REGISTER_OPERATOR(SoftsignGradOp);

}  // namespace skip_connection
