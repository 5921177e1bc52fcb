// Operator::cost (operators/operator.hpp): the default, element-wise one, and the overrides of
// the operators whose work is not proportional to their elements (convolutions and inner
// products, forward and backward) or that compute nothing (copies). Kept together so that the
// performance model's assumptions read in one place.
#include <numeric>

#include "operators/conv.hpp"
#include "operators/copy.hpp"
#include "operators/inner_product.hpp"
#include "operators/inner_product_bias.hpp"
#include "operators/operator.hpp"

namespace purine {
namespace {

constexpr double kBytesPerElement = 4;  // float32

double elements(const std::vector<Shape>& shapes) {
  return std::accumulate(shapes.begin(), shapes.end(), 0.0,
                         [](double sum, const Shape& s) { return sum + s.count(); });
}

double memory_bytes(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) {
  return kBytesPerElement * (elements(inputs) + elements(outputs));
}

// A convolution's multiply-adds, twice: the same in all three directions.
// y [N, O, Ho, Wo], w [O, C, kh, kw].
double conv_flops(const Shape& y, const Shape& w) {
  return 2.0 * static_cast<double>(y.count()) * static_cast<double>(w.count_from(1));
}

}  // namespace

OpCost Operator::cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const {
  return {elements(outputs), memory_bytes(inputs, outputs)};
}

OpCost ConvOp::cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const {
  return {conv_flops(outputs.at(0), inputs.at(1)), memory_bytes(inputs, outputs)};
}

OpCost ConvBiasReluOp::cost(const std::vector<Shape>& inputs,
                            const std::vector<Shape>& outputs) const {
  // The convolution, then an add and a max per output element, in the same pass.
  return {conv_flops(outputs.at(0), inputs.at(1)) + 2.0 * outputs.at(0).count(),
          memory_bytes(inputs, outputs)};
}

OpCost ConvGradDataOp::cost(const std::vector<Shape>& inputs,
                            const std::vector<Shape>& outputs) const {
  // (dy, w, x) -> dx; x is read for its shape only.
  return {conv_flops(inputs.at(0), inputs.at(1)), memory_bytes({inputs[0], inputs[1]}, outputs)};
}

OpCost ConvGradWeightOp::cost(const std::vector<Shape>& inputs,
                              const std::vector<Shape>& outputs) const {
  // (dy, x, w) -> dw; w is read for its shape only.
  return {conv_flops(inputs.at(0), inputs.at(2)), memory_bytes({inputs[0], inputs[1]}, outputs)};
}

OpCost InnerProductOp::cost(const std::vector<Shape>& inputs,
                            const std::vector<Shape>& outputs) const {
  // y [N, O] = x [N, K] w^T
  return {2.0 * outputs.at(0).count() * inputs.at(1).count_from(1), memory_bytes(inputs, outputs)};
}

OpCost InnerProductBiasOp::cost(const std::vector<Shape>& inputs,
                                const std::vector<Shape>& outputs) const {
  // The product, then an add (and a max) per output element, in its epilogue.
  return {2.0 * outputs.at(0).count() * inputs.at(1).count_from(1) +
              (relu() ? 2.0 : 1.0) * outputs.at(0).count(),
          memory_bytes(inputs, outputs)};
}

OpCost InnerProductGradDataOp::cost(const std::vector<Shape>& inputs,
                                    const std::vector<Shape>& outputs) const {
  // dx [N, K] = dy [N, O] w [O, K]; x is read for its shape only.
  return {2.0 * inputs.at(0).count() * inputs.at(1).count_from(1),
          memory_bytes({inputs[0], inputs[1]}, outputs)};
}

OpCost InnerProductGradWeightOp::cost(const std::vector<Shape>& inputs,
                                      const std::vector<Shape>& outputs) const {
  // dw [O, K] = dy^T [O, N] x [N, K]
  return {2.0 * inputs.at(0).count() * outputs.at(0).count_from(1), memory_bytes(inputs, outputs)};
}

OpCost CopyOp::cost(const std::vector<Shape>& inputs, const std::vector<Shape>& outputs) const {
  return {0, kBytesPerElement * elements(inputs)};
}

}  // namespace purine
