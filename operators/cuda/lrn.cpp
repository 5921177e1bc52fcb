// GPU kernels of operators/lrn.hpp through cuDNN's cross-channel LRN, whose formula is the CPU
// kernel's (alpha divided by the window size, k added). cuDNN wants 4-D tensors: [N, C, rest]
// is handed over as [N, C, rest, 1]. The descriptors are made once per (parameters, shape) on
// each executor thread and kept.
#include "operators/lrn.hpp"

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <tuple>

#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/cudnn_descriptors.hpp"
#include "operators/gpu_kernel.hpp"

namespace purine::cuda {

namespace {

class LrnDesc {
 public:
  explicit LrnDesc(const LrnParams& p) {
    require(p.size >= CUDNN_LRN_MIN_N && p.size <= CUDNN_LRN_MAX_N, "lrn: size ", p.size,
            " is outside cuDNN's [", CUDNN_LRN_MIN_N, ", ", CUDNN_LRN_MAX_N,
            "]; run this op on a CPU location");
    PURINE_CUDNN_CALL("lrn", cudnnCreateLRNDescriptor(&desc_));
    PURINE_CUDNN_CALL("lrn", cudnnSetLRNDescriptor(desc_, unsigned(p.size), p.alpha, p.beta, p.k));
  }
  ~LrnDesc() { (void)cudnnDestroyLRNDescriptor(desc_); }
  LrnDesc(const LrnDesc&) = delete;
  LrnDesc& operator=(const LrnDesc&) = delete;
  cudnnLRNDescriptor_t get() const { return desc_; }

 private:
  cudnnLRNDescriptor_t desc_ = nullptr;
};

struct LrnDescriptors {
  LrnDescriptors(const LrnParams& p, const Shape& s) : lrn(p), x(s[0], s[1], s.count_from(2), 1) {}
  LrnDesc lrn;
  TensorDesc x;
};

// The descriptors for `op` on x of shape `s`, made on this thread's first call with them (per
// thread, so no lock: each executor thread drives its own streams).
const LrnDescriptors& descriptors_for(const Operator& op, const Shape& s) {
  using Key = std::tuple<int64_t, uint32_t, uint32_t, uint32_t, int64_t, int64_t, int64_t>;
  thread_local std::map<Key, std::unique_ptr<LrnDescriptors>> cache;
  const LrnParams& p = static_cast<const LrnOpBase&>(op).params();
  const auto bits = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  const Key key(p.size, bits(p.alpha), bits(p.beta), bits(p.k), s[0], s[1], s.count_from(2));
  std::unique_ptr<LrnDescriptors>& slot = cache[key];
  if (!slot) slot = std::make_unique<LrnDescriptors>(p, s);
  return *slot;
}

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  if (inputs[0]->count() == 0) return;
  const LrnDescriptors& d = descriptors_for(op, inputs[0]->shape());
  const float one = 1.0f, zero = 0.0f;
  PURINE_CUDNN_CALL(
      LrnOp::kType,
      cudnnLRNCrossChannelForward(stream_of(context).cudnn(), d.lrn.get(),
                                  CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, d.x.get(), inputs[0]->data(),
                                  &zero, d.x.get(), outputs[0]->mutable_data()));
}

// (x, y, dy) -> dx
void backward(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  if (inputs[0]->count() == 0) return;
  const LrnDescriptors& d = descriptors_for(op, inputs[0]->shape());
  const TensorDesc& x = d.x;
  const float one = 1.0f, zero = 0.0f;
  PURINE_CUDNN_CALL(LrnGradOp::kType,
                    cudnnLRNCrossChannelBackward(
                        stream_of(context).cudnn(), d.lrn.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                        x.get(), inputs[1]->data(), x.get(), inputs[2]->data(), x.get(),
                        inputs[0]->data(), &zero, x.get(), outputs[0]->mutable_data()));
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(LrnOp, forward);
PURINE_REGISTER_GPU_KERNEL(LrnGradOp, backward);

}  // namespace purine::cuda
