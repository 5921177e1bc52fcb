// `purine train`: trains a model with the flags defined in train_command.cpp, prints progress
// and the test accuracy, and optionally writes a JSON summary.
#pragma once

namespace purine::cli {

// Returns the process exit code. Throws purine::Error on bad flags or data.
int run_train();
// `purine graph`: the training graph the same flags build, drawn (purine/graph.hpp, to_dot) as
// GraphViz text or, through Graphviz's dot, SVG or PNG.
int run_graph();

}  // namespace purine::cli
