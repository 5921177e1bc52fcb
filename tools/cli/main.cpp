// purine: the command-line tool.
//   purine train [--model=convnet_bn] [--data=DIR] [--epochs=5] [--max-iters=N] [--batch=64] ...
//   purine models
//   purine devices
// Errors print one line, "error: ...", and exit non-zero.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/device_runtime.hpp"
#include "base/error.hpp"
#include "models/models.hpp"
#include "operators/registry.hpp"
#include "purine/mpi.hpp"
#include "tools/cli/predict_command.hpp"
#include "tools/cli/train_command.hpp"

namespace {

const char kUsage[] =
    "usage: purine <command> [flags]\n"
    "commands:\n"
    "  train    train a model (purine train --help for its flags)\n"
    "  predict  classify an image, or evaluate on a test split, with a trained checkpoint\n"
    "  export   write a checkpoint's weights alone (--weights-only)\n"
    "  graph    draw the training graph a layout builds (purine graph --help)\n"
    "  models   list the registered models\n"
    "  ops      list the operators with their inputs, outputs and attributes\n"
    "  devices  list the GPUs this process can use\n";

// gflags spells flags with underscores; accept the dashed spelling too (--max-iters).
std::vector<std::string> normalize_flags(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (i > 0 && a.rfind("--", 0) == 0) {
      size_t end = a.find('=');
      for (size_t k = 2; k < std::min(end, a.size()); ++k)
        if (a[k] == '-') a[k] = '_';
    }
    args.push_back(a);
  }
  return args;
}

// `purine devices`: what the device runtime sees. No GPU is not an error: the CPU trains.
int list_devices() {
  const purine::DeviceRuntime* runtime = purine::device_runtime();
  if (!runtime) {
    std::cout << "no GPU backend: this build has no CUDA (cmake found no nvcc, cuDNN or NCCL)\n";
    return 0;
  }
  const std::vector<std::string> devices = runtime->describe_devices();
  std::cout << runtime->name() << ": " << devices.size() << " GPU"
            << (devices.size() == 1 ? "" : "s") << (devices.empty() ? " (no device or driver)" : "")
            << "\n";
  for (const std::string& line : devices) std::cout << "  " << line << "\n";
  return 0;
}

// `purine <command> --help`: the command's own flags (those `wanted` picks), as users spell
// them (--max-iters), without the ~100 flags of glog and gflags (those stay under --helpfull).
void print_help(const std::string& command,
                const std::function<bool(const gflags::CommandLineFlagInfo&)>& wanted) {
  std::vector<gflags::CommandLineFlagInfo> flags;
  gflags::GetAllFlags(&flags);
  std::cout << "usage: purine " << command
            << " [flags]   (flags may be written --max-iters or --max_iters)\n";
  for (const gflags::CommandLineFlagInfo& f : flags) {
    if (f.filename.find("tools/cli/") == std::string::npos || !wanted(f)) continue;
    std::string name = f.name;
    std::replace(name.begin(), name.end(), '_', '-');
    std::cout << "  --" << name << " (" << f.type << ", default "
              << (f.default_value.empty() ? "\"\"" : f.default_value) << ")\n      "
              << f.description << "\n";
  }
  std::cout << "--helpfull lists every flag, glog's and gflags' included.\n";
}

// Which flags each command's --help lists: train's own (in train_command.cpp, less those of
// graph alone), graph's (train's, which build the graph it draws, and its own), and the lists
// predict_command.cpp gives for predict and export.
bool flag_of_command(const std::string& command, const gflags::CommandLineFlagInfo& f) {
  const bool train_file = f.filename.find("train_command.cpp") != std::string::npos;
  const bool graph_only = f.name == "format" || f.name == "expand" || f.name == "forward_only";
  if (command == "train") return train_file && !graph_only;
  if (command == "graph") return train_file || f.name == "output";
  const std::vector<std::string> listed =
      command == "predict" ? purine::cli::predict_flags() : purine::cli::export_flags();
  return std::find(listed.begin(), listed.end(), f.name) != listed.end();
}

}  // namespace

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "help") == 0) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  // Hand gflags "purine <flags>" without the command word.
  std::vector<std::string> args = normalize_flags(argc, argv);
  args.erase(args.begin() + 1);
  std::vector<char*> cargs;
  for (auto& a : args) cargs.push_back(a.data());
  int cargc = static_cast<int>(cargs.size());
  char** cargv = cargs.data();
  gflags::SetUsageMessage("purine train [flags]");
  std::unique_ptr<purine::MpiContext> mpi;
  // On several ranks a failure on one may leave the others waiting: end the whole job.
  auto fail = [&](const std::string& message) {
    const bool several = mpi && mpi->size() > 1;
    // One write per line, so that the lines of several ranks do not interleave.
    const std::string line =
        "error: " + (several ? "rank " + std::to_string(mpi->rank()) + ": " : "") + message + "\n";
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
    if (several) mpi->abort(1);
    return 1;
  };
  try {
    mpi = std::make_unique<purine::MpiContext>(&argc, &argv);
    const bool wants_help = std::any_of(args.begin(), args.end(), [](const std::string& a) {
      return a == "--help" || a == "-help" || a == "-h";
    });
    if (command == "train" || command == "predict" || command == "export" || command == "graph") {
      // Earlier versions took --resume=FILE; --resume is a switch now.
      for (const std::string& a : args)
        if (a.rfind("--resume=", 0) == 0 && a != "--resume=true" && a != "--resume=false")
          throw purine::Error(
              purine::str("--resume takes no file (it continues from the newest "
                          "checkpoint in --checkpoint-dir); for a file use ",
                          "--resume-from=", a.substr(9)));
      if (wants_help) {
        print_help(command, [&](const gflags::CommandLineFlagInfo& f) {
          return flag_of_command(command, f);
        });
        return 0;
      }
      gflags::ParseCommandLineFlags(&cargc, &cargv, true);
      if (cargc > 1) throw purine::Error(purine::str("unexpected argument '", cargv[1], "'"));
      if (command == "predict") return purine::cli::run_predict();
      if (command == "export") return purine::cli::run_export();
      if (command == "graph") return purine::cli::run_graph();
      return purine::cli::run_train();
    }
    if (command == "ops") {
      for (const auto& name : purine::OperatorRegistry::names())
        std::cout << name << ": " << purine::OperatorRegistry::signature(name) << "\n";
      return 0;
    }
    if (command == "models") {
      for (const auto& name : purine::model_names()) std::cout << name << "\n";
      return 0;
    }
    if (command == "devices") return list_devices();
    std::cerr << "error: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
