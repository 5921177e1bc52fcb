// ONNX export: a model's forward (inference) graph with its trained weights as an ONNX model
// (opset 13), the format deployment tools (ONNX Runtime, TensorRT, OpenVINO) read. The model
// takes "images" [batch, C, H, W] (batch a symbolic dimension) standardized as in training and
// gives "probabilities" [batch, classes], the softmax that `purine predict` prints.
//   export_onnx({"mlp", "mlp.ckpt", {1, 1, 28, 28}}, "mlp.onnx");
// Each op maps to ONNX nodes (train/onnx_export.cpp lists the mapping); an op that has none is
// refused with a purine::Error naming it and its type, and nothing is written. Built only with
// Debian's libonnx-dev (its protobuf classes): without it onnx_export_supported() is false and
// the functions throw purine::Error saying so. Stateless and thread-safe.
#pragma once

#include <string>

#include "train/predictor.hpp"

namespace purine {

class Blob;
class Graph;

// Whether this build has ONNX export (it found libonnx-dev).
bool onnx_export_supported();

// The ONNX model (serialized onnx.ModelProto) of the ops of `graph` from `input` to `output`:
// every other blob no op writes is an initializer holding its tensor's values (the weights, so
// load them first). Throws purine::Error naming the first op without an ONNX mapping.
std::string graph_to_onnx(Graph& graph, Blob* input, Blob* output, const std::string& model_name);

// Builds the model's forward graph for `options.images` ([1, C, H, W] is enough: the batch is
// symbolic), loads `options.weights` into it and writes its ONNX model to `path` (crash-safe:
// on any error `path` is untouched and no file is left behind).
void export_onnx(const PredictorOptions& options, const std::string& path);

}  // namespace purine
