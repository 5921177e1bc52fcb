// Checked CUDA, cuBLAS and cuDNN calls: every call of the backend goes through one of these
// macros, which throw purine::Error naming the call and the library's own error text. Inside a
// run the dispatcher prefixes the failing task (the op's name), so an error reads
//   task net::conv1: cudnnConvolutionForward(...) failed: CUDNN_STATUS_BAD_PARAM (conv)
// `what` names the operator type or the runtime function making the call.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

namespace purine::cuda {

[[noreturn]] void throw_cuda_error(const char* call, const std::string& error, const char* what);
const char* cublas_status_name(cublasStatus_t status);

}  // namespace purine::cuda

#define PURINE_CUDA_CALL(what, call)                                                   \
  do {                                                                                 \
    const cudaError_t purine_status_ = (call);                                         \
    if (purine_status_ != cudaSuccess)                                                 \
      ::purine::cuda::throw_cuda_error(#call, cudaGetErrorString(purine_status_), what); \
  } while (0)

#define PURINE_CUBLAS_CALL(what, call)                                                       \
  do {                                                                                       \
    const cublasStatus_t purine_status_ = (call);                                            \
    if (purine_status_ != CUBLAS_STATUS_SUCCESS)                                             \
      ::purine::cuda::throw_cuda_error(#call, ::purine::cuda::cublas_status_name(purine_status_), \
                                       what);                                                \
  } while (0)

#define PURINE_CUDNN_CALL(what, call)                                                   \
  do {                                                                                  \
    const cudnnStatus_t purine_status_ = (call);                                        \
    if (purine_status_ != CUDNN_STATUS_SUCCESS)                                         \
      ::purine::cuda::throw_cuda_error(#call, cudnnGetErrorString(purine_status_), what); \
  } while (0)

// A kernel launch: its configuration errors show at once (cudaGetLastError), its execution
// errors at the next event query of the stream.
#define PURINE_CUDA_LAUNCHED(what) PURINE_CUDA_CALL(what, cudaGetLastError())
