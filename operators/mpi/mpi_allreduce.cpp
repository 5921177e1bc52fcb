#include "operators/mpi_allreduce.hpp"

#include "operators/mpi/communicator.hpp"
#include "operators/mpi/transfer.hpp"
#include "operators/registry.hpp"

namespace purine {
namespace {

class Allreduce : public AsyncWork {
 public:
  Allreduce(const Tensor& input, Tensor& output, const OpContext& context)
      : transfer_(comm_of(context.comm)), input_(input), output_(output) {}
  void start() override { transfer_.start_allreduce(input_, output_); }
  bool done() override { return transfer_.done(); }

 private:
  MpiTransfer transfer_;
  const Tensor& input_;
  Tensor& output_;
};

}  // namespace

std::unique_ptr<AsyncWork> MpiAllreduceOp::bind_async(const std::vector<const Tensor*>& inputs,
                                                      const std::vector<Tensor*>& outputs,
                                                      const OpContext& context) const {
  return std::make_unique<Allreduce>(*inputs.at(0), *outputs.at(0), context);
}

void MpiAllreduceOp::compute_cpu(const std::vector<const Tensor*>& inputs,
                                 const std::vector<Tensor*>& outputs, OpContext& context) {
  run_to_completion(*bind_async(inputs, outputs, context));
}

PURINE_REGISTER_OPERATOR(MpiAllreduceOp);

}  // namespace purine
