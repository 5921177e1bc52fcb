// The Catch2 main shared by every test executable: initializes glog quietly.
#define CATCH_CONFIG_RUNNER
#include <glog/logging.h>

#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_minloglevel = 2;  // errors only: tests assert on values, not on log lines
  return Catch::Session().run(argc, argv);
}
