// copy between ranks: the asynchronous half each rank runs, a non-blocking send on the input's
// rank and the matching receive on the output's rank (operators/copy.hpp).
#include "operators/copy.hpp"

#include <glog/logging.h>

#include "operators/mpi/communicator.hpp"
#include "operators/mpi/transfer.hpp"

namespace purine {
namespace {

class SendHalf : public AsyncWork {
 public:
  SendHalf(const Tensor& from, const OpContext& context)
      : transfer_(comm_of(context.comm)), from_(from), link_(context.link) {}
  void start() override { transfer_.start_send(from_, link_.peer, link_.tag); }
  bool done() override { return transfer_.done(); }

 private:
  MpiTransfer transfer_;
  const Tensor& from_;
  const PeerLink link_;
};

class ReceiveHalf : public AsyncWork {
 public:
  ReceiveHalf(Tensor& to, const OpContext& context)
      : transfer_(comm_of(context.comm)), to_(to), link_(context.link) {}
  void start() override { transfer_.start_recv(to_, link_.peer, link_.tag); }
  bool done() override { return transfer_.done(); }

 private:
  MpiTransfer transfer_;
  Tensor& to_;
  const PeerLink link_;
};

}  // namespace

std::unique_ptr<AsyncWork> CopyOp::bind_async(const std::vector<const Tensor*>& inputs,
                                              const std::vector<Tensor*>& outputs,
                                              const OpContext& context) const {
  switch (context.link.side) {
    case PeerLink::kNone:
      return nullptr;  // within this process: compute() copies
    case PeerLink::kSend:
      CHECK(inputs.at(0) != nullptr);
      return std::make_unique<SendHalf>(*inputs[0], context);
    case PeerLink::kReceive:
      CHECK(outputs.at(0) != nullptr);
      return std::make_unique<ReceiveHalf>(*outputs[0], context);
  }
  return nullptr;
}

}  // namespace purine
