// The ONNX mapping of train/onnx_export.hpp: an op without one, or one that ONNX would compute
// otherwise (training-mode dropout), is refused naming the op and its type.
#include <catch2/catch.hpp>

#include "base/error.hpp"
#include "purine/graph.hpp"
#include "train/onnx_export.hpp"

using namespace purine;
using Catch::Contains;

TEST_CASE("graph_to_onnx refuses an op without an ONNX mapping, naming it and its type", "[onnx]") {
  Graph g("unmapped");
  Blob* x = g.add_blob("x", {2, 4});
  Blob* relu = g.apply("act", "relu", {}, {x})[0];
  Blob* s = g.apply("squares", "sum_squares", {}, {relu})[0];
  if (!onnx_export_supported()) {
    CHECK_THROWS_WITH(graph_to_onnx(g, x, s, "unmapped"), Contains("libonnx-dev"));
    return;
  }
  CHECK_THROWS_AS(graph_to_onnx(g, x, s, "unmapped"), Error);
  CHECK_THROWS_WITH(graph_to_onnx(g, x, s, "unmapped"),
                    Contains("ONNX export: op 'squares' of type 'sum_squares' has no ONNX "
                             "mapping"));
  // The part before it exports.
  CHECK(!graph_to_onnx(g, x, relu, "unmapped").empty());
}

TEST_CASE("graph_to_onnx refuses dropout in training mode", "[onnx]") {
  if (!onnx_export_supported()) return;
  Graph g("train_mode");
  Blob* x = g.add_blob("x", {2, 4});
  Blob* y = g.apply("drop", "dropout", Attrs().set("mode", "train"), {x})[0];
  CHECK_THROWS_WITH(graph_to_onnx(g, x, y, "train_mode"),
                    Contains("op 'drop' of type 'dropout' is in training mode"));
}
