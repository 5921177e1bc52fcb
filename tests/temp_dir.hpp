// TempDir: a fresh directory under /tmp for one test, removed with everything in it when the
// object goes out of scope. Shared by the tests that write files.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

namespace purine::testing {

class TempDir {
 public:
  TempDir() {
    char name[] = "/tmp/purine-test-XXXXXX";  // mkdtemp fills in the Xs
    REQUIRE(::mkdtemp(name) != nullptr);
    path_ = name;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace purine::testing
