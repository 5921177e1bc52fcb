// purine: the command-line tool.
//   purine train [--model=convnet_bn] [--data=DIR] [--epochs=5] [--max-iters=N] [--batch=64] ...
//   purine models
//   purine devices
// Errors print one line, "error: ...", and exit non-zero; under mpirun see
// tools/cli/startup_errors.hpp for which rank prints it.
#include <gflags/gflags.h>
#include <glog/logging.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "base/device_runtime.hpp"
#include "base/error.hpp"
#include "models/models.hpp"
#include "operators/registry.hpp"
#include "purine/mpi.hpp"
#include "tools/cli/graph_command.hpp"
#include "tools/cli/help.hpp"
#include "tools/cli/predict_command.hpp"
#include "tools/cli/simulate_command.hpp"
#include "tools/cli/startup_errors.hpp"
#include "tools/cli/train_command.hpp"

namespace {

const char kUsage[] =
    "usage: purine <command> [flags]\n"
    "commands:\n"
    "  train    train a model (purine train --help for its flags)\n"
    "  predict  classify an image, or evaluate on a test split, with a trained checkpoint\n"
    "  export   write a checkpoint's weights alone (--weights-only), as an ONNX model (--onnx)\n"
    "           or the forward graph (--forward-graph)\n"
    "  graph    draw the training graph a layout builds (purine graph --help)\n"
    "  simulate predict a layout's step time and img/s on a cluster by simulation\n"
    "           (purine simulate --help)\n"
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
    std::cout << "no GPU backend: " << purine::device_backend_problem() << "\n";
    return 0;
  }
  const std::vector<std::string> devices = runtime->describe_devices();
  std::cout << runtime->name() << ": " << devices.size() << " GPU"
            << (devices.size() == 1 ? "" : "s") << (devices.empty() ? " (no device or driver)" : "")
            << "\n";
  for (const std::string& line : devices) std::cout << "  " << line << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  FLAGS_minloglevel = 1;  // warnings and errors; see below for verbose logging
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
  // One write per line, so that the lines of several ranks do not interleave.
  auto print_line = [](const std::string& line) {
    std::fwrite(line.data(), 1, line.size(), stderr);
    std::fflush(stderr);
  };
  // An error that may be this rank's own, with other ranks waiting for it: each failing rank
  // prints its line, and the whole job ends (tools/cli/startup_errors.hpp).
  auto fail = [&](const std::string& message) {
    const bool several = mpi && mpi->size() > 1;
    print_line("error: " + (several ? "rank " + std::to_string(mpi->rank()) + ": " : "") + message +
               "\n");
    if (several) mpi->abort(1);
    return 1;
  };
  try {
    // MPI only where a launcher (mpirun) started this process: Open MPI's start of a process
    // alone spawns a daemon, 0.3 s of every command's start, and a process alone needs no MPI
    // (purine/mpi.hpp's functions then say a world of one, rank 0).
    if (purine::mpi_launched_world().size != 0)
      mpi = std::make_unique<purine::MpiContext>(&argc, &argv);
    const bool wants_help = std::any_of(args.begin(), args.end(), [](const std::string& a) {
      return a == "--help" || a == "-help" || a == "-h";
    });
    if (command == "train" || command == "predict" || command == "export" || command == "graph" ||
        command == "simulate") {
      // The flags, the same on every rank: their errors are told once (startup_errors.hpp).
      std::string problem;
      try {
        // Earlier versions took --resume=FILE; --resume is a switch now.
        for (const std::string& a : args)
          if (a.rfind("--resume=", 0) == 0 && a != "--resume=true" && a != "--resume=false")
            throw purine::Error(
                purine::str("--resume takes no file (it continues from the newest "
                            "checkpoint in --checkpoint-dir); for a file use ",
                            "--resume-from=", a.substr(9)));
        if (!wants_help) {
          // gflags would end the process on an unknown flag, or a value it cannot read, with
          // a line of its own; refuse them here, in the words of the flags.
          purine::cli::check_flags_known(command, {args.begin() + 1, args.end()});
          purine::cli::check_flag_values({args.begin() + 1, args.end()});
          gflags::ParseCommandLineFlags(&cargc, &cargv, true);
          if (cargc > 1) throw purine::Error(purine::str("unexpected argument '", cargv[1], "'"));
        }
      } catch (const purine::Error& e) {
        problem = e.what();
      }
      if (wants_help && problem.empty()) {
        if (purine::mpi_world_rank() == 0)
          std::cout << purine::cli::help_text(command);  // once under mpirun
        return 0;
      }
      purine::cli::settle_startup(problem);
      if (FLAGS_v > 0) FLAGS_minloglevel = 0;  // verbose logging asked for (--v=1 or GLOG_v=1)
      if (command == "predict") return purine::cli::run_predict();
      if (command == "export") return purine::cli::run_export();
      if (command == "graph") return purine::cli::run_graph();
      if (command == "simulate") return purine::cli::run_simulate();
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
    if (purine::mpi_world_rank() == 0)
      std::cerr << "error: unknown command '" << command << "'\n" << kUsage;
    return 2;
  } catch (const purine::cli::EveryRankError& e) {
    // Every rank met it before any communication: rank 0 tells it, every rank finalizes MPI
    // (MpiContext's destructor) and exits 1, without MPI_Abort's banner.
    if (!mpi || mpi->rank() == 0) print_line(std::string("error: ") + e.what() + "\n");
    return 1;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
