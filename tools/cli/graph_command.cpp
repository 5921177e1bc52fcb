#include "tools/cli/graph_command.hpp"

#include <gflags/gflags.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "base/error.hpp"
#include "purine/durable_file.hpp"
#include "purine/graph_dot.hpp"
#include "tools/cli/config.hpp"
#include "tools/cli/startup_errors.hpp"
#include "tools/cli/train_command.hpp"
#include "train/trainer.hpp"

DEFINE_string(format, "svg", "graph: dot (GraphViz text), svg or png (drawn by Graphviz's dot)");
DEFINE_bool(expand, false, "graph: draw every op of every layer (default: one circle per layer)");
DEFINE_bool(forward_only, false, "graph: draw the forward ops only");
DEFINE_string(size, "",
              "graph: the largest drawing, WxH in inches (e.g. 16x10); Graphviz scales a larger "
              "one down to fit (default: no limit)");
DEFINE_int32(dpi, 96, "graph: dots per inch of a PNG");
DECLARE_string(output);
DECLARE_string(config);
DECLARE_string(parallel);
// Shared with purine simulate (simulate_command.cpp defines it); help.cpp words it for graph.
DECLARE_int32(ranks);

namespace purine::cli {

namespace {

// Pipes `dot` into Graphviz's dot, which writes `path` in `format` (its own messages go to our
// stderr); an exit status is decoded into what went wrong.
void draw_with_graphviz(const std::string& dot, const std::string& format,
                        const std::string& path) {
  std::string quoted;  // the path in single quotes for the shell, each ' written as '\''
  for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  const std::string command = "dot -T" + format + " -o '" + quoted + "'";
  FILE* pipe = popen(command.c_str(), "w");
  require(pipe != nullptr, "cannot start a shell to run Graphviz's dot");
  std::fwrite(dot.data(), 1, dot.size(), pipe);
  const int status = pclose(pipe);
  if (status == 0) return;
  require(!(WIFEXITED(status) && WEXITSTATUS(status) == 127),
          "Graphviz's dot is not installed (apt-get install graphviz, or --format=dot)");
  if (WIFSIGNALED(status))
    throw Error(
        str("Graphviz's dot was killed by signal ", WTERMSIG(status), " while writing ", path));
  throw Error(str("Graphviz's dot could not write ", path, " (exit status ",
                  WIFEXITED(status) ? WEXITSTATUS(status) : status, "; its message is above)"));
}

}  // namespace

std::string graphviz_size(const std::string& flag_value) {
  const size_t x = flag_value.find('x');
  auto positive = [](const std::string& s) {
    char* end = nullptr;
    const double v = s.empty() ? 0 : std::strtod(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size() && v > 0 && v < 1e4;
  };
  require(x != std::string::npos && positive(flag_value.substr(0, x)) &&
              positive(flag_value.substr(x + 1)),
          "--size=", flag_value, ": give the width and height in inches as WxH, e.g. 16x10");
  return flag_value.substr(0, x) + "," + flag_value.substr(x + 1);
}

int run_graph() {
  const ConfigFile config = apply_config_file(FLAGS_config);
  require(FLAGS_format == "dot" || FLAGS_format == "svg" || FLAGS_format == "png",
          "--format must be dot, svg or png, got '", FLAGS_format, "'");
  // --ranks given: that many ranks drawn from this one process; else the MPI world's.
  gflags::CommandLineFlagInfo ranks_flag;
  gflags::GetCommandLineFlagInfo("ranks", &ranks_flag);
  const int ranks = ranks_flag.is_default ? 0 : FLAGS_ranks;
  require(ranks_flag.is_default || FLAGS_ranks >= 1, "--ranks=", FLAGS_ranks,
          ": give a number of ranks, 1 or more");
  require(FLAGS_dpi > 0 && FLAGS_dpi <= 1200, "--dpi=", FLAGS_dpi,
          ": give dots per inch from 1 to 1200 (96 is a screen's)");
  DotPicture picture;
  if (!FLAGS_size.empty()) picture.size = graphviz_size(FLAGS_size);
  picture.dpi = FLAGS_dpi;
  picture.collapse = !FLAGS_expand;
  picture.forward_only = FLAGS_forward_only;
  // Refused before the graph is built, and before dot would say it less clearly.
  const std::filesystem::path folder = std::filesystem::path(FLAGS_output).parent_path();
  require(folder.empty() || std::filesystem::is_directory(folder), "--output=", FLAGS_output,
          ": the folder ", folder.string(), " does not exist");
  // Several ranks of the default layout (none) draw data parallelism.
  if (ranks > 1 && FLAGS_parallel == "none") FLAGS_parallel = "data";
  TrainOptions options;
  std::string problem;
  try {
    options = options_from_flags(ranks);
  } catch (const Error& e) {
    problem = config.place(e.what());
  }
  settle_startup(problem);
  std::unique_ptr<Graph> graph;
  try {
    // Every rank's part of the graph, as each rank builds it; nothing allocated or compiled.
    graph = build_training_graph(options);
    graph->validate();
  } catch (const Error& e) {
    throw Error(config.place(e.what()));
  }
  const std::string dot = draw_dot(*graph, picture);
  const std::string path = FLAGS_output.empty() ? options.model + "." + FLAGS_format : FLAGS_output;
  if (FLAGS_format == "dot") {
    write_file_durably(path, dot);
  } else {
    draw_with_graphviz(dot, FLAGS_format, path);
  }
  std::printf("wrote %s\n", path.c_str());
  return 0;
}

}  // namespace purine::cli
