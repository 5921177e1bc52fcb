#include "operators/reshape.hpp"

#include <cstring>

#include "base/error.hpp"
#include "operators/registry.hpp"

namespace purine {

ReshapeOp::ReshapeOp(Attrs attrs)
    : TypedOperator(std::move(attrs)), shape_(attrs_.get_ints("shape")) {
  int inferred = 0;
  for (int64_t d : shape_) {
    require(d >= -1, "reshape: dimension ", d, " in attribute 'shape' is negative");
    inferred += d == -1;
  }
  require(inferred <= 1, "reshape: attribute 'shape' may contain at most one -1");
}

std::vector<Shape> ReshapeOp::output_shapes(const std::vector<Shape>& inputs) const {
  std::vector<int64_t> dims = shape_;
  int64_t known = 1;
  int missing = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == -1) {
      missing = static_cast<int>(i);
    } else {
      known *= dims[i];
    }
  }
  const int64_t count = inputs[0].count();
  if (missing >= 0) {
    require(known > 0 && count % known == 0, "reshape: cannot infer -1 of ",
            Shape(dims).to_string(), " for ", count, " elements");
    dims[missing] = count / known;
    known = count;
  }
  require(known == count, "reshape: input ", inputs[0], " has ", count, " elements, shape ",
          Shape(dims), " has ", known);
  return {Shape(dims)};
}

GradientSpec ReshapeOp::gradient_for(const std::vector<Shape>& input_shapes) const {
  GradientSpec spec;
  spec.ops.push_back({ReshapeOp::kType,
                      Attrs().set("shape", input_shapes[0].dims()),
                      {output_grad(0)},
                      {input_grad(0)}});
  return spec;
}

void ReshapeOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                            const std::vector<Tensor*>& outputs, OpContext&) {
  if (inputs[0]->data() != outputs[0]->data())
    std::memcpy(outputs[0]->mutable_data(), inputs[0]->data(), inputs[0]->count() * sizeof(float));
}

PURINE_REGISTER_OPERATOR(ReshapeOp);

}  // namespace purine
