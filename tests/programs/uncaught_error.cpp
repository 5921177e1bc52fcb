// A user program that lets a purine::Error escape main() while an MpiContext is alive (see
// tests/purine/test_mpi_context.cpp).
#include "base/error.hpp"
#include "purine/mpi.hpp"

int main(int argc, char** argv) {
  purine::MpiContext mpi(&argc, &argv);
  throw purine::Error("the model file is missing");
}
