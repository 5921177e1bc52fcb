// The CPU kernels of ops that a fused op runs in turn, so that fused and unfused graphs compute
// the same floats on the CPU (and on emulated devices, which run the CPU kernels).
#pragma once

#include "base/tensor.hpp"

namespace purine {

// inner_product's kernel: y [N, O] = x [N, K] w^T (operators/inner_product.hpp).
void inner_product_cpu(const Tensor& x, const Tensor& w, Tensor& y);
// bias's kernel, or bias_relu's with `relu`: y = x + b along axis 1, or max(x + b, 0)
// (operators/bias.hpp). y may be x.
void add_bias_cpu(const Tensor& x, const Tensor& b, Tensor& y, bool relu);

}  // namespace purine
