#include "operators/cuda/cuda_stream.hpp"

#include <glog/logging.h>

#include <vector>

#include "base/error.hpp"
#include "operators/cuda/cuda_check.hpp"
#include "operators/cuda/device_guard.hpp"

namespace purine::cuda {

namespace {

class CudaEvent : public QueueEvent {
 public:
  CudaEvent(int device, std::string stream, bool timed) : stream_(std::move(stream)) {
    DeviceGuard on(device);
    PURINE_CUDA_CALL(
        "stream event",
        cudaEventCreateWithFlags(&event_, timed ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~CudaEvent() override { (void)cudaEventDestroy(event_); }
  bool done() override {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaSuccess) return true;
    if (status == cudaErrorNotReady) return false;
    (void)cudaGetLastError();
    throw Error(str("GPU work on stream ", stream_, " failed: ", cudaGetErrorString(status)));
  }
  double seconds_since(QueueEvent& earlier) override {
    float ms = 0;
    PURINE_CUDA_CALL("trace",
                     cudaEventElapsedTime(&ms, static_cast<CudaEvent&>(earlier).event_, event_));
    return ms / 1000.0;
  }
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
  const std::string stream_;
};

// A captured graph, instantiated for launches on the stream it was captured on.
class CudaGraph : public QueueGraph {
 public:
  CudaGraph(int device, cudaStream_t stream, cudaGraphExec_t exec, int operations)
      : device_(device), stream_(stream), exec_(exec), operations_(operations) {}
  ~CudaGraph() override {
    DeviceGuard on(device_);
    (void)cudaGraphExecDestroy(exec_);
  }
  void launch() override { PURINE_CUDA_CALL("graph launch", cudaGraphLaunch(exec_, stream_)); }
  int operations() const override { return operations_; }

 private:
  const int device_;
  const cudaStream_t stream_;
  const cudaGraphExec_t exec_;
  const int operations_;
};

// The kernel, copy and memset nodes of `graph` (not its event and empty nodes), or -1.
int device_operations(cudaGraph_t graph) {
  size_t count = 0;
  if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) return -1;
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0 && cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) return -1;
  int operations = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type;
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess) return -1;
    operations += type == cudaGraphNodeTypeKernel || type == cudaGraphNodeTypeMemcpy ||
                  type == cudaGraphNodeTypeMemset;
  }
  return operations;
}

// cuBLAS's workspace per stream: what NVIDIA recommends on Hopper (smaller cards need less).
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

}  // namespace

CudaStream::CudaStream(int device, std::string name) : device_(device), name_(std::move(name)) {
  DeviceGuard on(device_);
  PURINE_CUDA_CALL("stream", cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  PURINE_CUDA_CALL("stream", cudaMalloc(&launch_words_, kLaunchWords * sizeof(uint64_t)));
}

CudaStream::~CudaStream() {
  // Nothing is queued any more: every run completed before its plan was destroyed.
  if (workspace_) (void)cudaFree(workspace_);
  (void)cudaFree(launch_words_);
  if (cublas_workspace_) (void)cudaFree(cublas_workspace_);
  if (cudnn_) (void)cudnnDestroy(cudnn_);
  if (cublas_) (void)cublasDestroy(cublas_);
  if (cublas_lt_) (void)cublasLtDestroy(cublas_lt_);
  (void)cudaStreamDestroy(stream_);
}

cublasHandle_t CudaStream::cublas() {
  if (!cublas_) {
    DeviceGuard on(device_);
    PURINE_CUBLAS_CALL("stream", cublasCreate(&cublas_));
    PURINE_CUBLAS_CALL("stream", cublasSetStream(cublas_, stream_));
    PURINE_CUBLAS_CALL("stream", cublasSetMathMode(cublas_, CUBLAS_PEDANTIC_MATH));
    // After cublasSetStream, which resets the workspace.
    PURINE_CUDA_CALL("stream", cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes));
    PURINE_CUBLAS_CALL("stream",
                       cublasSetWorkspace(cublas_, cublas_workspace_, kCublasWorkspaceBytes));
  }
  return cublas_;
}

cublasLtHandle_t CudaStream::cublas_lt() {
  if (!cublas_lt_) {
    DeviceGuard on(device_);
    PURINE_CUBLAS_CALL("stream", cublasLtCreate(&cublas_lt_));
  }
  return cublas_lt_;
}

void* CudaStream::cublas_workspace(size_t* bytes) {
  cublas();  // made with the handle
  *bytes = kCublasWorkspaceBytes;
  return cublas_workspace_;
}

cudnnHandle_t CudaStream::cudnn() {
  if (!cudnn_) {
    DeviceGuard on(device_);
    PURINE_CUDNN_CALL("stream", cudnnCreate(&cudnn_));
    PURINE_CUDNN_CALL("stream", cudnnSetStream(cudnn_, stream_));
  }
  return cudnn_;
}

void* CudaStream::workspace(size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  DeviceGuard on(device_);
  if (workspace_) {
    // Kernels queued earlier may still use the old block.
    PURINE_CUDA_CALL("workspace", cudaStreamSynchronize(stream_));
    PURINE_CUDA_CALL("workspace", cudaFree(workspace_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
  }
  const size_t rounded = (bytes + (1 << 20) - 1) / (1 << 20) * (1 << 20);
  PURINE_CUDA_CALL("workspace", cudaMalloc(&workspace_, rounded));
  workspace_bytes_ = rounded;
  return workspace_;
}

void* CudaStream::launch_word(int index) {
  require(index >= 0 && index < kLaunchWords, "stream ", name_,
          ": a recording's kernels use more than ", kLaunchWords, " launch words");
  return static_cast<uint64_t*>(launch_words_) + index;
}

std::unique_ptr<QueueEvent> CudaStream::create_event(bool timed) {
  return std::make_unique<CudaEvent>(device_, name_, timed);
}

void CudaStream::record(QueueEvent& event) {
  PURINE_CUDA_CALL("stream", cudaEventRecord(static_cast<CudaEvent&>(event).get(), stream_));
}

void CudaStream::wait(QueueEvent& event) {
  PURINE_CUDA_CALL("stream", cudaStreamWaitEvent(stream_, static_cast<CudaEvent&>(event).get(), 0));
}

void CudaStream::begin_capture() {
  DeviceGuard on(device_);
  PURINE_CUDA_CALL("recording", cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
}

std::unique_ptr<QueueGraph> CudaStream::end_capture() {
  DeviceGuard on(device_);
  cudaGraph_t graph = nullptr;
  PURINE_CUDA_CALL("recording", cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
  const int operations = device_operations(graph);
  (void)cudaGraphDestroy(graph);
  PURINE_CUDA_CALL("recording", instantiated);
  return std::make_unique<CudaGraph>(device_, stream_, exec, operations);
}

CudaStream& stream_of(const OpContext& context) {
  CHECK(context.queue != nullptr) << "a GPU kernel without its stream";
  return static_cast<CudaStream&>(*context.queue);
}

}  // namespace purine::cuda
