#include "operators/conv.hpp"

// The convolution operators at a CPU: shapes, gradients, channel blocking, and a kernel per
// direction and geometry (chosen in conv_kernel_choice.cpp), rebuilt when either changes.
#include <omp.h>

#include "base/error.hpp"
#include "operators/bias.hpp"
#include "operators/cpu/conv_kernel.hpp"
#include "operators/kernel_determinism.hpp"
#include "operators/registry.hpp"

namespace purine {

bool ConvGeometry::operator==(const ConvGeometry& other) const {
  return n == other.n && c == other.c && h == other.h && w == other.w && o == other.o &&
         kh == other.kh && kw == other.kw && ho == other.ho && wo == other.wo &&
         stride_h == other.stride_h && stride_w == other.stride_w && pad_h == other.pad_h &&
         pad_w == other.pad_w;
}

ConvParams::ConvParams(const Attrs& attrs, const char* type)
    : stride_h(attrs.get_int("stride_h", attrs.get_int("stride", 1))),
      stride_w(attrs.get_int("stride_w", attrs.get_int("stride", 1))),
      pad_h(attrs.get_int("pad_h", attrs.get_int("pad", 0))),
      pad_w(attrs.get_int("pad_w", attrs.get_int("pad", 0))),
      engine(attrs.get_string("engine", "auto")),
      deterministic(static_cast<int>(attrs.get_int("deterministic", -1))),
      gpu_algorithm(static_cast<int>(attrs.get_int("gpu_algorithm", -1))) {
  require(stride_h >= 1 && stride_w >= 1, type, ": stride is ", stride_h, "x", stride_w,
          ", expected 1 or more");
  require(pad_h >= 0 && pad_w >= 0, type, ": pad is ", pad_h, "x", pad_w, ", expected 0 or more");
  require(engine == "auto" || engine == "onednn" || engine == "im2col" || engine == "winograd",
          type, ": engine is '", engine, "', expected 'auto', 'onednn', 'im2col' or 'winograd'");
  require(deterministic >= -1 && deterministic <= 1, type, ": deterministic is ", deterministic,
          ", expected 0 or 1");
}

bool ConvParams::deterministic_now() const {
  return deterministic < 0 ? deterministic_kernels() : deterministic == 1;
}

ConvOpBase::ConvOpBase(Attrs attrs, const char* type)
    : Operator(std::move(attrs)), params_(attrs_, type) {}
ConvOpBase::~ConvOpBase() = default;

std::string ConvOpBase::kernel_name() const { return kernel_ ? kernel_->name() : ""; }

ConvGeometry ConvOpBase::geometry(const Shape& x, int x_input, const Shape& w, int w_input) const {
  ConvGeometry g;
  g.stride_h = params_.stride_h;
  g.stride_w = params_.stride_w;
  g.pad_h = params_.pad_h;
  g.pad_w = params_.pad_w;
  require(x.ndim() == 4, type(), ": input ", x_input, " (x) has shape ", x,
          ", expected [N, C, H, W]");
  require(w.ndim() == 4, type(), ": input ", w_input, " (weight) has shape ", w,
          ", expected [O, C, kh, kw]");
  require(w[1] == x[1], type(), ": input ", w_input, " (weight) has ", w[1], " channels, input ",
          x_input, " has ", x[1], "; expected equal");
  g.n = x[0];
  g.c = x[1];
  g.h = x[2];
  g.w = x[3];
  g.o = w[0];
  g.kh = w[2];
  g.kw = w[3];
  require(g.kh >= 1 && g.kw >= 1, type(), ": input ", w_input, " (weight) has an empty kernel ",
          g.kh, "x", g.kw);
  require(g.h + 2 * g.pad_h >= g.kh && g.w + 2 * g.pad_w >= g.kw, type(), ": kernel ", g.kh, "x",
          g.kw, " is larger than the padded input ", g.h + 2 * g.pad_h, "x", g.w + 2 * g.pad_w,
          " (input ", x_input, " has shape ", x, ", pad ", g.pad_h, "x", g.pad_w, ")");
  g.ho = (g.h + 2 * g.pad_h - g.kh) / g.stride_h + 1;
  g.wo = (g.w + 2 * g.pad_w - g.kw) / g.stride_w + 1;
  return g;
}

ConvKernel& ConvOpBase::kernel(ConvDirection direction, const ConvGeometry& g, bool bias_relu,
                               ConvBlocks blocks) {
  const int threads = omp_get_max_threads();
  if (!kernel_ || !kernel_->matches(g, threads, blocks)) {
    try {
      kernel_ = make_kernel(params_.engine, params_.deterministic_now(), direction, g, threads,
                            bias_relu, blocks);
    } catch (const Error& e) {
      throw Error(str(type(), ": ", e.what()));
    }
  }
  return *kernel_;
}

// oneDNN's direct convolutions keep activations in blocks of 16 channels with AVX-512 and of 8
// with AVX2 (nChw16c, nChw8c); blocks of that size meet no reorder there.
int conv_channel_block() { return onednn_has_avx512() ? 16 : 8; }

ChannelBlocking ConvOpBase::blocking(ConvDirection direction, const Shape& x, int x_input,
                                     const Shape& w, int w_input, int block,
                                     ChannelBlocking blocking) const {
  if (block != conv_channel_block() || x.ndim() != 4 || w.ndim() != 4) return {};
  // oneDNN's kernel reorders plain arguments; most others (small planes, stems) reorder blocked
  // ones through plain copies (BlockedArgsKernel). Taking blocks wherever oneDNN's kernel took
  // them cost GoogLeNet-28, whose small planes go to our kernels, 2-4% of its step (2 Zen 5
  // cores, 2026-11-29); taking them only there cost resnet20 10%, whose stem's and last
  // stage's weight gradients are ours. The rewrite weighs both.
  // The shifted-rows weight gradient and Winograd's kernel read either layout as they are.
  switch (choose_kernel(params_.engine, params_.deterministic_now(), direction,
                        geometry(x, x_input, w, w_input))) {
    case KernelChoice::kOnednn:
      blocking.reorders = ChannelBlocking::kInPlain;
      break;
    case KernelChoice::kShiftedRows:
    case KernelChoice::kWinograd:
      blocking.reorders = ChannelBlocking::kNever;
      break;
    default:
      blocking.reorders = ChannelBlocking::kInBlocks;
  }
  return blocking;
}

ChannelBlocking ConvOp::channel_blocking(const std::vector<Shape>& inputs, int block) const {
  return blocking(ConvDirection::kForward, inputs[0], 0, inputs[1], 1, block,
                  ChannelBlocking::make(ChannelBlocking::kEach, {0}, {0}));
}

ChannelBlocking ConvBiasReluOp::channel_blocking(const std::vector<Shape>& inputs,
                                                 int block) const {
  return blocking(ConvDirection::kForward, inputs[0], 0, inputs[1], 1, block,
                  ChannelBlocking::make(ChannelBlocking::kEach, {0}, {0}));
}

ChannelBlocking ConvGradDataOp::channel_blocking(const std::vector<Shape>& inputs,
                                                 int block) const {
  return blocking(ConvDirection::kBackwardData, inputs[2], 2, inputs[1], 1, block,
                  ChannelBlocking::make(ChannelBlocking::kEach, {0}, {0}, {2}));  // x: shape only
}

ChannelBlocking ConvGradWeightOp::channel_blocking(const std::vector<Shape>& inputs,
                                                   int block) const {
  return blocking(ConvDirection::kBackwardWeights, inputs[1], 1, inputs[2], 2, block,
                  ChannelBlocking::make(ChannelBlocking::kEach, {0, 1}, {}));
}

std::vector<Shape> ConvOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  ConvGeometry g = geometry(inputs[0], 0, inputs[1], 1);
  return {Shape{g.n, g.o, g.ho, g.wo}};
}

GradientSpec ConvOp::gradient() const {
  GradientSpec spec;
  spec.ops.push_back(
      {ConvGradDataOp::kType, attrs_, {output_grad(0), input(1), input(0)}, {input_grad(0)}});
  spec.ops.push_back(
      {ConvGradWeightOp::kType, attrs_, {output_grad(0), input(0), input(1)}, {input_grad(1)}});
  return spec;
}

void ConvOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                         const std::vector<Tensor*>& outputs, OpContext&) {
  ConvGeometry g = geometry(inputs[0]->shape(), 0, inputs[1]->shape(), 1);
  if (outputs[0]->count() == 0) return;
  kernel(ConvDirection::kForward, g, false,
         {inputs[0]->channel_block(), 0, outputs[0]->channel_block()})
      .run(inputs[0]->data(), inputs[1]->data(), nullptr, outputs[0]->mutable_data());
}

std::vector<Shape> ConvBiasReluOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  ConvGeometry g = geometry(inputs[0], 0, inputs[1], 1);
  const Shape expected{g.o};
  require(inputs[2] == expected, type(), ": input 2 (bias) has shape ", inputs[2], ", expected ",
          expected, " (the outputs of input 1, shape ", inputs[1], ")");
  return {Shape{g.n, g.o, g.ho, g.wo}};
}

GradientSpec ConvBiasReluOp::gradient() const {
  // The unfused chain's gradients in the order autodiff makes them for it (relu and bias in
  // one op, then conv), so fused and unfused graphs compute the same floats.
  GradientSpec spec;
  spec.ops.push_back(
      {BiasReluGradOp::kType, {}, {output(0), output_grad(0)}, {temp(0), input_grad(2)}});
  spec.ops.push_back(
      {ConvGradDataOp::kType, attrs_, {temp(0), input(1), input(0)}, {input_grad(0)}});
  spec.ops.push_back(
      {ConvGradWeightOp::kType, attrs_, {temp(0), input(0), input(1)}, {input_grad(1)}});
  return spec;
}

void ConvBiasReluOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                 const std::vector<Tensor*>& outputs, OpContext&) {
  ConvGeometry g = geometry(inputs[0]->shape(), 0, inputs[1]->shape(), 1);
  if (outputs[0]->count() == 0) return;
  kernel(ConvDirection::kForward, g, /*bias_relu=*/true,
         {inputs[0]->channel_block(), 0, outputs[0]->channel_block()})
      .run(inputs[0]->data(), inputs[1]->data(), inputs[2]->data(), outputs[0]->mutable_data());
}

namespace {
void require_dy(const std::string& type, const Shape& dy, const ConvGeometry& g) {
  const Shape expected{g.n, g.o, g.ho, g.wo};
  require(dy == expected, type, ": input 0 (dy) has shape ", dy, ", expected ", expected);
}
}  // namespace

std::vector<Shape> ConvGradDataOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  ConvGeometry g = geometry(inputs[2], 2, inputs[1], 1);
  require_dy(type(), inputs[0], g);
  return {inputs[2]};
}

void ConvGradDataOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                 const std::vector<Tensor*>& outputs, OpContext&) {
  ConvGeometry g = geometry(inputs[2]->shape(), 2, inputs[1]->shape(), 1);
  if (outputs[0]->count() == 0) return;
  kernel(ConvDirection::kBackwardData, g, false,
         {inputs[0]->channel_block(), 0, outputs[0]->channel_block()})
      .run(inputs[0]->data(), inputs[1]->data(), nullptr, outputs[0]->mutable_data());
}

std::vector<Shape> ConvGradWeightOp::output_shapes(const std::vector<Shape>& inputs) const {
  check_counts(inputs.size(), 1);
  ConvGeometry g = geometry(inputs[1], 1, inputs[2], 2);
  require_dy(type(), inputs[0], g);
  return {inputs[2]};
}

void ConvGradWeightOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                   const std::vector<Tensor*>& outputs, OpContext&) {
  ConvGeometry g = geometry(inputs[1]->shape(), 1, inputs[2]->shape(), 2);
  if (outputs[0]->count() == 0) return;
  kernel(ConvDirection::kBackwardWeights, g, false,
         {inputs[0]->channel_block(), inputs[1]->channel_block(), 0})
      .run(inputs[0]->data(), inputs[1]->data(), nullptr, outputs[0]->mutable_data());
}

PURINE_REGISTER_OPERATOR(ConvOp);
PURINE_REGISTER_OPERATOR(ConvBiasReluOp);
PURINE_REGISTER_OPERATOR(ConvGradDataOp);
PURINE_REGISTER_OPERATOR(ConvGradWeightOp);

}  // namespace purine
