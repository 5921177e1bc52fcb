// A user program training under mpirun (see tests/mpi/test_cli.cpp): with "no-context" it never
// initializes MPI, with "late" it builds its TrainOptions before the MpiContext, and with
// "first" it creates the MpiContext first, as the guide says. The first two must fail with an
// error naming the fix; every rank of the third trains its share of a data-parallel run.
#include <cstdio>
#include <memory>
#include <string>

#include "base/error.hpp"
#include "purine/mpi.hpp"
#include "train/options.hpp"
#include "train/trainer.hpp"

namespace {

purine::TrainOptions options() {
  purine::TrainOptions o;
  o.model = "mlp";
  o.data_dir = "synthetic:1x28x28:10";
  o.max_iters = 2;
  o.batch = 8;
  o.threads = 1;
  o.evaluate = false;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string how = argc > 1 ? argv[1] : "first";
  std::unique_ptr<purine::MpiContext> mpi;
  if (how == "first") mpi = std::make_unique<purine::MpiContext>(&argc, &argv);
  purine::TrainOptions o = options();
  if (how == "late") mpi = std::make_unique<purine::MpiContext>(&argc, &argv);
  if (purine::mpi_world_size() > 1) o.parallel = purine::ParallelLayout::kData;
  try {
    purine::Trainer trainer(o);
    trainer.train();
  } catch (const purine::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  std::printf("rank %d of %d trained\n", purine::mpi_world_rank(), purine::mpi_world_size());
  return 0;
}
