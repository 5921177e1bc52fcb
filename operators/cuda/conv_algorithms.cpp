#include "operators/cuda/conv_algorithms.hpp"

#include <map>
#include <mutex>
#include <tuple>

#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"

namespace purine::cuda {

namespace {

using Key = std::tuple<int, int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t, int64_t>;

Key key_of(int device, ConvDirection direction, const ConvGeometry& g, bool deterministic,
           bool tensor_ops) {
  return Key(device, static_cast<int>(direction), deterministic, tensor_ops, g.n, g.c, g.h, g.w,
             g.o, g.kh, g.kw, g.stride_h, g.stride_w, g.pad_h, g.pad_w);
}

// The first of cuDNN's results (fastest first) that succeeds, fits the workspace limit, uses
// tensor-core (TF32) math only if allowed, and is deterministic when that is asked.
template <typename Perf>
ConvAlgorithm pick(const Perf* results, int count, bool deterministic, bool tensor_ops,
                   const char* direction) {
  for (int i = 0; i < count; ++i) {
    const Perf& p = results[i];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kConvWorkspaceLimit) continue;
    if (!tensor_ops && p.mathType != CUDNN_FMA_MATH && p.mathType != CUDNN_DEFAULT_MATH) continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    return {static_cast<int>(p.algo), p.memory,
            p.mathType == CUDNN_DEFAULT_MATH ? CUDNN_FMA_MATH : p.mathType};
  }
  throw Error(str("conv: cuDNN offers no ", deterministic ? "deterministic " : "", direction,
                  " algorithm within ", kConvWorkspaceLimit >> 20, " MiB of workspace"));
}

ConvAlgorithm query(cudnnHandle_t handle, ConvDirection direction, bool deterministic,
                    bool tensor_ops, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y) {
  constexpr int kMax = 16;
  int count = 0;
  switch (direction) {
    case ConvDirection::kForward: {
      cudnnConvolutionFwdAlgoPerf_t results[kMax];
      PURINE_CUDNN_CALL("conv", cudnnFindConvolutionForwardAlgorithm(handle, x, w, conv, y, kMax,
                                                                     &count, results));
      return pick(results, count, deterministic, tensor_ops, "forward");
    }
    case ConvDirection::kBackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t results[kMax];
      PURINE_CUDNN_CALL("conv_grad_data", cudnnFindConvolutionBackwardDataAlgorithm(
                                              handle, w, y, conv, x, kMax, &count, results));
      return pick(results, count, deterministic, tensor_ops, "data gradient");
    }
    case ConvDirection::kBackwardWeights: {
      cudnnConvolutionBwdFilterAlgoPerf_t results[kMax];
      PURINE_CUDNN_CALL("conv_grad_weight", cudnnFindConvolutionBackwardFilterAlgorithm(
                                                handle, x, y, conv, w, kMax, &count, results));
      return pick(results, count, deterministic, tensor_ops, "weight gradient");
    }
  }
  throw Error("conv: unknown direction");
}

}  // namespace

ConvAlgorithm choose_conv_algorithm(cudnnHandle_t handle, int device, ConvDirection direction,
                                    const ConvGeometry& g, bool deterministic, bool tensor_ops,
                                    cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y) {
  static std::mutex mu;
  static std::map<Key, ConvAlgorithm> cache;
  const Key key = key_of(device, direction, g, deterministic, tensor_ops);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const ConvAlgorithm chosen = query(handle, direction, deterministic, tensor_ops, x, w, conv, y);
  std::lock_guard<std::mutex> lock(mu);
  return cache.emplace(key, chosen).first->second;
}

}  // namespace purine::cuda
