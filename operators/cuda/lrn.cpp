// GPU kernels of operators/lrn.hpp through cuDNN's cross-channel LRN, whose formula is the CPU
// kernel's (alpha divided by the window size, k added). cuDNN wants 4-D tensors: [N, C, rest]
// is handed over as [N, C, rest, 1].
#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/cudnn_descriptors.hpp"
#include "operators/cuda/contiguity.hpp"
#include "operators/gpu_kernel.hpp"
#include "operators/lrn.hpp"

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

TensorDesc nc_rest(const Shape& s) { return TensorDesc(s[0], s[1], s.count_from(2), 1); }

void forward(const Operator& op, const std::vector<const Tensor*>& inputs,
             const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(LrnOp::kType, inputs, outputs);
  if (inputs[0]->count() == 0) return;
  const LrnDesc lrn(static_cast<const LrnOpBase&>(op).params());
  const TensorDesc x = nc_rest(inputs[0]->shape());
  const float one = 1.0f, zero = 0.0f;
  PURINE_CUDNN_CALL(LrnOp::kType,
                    cudnnLRNCrossChannelForward(stream_of(context).cudnn(), lrn.get(),
                                                CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, x.get(),
                                                inputs[0]->data(), &zero, x.get(),
                                                outputs[0]->mutable_data()));
}

// (x, y, dy) -> dx
void backward(const Operator& op, const std::vector<const Tensor*>& inputs,
              const std::vector<Tensor*>& outputs, OpContext& context) {
  require_contiguous_gpu(LrnGradOp::kType, inputs, outputs);
  if (inputs[0]->count() == 0) return;
  const LrnDesc lrn(static_cast<const LrnOpBase&>(op).params());
  const TensorDesc x = nc_rest(inputs[0]->shape());
  const float one = 1.0f, zero = 0.0f;
  PURINE_CUDNN_CALL(LrnGradOp::kType,
                    cudnnLRNCrossChannelBackward(
                        stream_of(context).cudnn(), lrn.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                        x.get(), inputs[1]->data(), x.get(), inputs[2]->data(), x.get(),
                        inputs[0]->data(), &zero, x.get(), outputs[0]->mutable_data()));
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(LrnOp, forward);
PURINE_REGISTER_GPU_KERNEL(LrnGradOp, backward);

}  // namespace purine::cuda
