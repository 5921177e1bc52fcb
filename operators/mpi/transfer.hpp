// Non-blocking MPI transfers of whole tensors, for the dispatcher's MPI executor: start one in a
// task's run(), then poll done() until it returns true. One transfer object per graph op; it is
// reused run after run, on the communicator of the Runnable that owns it. A transfer left
// pending by a failed run is settled before the next one starts: a receive is cancelled; a send
// or collective still pending is an error. Not thread-safe: one executor thread drives it.
#pragma once

#include <mpi.h>

#include <string>

#include "base/tensor.hpp"

namespace purine {

class MpiTransfer {
 public:
  explicit MpiTransfer(MPI_Comm comm = MPI_COMM_WORLD) : comm_(comm) {}
  ~MpiTransfer();
  MpiTransfer(const MpiTransfer&) = delete;
  MpiTransfer& operator=(const MpiTransfer&) = delete;

  void start_send(const Tensor& tensor, int peer, int tag);
  void start_recv(Tensor& tensor, int peer, int tag);
  // Sum over all ranks (MPI_Iallreduce). Every rank must start its collectives in one order.
  void start_allreduce(const Tensor& input, Tensor& output);
  // True once the transfer has completed; throws purine::Error on an MPI failure.
  bool done();

 private:
  enum class Kind { kNone, kSend, kRecv, kCollective };
  // Settles a request a failed run left behind (see the header comment).
  void settle_leftover();
  MPI_Comm comm_;
  MPI_Request request_ = MPI_REQUEST_NULL;
  Kind kind_ = Kind::kNone;
};

// A tag for the graph vertex `name` (stable: the same on every rank and every run), in
// [0, upper_bound).
int stable_tag(const std::string& name, int upper_bound);

}  // namespace purine
