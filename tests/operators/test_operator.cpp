// Operator::compute(), the checks every kernel is spared: a strided view reaches only the CPU
// kernels that declare they take one (OperatorTraits::strided_on_cpu), and is refused, naming
// the op type and the tensor, before any other kernel runs.
#include <catch2/catch.hpp>

#include "dispatcher/emulated_devices.hpp"
#include "operators/registry.hpp"

using namespace purine;
using Catch::Contains;

namespace {

// Counts its runs; y = x.
class StridedProbeOp : public TypedOperator<StridedProbeOp, SameShapeOp> {
 public:
  static constexpr char kType[] = "test_strided_probe";
  using TypedOperator::TypedOperator;
  int num_inputs() const override { return 1; }
  int runs = 0;

 protected:
  void compute_cpu(const std::vector<const Tensor*>& inputs, const std::vector<Tensor*>& outputs,
                   OpContext&) override {
    ++runs;
    outputs[0]->copy_from(*inputs[0]);
  }
};
PURINE_REGISTER_OPERATOR(StridedProbeOp);

// The middle two columns of a [2, 4] tensor holding 0..7: [2, 2], strided.
Tensor middle_columns(const Tensor& whole) { return whole.slice(1, 1, 3); }

Tensor counting(Shape shape, Location at = Location::cpu()) {
  Tensor t(shape, at);
  std::vector<float> values(static_cast<size_t>(t.count()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  t.set_values(values);
  return t;
}

}  // namespace

TEST_CASE("a strided input or output is refused before the kernel runs, naming both",
          "[operator]") {
  StridedProbeOp probe{Attrs{}};
  OpContext context;
  const Tensor whole = counting({2, 4});
  const Tensor strided = middle_columns(whole);
  Tensor out({2, 2});
  CHECK_THROWS_WITH(probe.compute({&strided}, {&out}, context),
                    "test_strided_probe: input 0 is a strided view of shape [2,2]; its CPU kernel "
                    "needs contiguous tensors");
  Tensor target({2, 4});
  Tensor strided_out = middle_columns(target);
  const Tensor in = counting({2, 2});
  CHECK_THROWS_WITH(probe.compute({&in}, {&strided_out}, context),
                    Contains("test_strided_probe: output 0 is a strided view of shape [2,2]"));
  CHECK(probe.runs == 0);
  probe.compute({&in}, {&out}, context);
  CHECK(probe.runs == 1);

  // The library's kernels rely on it (they no longer check for themselves).
  for (const char* type : {"relu", "softmax", "scale_by"}) {
    INFO(type);
    auto op = OperatorRegistry::create(type);
    const Tensor c(Shape{});
    std::vector<const Tensor*> inputs{&strided};
    if (std::string(type) == "scale_by") inputs.push_back(&c);
    CHECK_THROWS_WITH(op->compute(inputs, {&out}, context),
                      Contains(std::string(type) + ": input 0 is a strided view"));
  }
}

TEST_CASE("concat, split and host copies take strided views on the CPU", "[operator]") {
  OpContext context;
  const Tensor whole = counting({2, 4});
  const Tensor strided = middle_columns(whole);
  Tensor out({2, 2});
  OperatorRegistry::create("copy")->compute({&strided}, {&out}, context);
  CHECK(out.values() == std::vector<float>{1, 2, 5, 6});
  Tensor joined({2, 4});
  OperatorRegistry::create("concat", Attrs().set("axis", 1))
      ->compute({&strided, &strided}, {&joined}, context);
  CHECK(joined.values() == std::vector<float>{1, 2, 1, 2, 5, 6, 5, 6});
}

TEST_CASE("at a GPU every kernel gets contiguous tensors, concat's too", "[operator][device]") {
  dispatch::ScopedEmulatedDevices emulated(1);
  OpContext context;
  const Tensor whole = counting({2, 4}, Location::gpu(0));
  const Tensor strided = middle_columns(whole);
  Tensor joined({2, 4}, Location::gpu(0));
  CHECK_THROWS_WITH(OperatorRegistry::create("concat", Attrs().set("axis", 1))
                        ->compute({&strided, &strided}, {&joined}, context),
                    "concat: input 0 is a strided view of shape [2,2]; a GPU kernel needs "
                    "contiguous tensors");
  Tensor host({2, 2});
  CHECK_THROWS_WITH(OperatorRegistry::create("copy")->compute({&strided}, {&host}, context),
                    Contains("copy: input 0 is a strided view"));
}
