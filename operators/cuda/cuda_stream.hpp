// CudaStream: the DeviceQueue (base/device_queue.hpp) of one (GPU location, thread name): a
// non-blocking CUDA stream of its device, with the cuBLAS and cuDNN handles that launch on it,
// made on first use. Events are CUDA events without timing; done() is cudaEventQuery, wait() is
// cudaStreamWaitEvent, so readiness crosses streams on the device and the host never waits.
// Recording is CUDA stream capture in thread-local mode; its graph is instantiated once and each
// launch() is one cudaGraphLaunch on this stream; its launch words (base/device_queue.hpp) live
// in a few bytes of device memory each stream makes with itself, since a recording may not
// allocate.
//
// Ownership: created by the CUDA runtime for the compile step and shared by the device executor
// (its ExecutorSpec) and the bindings of the ops it runs. Thread-safety: as DeviceQueue; the
// handles are used only by the executor thread that drives the stream.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <string>

#include "base/device_queue.hpp"
#include "operators/operator.hpp"

namespace purine::cuda {

class CudaStream : public DeviceQueue {
 public:
  CudaStream(int device, std::string name);
  ~CudaStream() override;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t stream() const { return stream_; }
  int device() const { return device_; }
  // Handles bound to this stream (cuBLAS's math is set per call: operators/cuda/inner_product.cpp).
  cublasHandle_t cublas();
  // cuBLASLt's handle (the stream is given per call), and the workspace it shares with cuBLAS's
  // handle (stream order keeps their calls apart): its bytes in *bytes.
  cublasLtHandle_t cublas_lt();
  void* cublas_workspace(size_t* bytes);
  cudnnHandle_t cudnn();
  // Scratch device memory of at least `bytes` for the kernel being launched (per-row partial
  // results, cuDNN workspaces). Kernels on this stream only: stream order makes reuse by the next
  // kernel safe. Growing it waits for the stream once (in the first iterations of a run), so the
  // steady state allocates nothing.
  void* workspace(size_t bytes);
  // Launch words a recording's kernels on this stream may read: at most this many per recording.
  static constexpr int kLaunchWords = 64;
  // The device memory of launch word `index` (LaunchWords::size() when the kernel adds it);
  // throws purine::Error past kLaunchWords.
  void* launch_word(int index);

  std::unique_ptr<QueueEvent> create_event(bool timed = false) override;
  void record(QueueEvent& event) override;
  void wait(QueueEvent& event) override;
  std::string name() const override { return name_; }
  void write_word(void* device_word, uint64_t value) override;  // cuda_stream_words.cu
  void begin_capture() override;
  std::unique_ptr<QueueGraph> end_capture() override;

 private:
  const int device_;
  const std::string name_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t cublas_lt_ = nullptr;
  cudnnHandle_t cudnn_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  void* cublas_workspace_ = nullptr;  // cuBLAS's own, set once, so that capture allocates none
  void* launch_words_ = nullptr;      // kLaunchWords words of 8 bytes
};

// The stream a GPU kernel launches on: its context's queue (the compile step sets it).
CudaStream& stream_of(const OpContext& context);

}  // namespace purine::cuda
