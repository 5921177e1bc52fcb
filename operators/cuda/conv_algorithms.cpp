#include "operators/cuda/conv_algorithms.hpp"

#include <glog/logging.h>

#include <map>
#include <mutex>
#include <tuple>

#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"

namespace purine::cuda {

namespace {

using Key = std::tuple<int, int, bool, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                       int64_t, int64_t, int64_t, int64_t, int64_t>;

Key key_of(int device, ConvDirection direction, const ConvGeometry& g, bool deterministic,
           GpuMath math) {
  return Key(device, static_cast<int>(direction), deterministic, static_cast<int>(math), g.n, g.c,
             g.h, g.w, g.o, g.kh, g.kw, g.stride_h, g.stride_w, g.pad_h, g.pad_w);
}

// Whether `algo` rounds far more coarsely than a direct float32 sum: the non-fused Winograd
// algorithms (norm-wise 4e-4 to 1.7e-3 from the CPU on 5x5 geometries, 1e-6 on 3x3, on an H200;
// every other algorithm, FFT ones too, within 1e-6, tests/operators/cuda/
// test_gpu_conv_algorithms.cpp).
bool lossy(ConvDirection direction, int algo) {
  switch (direction) {
    case ConvDirection::kForward:
      return algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED;
    case ConvDirection::kBackwardData:
      return algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED;
    case ConvDirection::kBackwardWeights:
      return algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED;
  }
  return true;
}

const char* direction_name(ConvDirection direction) {
  switch (direction) {
    case ConvDirection::kForward:
      return "forward";
    case ConvDirection::kBackwardData:
      return "data gradient";
    case ConvDirection::kBackwardWeights:
      return "weight gradient";
  }
  return "?";
}

// The first of cuDNN's results (fastest first) that succeeds, fits the workspace limit, uses
// tensor-core (TF32) math only under kTf32 and a lossy algorithm not under kExact, and is
// deterministic when that is asked.
template <typename Perf>
ConvAlgorithm pick(const Perf* results, int count, ConvDirection direction, const ConvGeometry& g,
                   bool deterministic, GpuMath math) {
  const bool tensor_ops = math == GpuMath::kTf32;
  const ConvAlgorithm* chosen = nullptr;
  ConvAlgorithm candidate;
  for (int i = 0; i < count && !chosen; ++i) {
    const Perf& p = results[i];
    const int algo = static_cast<int>(p.algo);
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kConvWorkspaceLimit) continue;
    const bool fma = p.mathType == CUDNN_FMA_MATH || p.mathType == CUDNN_DEFAULT_MATH;
    if (!tensor_ops && !fma) continue;
    if (math == GpuMath::kExact && lossy(direction, algo)) continue;
    if (deterministic && p.determinism != CUDNN_DETERMINISTIC) continue;
    candidate = {algo, p.memory, p.mathType == CUDNN_DEFAULT_MATH ? CUDNN_FMA_MATH : p.mathType};
    chosen = &candidate;
  }
  if (VLOG_IS_ON(1)) {
    std::string table;
    for (int i = 0; i < count; ++i)
      if (results[i].status == CUDNN_STATUS_SUCCESS)
        table += str(
            "\n  algo ", static_cast<int>(results[i].algo), ": ", results[i].time, " ms, ",
            results[i].memory >> 20, " MiB, ",
            results[i].determinism == CUDNN_DETERMINISTIC ? "deterministic" : "nondeterministic",
            results[i].mathType == CUDNN_TENSOR_OP_MATH ? ", tensor ops" : "",
            lossy(direction, static_cast<int>(results[i].algo)) ? ", lossy" : "");
    VLOG(1) << "conv " << direction_name(direction) << " x [" << g.n << ", " << g.c << ", " << g.h
            << ", " << g.w << "] w [" << g.o << ", " << g.c << ", " << g.kh << ", " << g.kw
            << "] stride " << g.stride_h << " pad " << g.pad_h << ": chose algo "
            << (chosen ? std::to_string(chosen->algo) : "none") << table;
  }
  if (chosen) return *chosen;
  throw Error(str("conv: cuDNN offers no ", deterministic ? "deterministic " : "",
                  math == GpuMath::kExact ? "direct-sum " : "", direction_name(direction),
                  " algorithm within ", kConvWorkspaceLimit >> 20, " MiB of workspace"));
}

ConvAlgorithm query(cudnnHandle_t handle, ConvDirection direction, const ConvGeometry& g,
                    bool deterministic, GpuMath math, cudnnTensorDescriptor_t x,
                    cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                    cudnnTensorDescriptor_t y) {
  constexpr int kMax = 16;
  int count = 0;
  switch (direction) {
    case ConvDirection::kForward: {
      cudnnConvolutionFwdAlgoPerf_t results[kMax];
      PURINE_CUDNN_CALL("conv", cudnnFindConvolutionForwardAlgorithm(handle, x, w, conv, y, kMax,
                                                                     &count, results));
      return pick(results, count, direction, g, deterministic, math);
    }
    case ConvDirection::kBackwardData: {
      cudnnConvolutionBwdDataAlgoPerf_t results[kMax];
      PURINE_CUDNN_CALL("conv_grad_data", cudnnFindConvolutionBackwardDataAlgorithm(
                                              handle, w, y, conv, x, kMax, &count, results));
      return pick(results, count, direction, g, deterministic, math);
    }
    case ConvDirection::kBackwardWeights: {
      cudnnConvolutionBwdFilterAlgoPerf_t results[kMax];
      PURINE_CUDNN_CALL("conv_grad_weight", cudnnFindConvolutionBackwardFilterAlgorithm(
                                                handle, x, y, conv, w, kMax, &count, results));
      return pick(results, count, direction, g, deterministic, math);
    }
  }
  throw Error("conv: unknown direction");
}

}  // namespace

ConvAlgorithm choose_conv_algorithm(cudnnHandle_t handle, int device, ConvDirection direction,
                                    const ConvGeometry& g, bool deterministic, GpuMath math,
                                    cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,
                                    cudnnConvolutionDescriptor_t conv, cudnnTensorDescriptor_t y) {
  static std::mutex mu;
  static std::map<Key, ConvAlgorithm> cache;
  const Key key = key_of(device, direction, g, deterministic, math);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  const ConvAlgorithm chosen = query(handle, direction, g, deterministic, math, x, w, conv, y);
  std::lock_guard<std::mutex> lock(mu);
  return cache.emplace(key, chosen).first->second;
}

ConvAlgorithm forced_conv_algorithm(cudnnHandle_t handle, ConvDirection direction, int algo,
                                    bool tensor_ops, cudnnTensorDescriptor_t x,
                                    cudnnFilterDescriptor_t w, cudnnConvolutionDescriptor_t conv,
                                    cudnnTensorDescriptor_t y) {
  ConvAlgorithm forced{algo, 0, tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH};
  cudnnStatus_t status = CUDNN_STATUS_BAD_PARAM;
  switch (direction) {
    case ConvDirection::kForward:
      status = cudnnGetConvolutionForwardWorkspaceSize(
          handle, x, w, conv, y, static_cast<cudnnConvolutionFwdAlgo_t>(algo), &forced.workspace);
      break;
    case ConvDirection::kBackwardData:
      status = cudnnGetConvolutionBackwardDataWorkspaceSize(
          handle, w, y, conv, x, static_cast<cudnnConvolutionBwdDataAlgo_t>(algo),
          &forced.workspace);
      break;
    case ConvDirection::kBackwardWeights:
      status = cudnnGetConvolutionBackwardFilterWorkspaceSize(
          handle, x, y, conv, w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(algo),
          &forced.workspace);
      break;
  }
  require(status == CUDNN_STATUS_SUCCESS, "conv: cuDNN does not offer ", direction_name(direction),
          " algorithm ", algo, " (gpu_algorithm) for this geometry: ", cudnnGetErrorString(status));
  return forced;
}

}  // namespace purine::cuda
