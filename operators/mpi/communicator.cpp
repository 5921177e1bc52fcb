#include "operators/mpi/communicator.hpp"

namespace purine {

std::shared_ptr<Communicator> duplicate_world_communicator() {
  return std::make_shared<Communicator>();
}

}  // namespace purine
