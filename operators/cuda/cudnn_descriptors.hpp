// RAII holders of cuDNN descriptors for NCHW float tensors, filters, convolutions, activations and
// poolings, made from the op's geometry (host calls, no device work). conv.cpp and pool.cpp make
// them once per geometry on each executor thread and keep them.
#pragma once

#include <cudnn.h>

#include <cstdint>

#include "operators/cuda/cuda_check.hpp"

namespace purine::cuda {

class TensorDesc {
 public:
  TensorDesc(int64_t n, int64_t c, int64_t h, int64_t w) {
    PURINE_CUDNN_CALL("descriptor", cudnnCreateTensorDescriptor(&desc_));
    PURINE_CUDNN_CALL("descriptor",
                      cudnnSetTensor4dDescriptor(desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, int(n),
                                                 int(c), int(h), int(w)));
  }
  ~TensorDesc() { (void)cudnnDestroyTensorDescriptor(desc_); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
  cudnnTensorDescriptor_t get() const { return desc_; }

 private:
  cudnnTensorDescriptor_t desc_ = nullptr;
};

class FilterDesc {
 public:
  FilterDesc(int64_t o, int64_t c, int64_t h, int64_t w) {
    PURINE_CUDNN_CALL("descriptor", cudnnCreateFilterDescriptor(&desc_));
    PURINE_CUDNN_CALL("descriptor",
                      cudnnSetFilter4dDescriptor(desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(o),
                                                 int(c), int(h), int(w)));
  }
  ~FilterDesc() { (void)cudnnDestroyFilterDescriptor(desc_); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
  cudnnFilterDescriptor_t get() const { return desc_; }

 private:
  cudnnFilterDescriptor_t desc_ = nullptr;
};

// Cross-correlation of FP32 data, with plain FMA math (no TF32 tensor-core rounding) until
// set_math() says otherwise (the math of the algorithm chosen for it).
class ConvDesc {
 public:
  ConvDesc(int64_t pad_h, int64_t pad_w, int64_t stride_h, int64_t stride_w) {
    PURINE_CUDNN_CALL("descriptor", cudnnCreateConvolutionDescriptor(&desc_));
    PURINE_CUDNN_CALL("descriptor", cudnnSetConvolution2dDescriptor(
                                        desc_, int(pad_h), int(pad_w), int(stride_h), int(stride_w),
                                        1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    PURINE_CUDNN_CALL("descriptor", cudnnSetConvolutionMathType(desc_, CUDNN_FMA_MATH));
  }
  ~ConvDesc() { (void)cudnnDestroyConvolutionDescriptor(desc_); }
  void set_math(cudnnMathType_t math) {
    PURINE_CUDNN_CALL("descriptor", cudnnSetConvolutionMathType(desc_, math));
  }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
  cudnnConvolutionDescriptor_t get() const { return desc_; }

 private:
  cudnnConvolutionDescriptor_t desc_ = nullptr;
};

// An activation of one mode, NaN not propagated (as the CPU kernels: max(NaN, 0) is 0).
class ActivationDesc {
 public:
  explicit ActivationDesc(cudnnActivationMode_t mode) {
    PURINE_CUDNN_CALL("descriptor", cudnnCreateActivationDescriptor(&desc_));
    PURINE_CUDNN_CALL("descriptor",
                      cudnnSetActivationDescriptor(desc_, mode, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  }
  ~ActivationDesc() { (void)cudnnDestroyActivationDescriptor(desc_); }
  ActivationDesc(const ActivationDesc&) = delete;
  ActivationDesc& operator=(const ActivationDesc&) = delete;
  cudnnActivationDescriptor_t get() const { return desc_; }

 private:
  cudnnActivationDescriptor_t desc_ = nullptr;
};

class PoolDesc {
 public:
  PoolDesc(cudnnPoolingMode_t mode, int64_t kh, int64_t kw, int64_t pad_h, int64_t pad_w,
           int64_t stride_h, int64_t stride_w) {
    PURINE_CUDNN_CALL("descriptor", cudnnCreatePoolingDescriptor(&desc_));
    PURINE_CUDNN_CALL("descriptor", cudnnSetPooling2dDescriptor(
                                        desc_, mode, CUDNN_NOT_PROPAGATE_NAN, int(kh), int(kw),
                                        int(pad_h), int(pad_w), int(stride_h), int(stride_w)));
  }
  ~PoolDesc() { (void)cudnnDestroyPoolingDescriptor(desc_); }
  PoolDesc(const PoolDesc&) = delete;
  PoolDesc& operator=(const PoolDesc&) = delete;
  cudnnPoolingDescriptor_t get() const { return desc_; }

 private:
  cudnnPoolingDescriptor_t desc_ = nullptr;
};

}  // namespace purine::cuda
