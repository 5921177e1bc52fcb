// Helpers for the multi-rank tests (run by ctest through mpirun with 2 and 3 ranks). Every rank
// runs the same test cases in the same order, so a test may call MPI collectives directly, with
// one rule: a rank must never leave a test case (a failed REQUIRE, an exception) while the others
// still wait in a collective. Tests therefore catch what runs throw (see run_and_catch), make
// every collective call on every rank, and assert afterwards; graphs run with a short stall
// timeout, so a missing message becomes an error on the waiting rank instead of a hang.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "purine/runnable.hpp"

namespace purine::mpitest {

int rank();
int size();
void barrier();

// Long enough for any op of these tests on a crowded 2-core machine, short enough that a lost
// message fails a test within seconds.
constexpr std::chrono::milliseconds kStallTimeout{10000};
// RunOptions for this rank of the world, with kStallTimeout.
RunOptions run_options();

// True on every rank when `ok` is true on every rank.
bool all_ranks(bool ok);
// Every rank's `values` (equal lengths on all ranks), indexed by rank.
std::vector<std::vector<float>> allgather(const std::vector<float>& values);
// Every rank's string (any lengths), indexed by rank.
std::vector<std::string> allgather(const std::string& text);

// Every rank's `value`, indexed by rank.
std::vector<uint64_t> allgather(uint64_t value);
// FNV-1a of the bytes of `values`: equal hashes on every rank mean bit-identical values.
uint64_t hash_of(const std::vector<float>& values);

// Runs `body`; returns "" or what it threw (purine::Error or another std::exception).
std::string run_and_catch(const std::function<void()>& body);

// "" when `got` equals `expected` element for element, else the number of differing elements
// and the first one (short, unlike Catch's printout of a whole vector).
std::string mismatch(const std::vector<float>& got, const std::vector<float>& expected);

// A tensor's values as a vector.
std::vector<float> values_of(const Tensor& tensor);

}  // namespace purine::mpitest
