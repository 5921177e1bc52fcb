// Non-blocking MPI transfers of whole tensors, for the dispatcher's MPI executor: start one in a
// task's run(), then poll done() until it returns true. One transfer object per graph op; it is
// reused run after run. Not thread-safe: one executor thread drives it.
#pragma once

#include <mpi.h>

#include "purine/base/tensor.hpp"

namespace purine {

class MpiTransfer {
 public:
  MpiTransfer() = default;
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
  MPI_Request request_ = MPI_REQUEST_NULL;
};

// A tag for the graph vertex `name` (stable: the same on every rank and every run), in
// [0, upper_bound).
int stable_tag(const std::string& name, int upper_bound);

}  // namespace purine
