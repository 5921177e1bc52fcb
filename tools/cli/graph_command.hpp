// `purine graph`: the training graph the train flags build (for --ranks ranks, in this one
// process), drawn by purine/graph_dot.hpp as GraphViz text or, through Graphviz's dot, as SVG or
// PNG. Its own flags are defined in graph_command.cpp.
#pragma once

#include <string>

namespace purine::cli {

// Returns the process exit code. Throws purine::Error on bad flags or data, naming the flag.
int run_graph();

// Graphviz's size ("W,H" inches) from --size's "WxH" (e.g. 16x10 or 12.5x8); throws
// purine::Error naming the flag when it is not two positive numbers.
std::string graphviz_size(const std::string& flag_value);

}  // namespace purine::cli
