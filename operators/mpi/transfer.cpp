#include "operators/mpi/transfer.hpp"

#include <atomic>

#include "base/error.hpp"
#include "base/hash.hpp"
#include "operators/communicator.hpp"

namespace purine {

namespace {
std::atomic<int64_t> bytes_sent{0};

void check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw Error(str(what, " failed: ", std::string(text, length)));
}

int count_of(const Tensor& t) {
  require(t.is_contiguous(), "MPI transfers need contiguous tensors");
  require(t.count() <= INT32_MAX, "tensor of ", t.count(),
          " values is too large for one MPI message");
  return static_cast<int>(t.count());
}

// A process the purine tool started without a launcher never initializes MPI (tools/cli/main.cpp):
// it is alone, a world of one rank.
bool mpi_running() {
  int initialized = 0;
  MPI_Initialized(&initialized);  // callable before MPI_Init
  return initialized != 0;
}
}  // namespace

MpiTransfer::~MpiTransfer() {
  if (request_ == MPI_REQUEST_NULL) return;
  // A collective may be neither cancelled nor freed while pending: leave it to MPI. Point to
  // point requests left by a failed or stalled run are cancelled and released.
  if (kind_ == Kind::kCollective) return;
  MPI_Cancel(&request_);
  MPI_Request_free(&request_);
}

void MpiTransfer::settle_leftover() {
  if (request_ == MPI_REQUEST_NULL) return;
  if (kind_ == Kind::kRecv) {
    MPI_Cancel(&request_);
    MPI_Wait(&request_, MPI_STATUS_IGNORE);
    return;
  }
  require(done(), "an MPI ", kind_ == Kind::kSend ? "send" : "collective",
          " from a failed run is still pending; the job cannot continue safely");
}

void MpiTransfer::start_send(const Tensor& tensor, int peer, int tag) {
  settle_leftover();
  kind_ = Kind::kSend;
  check(MPI_Isend(tensor.data(), count_of(tensor), MPI_FLOAT, peer, tag, comm_, &request_),
        "MPI_Isend");
  bytes_sent += tensor.count() * static_cast<int64_t>(sizeof(float));
}

void MpiTransfer::start_recv(Tensor& tensor, int peer, int tag) {
  settle_leftover();
  kind_ = Kind::kRecv;
  check(MPI_Irecv(tensor.mutable_data(), count_of(tensor), MPI_FLOAT, peer, tag, comm_, &request_),
        "MPI_Irecv");
}

void MpiTransfer::start_allreduce(const Tensor& input, Tensor& output) {
  settle_leftover();
  kind_ = Kind::kCollective;
  require(input.shape() == output.shape(), "allreduce of ", input.shape(), " into ",
          output.shape());
  if (!mpi_running()) {  // the sum over a world of one
    if (output.mutable_data() != input.data()) output.copy_from(input);
    return;
  }
  check(MPI_Iallreduce(input.data(), output.mutable_data(), count_of(input), MPI_FLOAT, MPI_SUM,
                       comm_, &request_),
        "MPI_Iallreduce");
}

bool MpiTransfer::done() {
  if (request_ == MPI_REQUEST_NULL) return true;  // nothing started on MPI (a world of one)
  int flag = 0;
  check(MPI_Test(&request_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  return flag != 0;
}

int64_t mpi_bytes_sent() { return bytes_sent.load(); }

int stable_tag(const std::string& name, int upper_bound) {
  return static_cast<int>(fnv1a64(name) % static_cast<uint64_t>(upper_bound));
}

}  // namespace purine
