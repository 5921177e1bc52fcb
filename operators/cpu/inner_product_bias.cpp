#include "operators/inner_product_bias.hpp"

#include "base/error.hpp"
#include "operators/bias.hpp"
#include "operators/cpu/fused_parts.hpp"
#include "operators/inner_product.hpp"
#include "operators/registry.hpp"

namespace purine {

namespace {

bool checked_relu(const Attrs& attrs) {
  const int64_t relu = attrs.get_int("relu", 0);
  require(relu == 0 || relu == 1, "inner_product_bias: attribute 'relu' is ", relu,
          "; expected 0 or 1");
  return relu == 1;
}

}  // namespace

InnerProductBiasOp::InnerProductBiasOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), relu_(checked_relu(attrs_)) {}

std::vector<Shape> InnerProductBiasOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  const Shape y = inner_product_shape(type(), inputs[0], inputs[1]);
  require(inputs[2] == Shape{y[1]}, type(), ": input 2 (bias) has shape ", inputs[2],
          ", expected [", y[1], "] (the outputs of input 1, shape ", inputs[1], ")");
  return {y};
}

GradientSpec InnerProductBiasOp::gradient() const {
  // The unfused chain's gradients in the order autodiff makes them for it (the bias's, or the
  // ReLU's and the bias's in one op, then the inner product's), so fused and unfused graphs
  // compute the same floats.
  GradientSpec spec;
  GradRef dz = output_grad(0);
  if (relu_) {
    spec.ops.push_back(
        {BiasReluGradOp::kType, {}, {output(0), output_grad(0)}, {temp(0), input_grad(2)}});
    dz = temp(0);
  } else {
    spec.ops.push_back({BiasGradOp::kType, {}, {output_grad(0)}, {input_grad(2)}});
  }
  spec.ops.push_back(
      {InnerProductGradDataOp::kType, {}, {dz, input(1), input(0)}, {input_grad(0)}});
  spec.ops.push_back({InnerProductGradWeightOp::kType, {}, {dz, input(0)}, {input_grad(1)}});
  return spec;
}

void InnerProductBiasOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                     const std::vector<Tensor*>& outputs, OpContext&) {
  inner_product_cpu(*inputs[0], *inputs[1], *outputs[0]);
  add_bias_cpu(*outputs[0], *inputs[2], *outputs[0], relu_);
}

PURINE_REGISTER_OPERATOR(InnerProductBiasOp);

}  // namespace purine
