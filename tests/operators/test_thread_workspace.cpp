#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <thread>

#include "operators/cpu/thread_workspace.hpp"

using namespace purine;

TEST_CASE("WorkspaceLayout places pieces one after another on 64-byte boundaries", "[workspace]") {
  WorkspaceLayout layout;
  CHECK(layout.bytes() == 0);
  CHECK(layout.add(10) == 0);
  CHECK(layout.add(64) == 64);
  CHECK(layout.add(65) == 128);
  CHECK(layout.add(0) == 256);
  CHECK(layout.bytes() == 256);
}

TEST_CASE("thread_workspace is reused until a larger one is asked for", "[workspace]") {
  std::thread([] {  // a fresh thread: its workspace starts empty
    char* first = thread_workspace(1000);
    REQUIRE(first != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(first) % 64 == 0);
    std::memset(first, 1, 1000);  // all of it is usable
    CHECK(thread_workspace(1000) == first);
    CHECK(thread_workspace(10) == first);  // smaller: the same memory
    char* grown = thread_workspace(1 << 20);
    CHECK(reinterpret_cast<std::uintptr_t>(grown) % 64 == 0);
    std::memset(grown, 2, 1 << 20);
    CHECK(thread_workspace(1000) == grown);  // it never shrinks
  })
      .join();
}

TEST_CASE("each thread has its own workspace", "[workspace]") {
  char* mine = thread_workspace(4096);
  std::memset(mine, 7, 4096);
  char* other = nullptr;
  std::thread([&] {
    other = thread_workspace(4096);
    std::memset(other, 9, 4096);  // while this thread's is alive
  }).join();
  CHECK(other != mine);
  CHECK(mine[0] == 7);
  CHECK(mine[4095] == 7);
}

TEST_CASE("a thread's argument workspace stays put while its kernel workspace grows",
          "[workspace]") {
  std::thread([] {
    char* arguments = thread_workspace(4096, Workspace::kArguments);
    std::memset(arguments, 5, 4096);
    char* kernel = thread_workspace(4096);
    CHECK(kernel != arguments);
    std::memset(kernel, 6, 4096);
    thread_workspace(1 << 22);  // the kernel workspace grows (and moves)
    CHECK(thread_workspace(4096, Workspace::kArguments) == arguments);
    CHECK(arguments[0] == 5);
    CHECK(arguments[4095] == 5);
  }).join();
}
