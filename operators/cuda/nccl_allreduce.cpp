// GPU kernel of operators/nccl_allreduce.hpp. prepare() makes (once per MPI communicator and
// device) an NCCL communicator over all ranks of the graph's MPI communicator: rank 0 draws the
// unique id, MPI broadcasts it, every rank joins with its GPU. The kernel queues ncclAllReduce
// on the op's stream. The communicators live until the process ends (like the MPI
// communicator they are built over, a collective of a stalled run may still hold them).
#include "operators/nccl_allreduce.hpp"

#include <mpi.h>
#include <nccl.h>

#include <map>
#include <mutex>
#include <utility>

#include "base/error.hpp"
#include "operators/cuda/cuda_stream.hpp"
#include "operators/cuda/device_guard.hpp"
#include "operators/gpu_kernel.hpp"
#include "operators/mpi/communicator.hpp"

namespace purine::cuda {

namespace {

#define PURINE_NCCL_CALL(call)                                                             \
  do {                                                                                     \
    const ncclResult_t purine_status_ = (call);                                            \
    if (purine_status_ != ncclSuccess)                                                     \
      throw_cuda_error(#call, ncclGetErrorString(purine_status_), NcclAllreduceOp::kType); \
  } while (0)

std::mutex mu;
std::map<std::pair<MPI_Comm, int>, ncclComm_t>& communicators() {
  static auto* table = new std::map<std::pair<MPI_Comm, int>, ncclComm_t>();
  return *table;
}

ncclComm_t communicator(MPI_Comm comm, int device) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = communicators().find({comm, device});
  return it == communicators().end() ? nullptr : it->second;
}

void prepare(const Operator&, const std::vector<const Tensor*>&,
             const std::vector<Tensor*>& outputs, const OpContext& context) {
  const MPI_Comm comm = comm_of(context.comm);
  const int device = outputs[0]->location().device;
  if (communicator(comm, device)) return;
  int rank = 0, ranks = 1, mpi_running = 0;
  MPI_Initialized(&mpi_running);  // not in a process the tool started alone: a world of one
  if (mpi_running) {
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
  }
  ncclUniqueId id;
  if (rank == 0) PURINE_NCCL_CALL(ncclGetUniqueId(&id));
  require(!mpi_running || MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm) == MPI_SUCCESS,
          "nccl_allreduce: broadcasting the NCCL id over MPI failed");
  DeviceGuard on(device);
  ncclComm_t nccl = nullptr;
  PURINE_NCCL_CALL(ncclCommInitRank(&nccl, ranks, id, rank));
  std::lock_guard<std::mutex> lock(mu);
  communicators()[{comm, device}] = nccl;
}

void allreduce(const Operator&, const std::vector<const Tensor*>& inputs,
               const std::vector<Tensor*>& outputs, OpContext& context) {
  const ncclComm_t nccl = communicator(comm_of(context.comm), outputs[0]->location().device);
  require(nccl != nullptr, "nccl_allreduce: no NCCL communicator (the op was not prepared)");
  PURINE_NCCL_CALL(ncclAllReduce(inputs[0]->data(), outputs[0]->mutable_data(),
                                 static_cast<size_t>(inputs[0]->count()), ncclFloat, ncclSum, nccl,
                                 stream_of(context).stream()));
}

}  // namespace

PURINE_REGISTER_GPU_KERNEL(NcclAllreduceOp, allreduce, prepare);

}  // namespace purine::cuda
