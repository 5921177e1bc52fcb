// Where the tests find Fashion-MNIST (Debian's dataset-fashion-mnist), and whether it is there:
// tests that train on it skip with a warning when it is not.
#pragma once

#include <sys/stat.h>

#include <string>

namespace purine::testing {

inline const char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

inline bool have_fashion_mnist() {
  struct stat st;
  for (const char* file : {"/train-images-idx3-ubyte.gz", "/train-labels-idx1-ubyte.gz"})
    if (stat((std::string(kFashionMnistDir) + file).c_str(), &st) != 0) return false;
  return true;
}

}  // namespace purine::testing
