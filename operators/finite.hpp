// count_non_finite: (x_0, ..., x_n-1) -> c {} = how many elements of all inputs are NaN or
// infinite (exact up to 2^24). The trainer's cheap divergence check: one op per location over the
// weights an update wrote, whose one-float result is all the host reads each iteration; only a
// non-zero count makes it look for the blob to blame. Not differentiable; contiguous inputs. CPU
// and GPU kernels (operators/cuda/finite.cu).
#pragma once

#include <vector>

#include "operators/operator.hpp"

namespace purine {

class CountNonFiniteOp : public TypedOperator<CountNonFiniteOp> {
 public:
  static constexpr char kType[] = "count_non_finite";
  static constexpr char kSignature[] =
      "(x_0, ..., x_n-1) -> c {} = the number of NaN or infinite elements of all inputs";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return kVariadic; }
  int num_outputs() const override { return 1; }
  std::vector<Shape> output_shapes(const std::vector<Shape>& inputs) const override;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext& context) override;
};

}  // namespace purine
