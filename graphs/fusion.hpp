// Fusion: a rewrite of a built forward graph that replaces a chain of ops by one op whose kernel
// does the chain in one pass. The graph stays the truth: the fused op is an ordinary op of the
// bi-graph (pictures, traces, autodiff and the compile step see it as it runs), and the rewrite
// happens before autodiff, so the backward pass is derived from the fused op's own gradient.
//
// Why a rewrite of the built graph, not a layer option: a fusion is only correct where nothing
// else reads the intermediate blobs, which is known once the whole forward graph exists, not
// while a layer builds its part; the models stay written as conv, then ReLU; parameter names
// (checkpoints) do not change; and a switch turns it off for comparisons
// (TrainOptions::fuse, `purine train --nofuse`).
//
// conv + bias + relu -> conv_bias_relu (operators/conv.hpp): a "conv" op whose output only a
// "bias" op reads, whose output only a "relu" op reads, all three at one location and thread,
// in no order (Graph::add_order), the two intermediate blobs held by nothing else
// (Graph::held_outside_ops: not a copy's source, a join's slice, a replica sum, ...). relu's
// gradient reads its output, not its input, so the pre-activation is never needed again; the
// fused op's gradient is the three ops' gradients, op for op, and gives the same floats. The
// fused op is named "<conv's scope>::conv_bias_relu" (conv1::conv becomes
// conv1::conv_bias_relu) and writes the relu's output blob, whose name does not change.
//
// bias + relu -> bias_relu (operators/bias.hpp): the same rule for a "bias" op that a "relu"
// alone reads, whatever wrote the bias's input (an inner product: fc1 + relu1 of an MLP), once
// the conv chains are fused. Named "<bias's scope>::bias_relu" (fc1::add_bias becomes
// fc1::bias_relu); the same floats as the two ops, forward and backward. One op and one pass
// over the activation instead of two: on a GPU one kernel fewer per layer.
//
// batch_norm + relu -> batch_norm_relu (operators/batch_norm.hpp): the same rule for a
// "batch_norm" op whose y a "relu" alone reads (its statistics are read as before). Named
// "<batch norm's scope>::batch_norm_relu" (bn1::bn becomes bn1::batch_norm_relu); it writes the
// relu's output and the batch norm's statistics. Its gradient, batch_norm_relu_grad, masks dy by
// the output as relu_grad does and runs batch_norm_grad's formulas on that; the same floats
// forward and backward, one pass over the activation fewer each way, and one blob of the
// activation's size fewer (convnet_bn's bn1 and bn2).
//
// sum + relu -> sum_relu (operators/elementwise.hpp), at CPU locations: the same rule for a "sum"
// op whose output a "relu" alone reads (a residual block's join, relu(branch + shortcut)). Named
// "<sum's scope>::sum_relu" (layer1_0::sum::sum becomes layer1_0::sum::sum_relu); the same
// floats, one pass over the activation instead of two. Its gradient is the relu's, relu_grad(y,
// dy), which every input's gradient is (GradientSpec::temp_aliases).
//
// sum + relu_grad -> relu_grad of several dy (operators/activation.hpp), at CPU locations, a
// rewrite of the backward pass (fuse_relu_grad_sums, after autodiff): a "relu_grad" whose dy a
// "sum" alone writes and nothing else reads, the sum autodiff makes of the gradients a fan-out
// of y gathers (a residual block's output feeds the next block's branch and its shortcut). The
// relu_grad reads the sum's inputs as its dy parts and keeps its name; the same floats, one pass
// and one blob of the activation's size fewer. resnet20 has 9 sum_relu ops and 8 such fan-ins
// (the last block's output feeds the pooling alone). Run it where nothing else holds the
// sum's blob: a Gradients map asked for the gradient of the relu's output would name it (a
// training graph asks for the weights' only). The GPU kernels of both ops take the same sums in
// the same order and the GPU parity tests cover them, but neither fusion is made at GPU
// locations until a GPU has run those tests.
//
// inner_product + bias, or inner_product + bias_relu -> inner_product_bias
// (operators/inner_product_bias.hpp), at GPU locations only (where cuBLASLt adds the bias and
// applies the ReLU in the product's epilogue; on a CPU it would be the same two passes): a
// "bias" or "bias_relu" op whose input only an "inner_product" op writes and nothing else
// reads, the same rule as above, after the bias_relu fusion. Named "<inner product's
// scope>::inner_product_bias" (fc1::inner_product_bias); the same floats on a CPU or an emulated
// device, and on a GPU a product whose algorithm cuBLASLt picks (parity within float rounding).
//
// sibling conv_bias_relu ops -> concat, one conv_bias_relu, split (at CPU locations): two or more
// conv_bias_relu ops reading the same input, at one location, thread and role, with the same
// attributes and kernel size, none in an order (GoogLeNet's 1x1, 3x3_reduce and 5x5_reduce of
// each inception module), become one convolution over all their output channels: two concat ops
// join their weights and biases (a copy of the weights per run), one conv_bias_relu writes the
// whole output, and a split along the channels writes each member's output blob, whose name does
// not change. Named after the members' own scopes under the scope they share
// (inception_4a::1x1+3x3_reduce+5x5_reduce::conv_bias_relu, with ::weight, ::bias, ::top,
// ::weight::concat, ::bias::concat and ::split). One GEMM of O1 + O2 + ... columns instead of
// several narrow ones, the input read (and turned to channels-last rows) once, and backward one
// bias_relu_grad, one data gradient and one weight gradient (split into the members' as views)
// instead of one per member plus the sum of their data gradients. Not the same floats, close to
// them (tests/graphs/test_fusion.cpp): x's gradient becomes one sum over all the members'
// channels, where the separate ops sum each member's and then add those in order, and a GEMM
// over more output columns may sum each output in another order (oneDNN's AVX2 sgemm does, over
// 2x2 planes). The whole output and the members' outputs are both kept for the backward pass.
// Not at GPU locations: not measured there.
//
// sgd_update ops -> one sgd_update of several weights (operators/sgd_update.hpp), and the same
// for adam_update (operators/adam_update.hpp), a rewrite of a whole training graph (after the
// optimizer is added): the updates of one type at one location and thread, with the same
// learning rate blob (and Adam's step blob) and attributes, whose gradients the backward pass wrote
// (not a reduction: a data-parallel update stays behind its own reduction), none in an order.
// Named "sgd::update<k>@<location>"; the same floats. The one op waits for the last gradient
// and keeps every gradient until then: on a GPU it saves a launch per weight (GoogLeNet: 116 of
// them, one per weight or bias, become 2), on a CPU it would gain nothing, so training fuses the
// updates at GPUs only.
//
// update -> update that counts (count_in_updates): at a CPU location, an sgd_update or
// adam_update of one weight, in no order, that writes a new weight of a given list gets
// count_non_finite=1 and one more output, the number of non-finite values among the new weights
// it wrote, counted from the registers that hold them. The trainer's divergence check
// (train/training_graph.cpp) sums these instead of reading every weight again after the
// updates (convnet_bn: 0.93 ms of a 59 ms CPU step, mostly fc1's 12.8 MB, which its update
// streams past the caches). The op keeps its name; the same floats.
//
// Run the forward fusions on a graph whose forward part is complete (it sets up pending composites,
// as Graph::validate does) and before backward(); after it, an op that reads a removed blob cannot
// be added (the blob is gone). Not thread-safe (it edits the graph).
#pragma once

#include "purine/graph.hpp"

namespace purine {

// Fuses every conv + bias + relu chain of `graph` that qualifies (above). Returns how many.
int fuse_conv_bias_relu(Graph& graph);
// Fuses every remaining bias + relu pair that qualifies. Returns how many.
int fuse_bias_relu(Graph& graph);
// Fuses every batch_norm + relu pair that qualifies. Returns how many.
int fuse_batch_norm_relu(Graph& graph);
// Fuses every sum + relu pair that qualifies. Returns how many.
int fuse_sum_relu(Graph& graph);
// Fuses every sum that only feeds a relu_grad's dy into it (above), on a graph whose backward
// pass is built. Returns how many.
int fuse_relu_grad_sums(Graph& graph);
// Fuses every inner product + bias (or bias_relu) that qualifies (at GPU locations only with
// `gpus_only`). Returns how many.
int fuse_inner_product_bias(Graph& graph, bool gpus_only);
// Fuses every group of sibling conv_bias_relu ops that qualifies (above). Returns how many
// groups.
int fuse_sibling_convolutions(Graph& graph);
// The forward fusions: conv chains first, then bias_relu, batch_norm_relu, sum_relu at CPUs,
// inner_product_bias at GPUs, and the sibling convolutions with `siblings` (what training graphs
// get unless TrainOptions::fuse, or fuse_siblings, is off). Returns how many fused ops it made.
int fuse_forward(Graph& graph, bool siblings);
// Fuses the updates that qualify (at GPU locations only with `gpus_only`). Returns how many
// updates became part of a fused one.
int fuse_updates(Graph& graph, bool gpus_only);
// For `weights` (blobs of one CPU location): rewrites the updates that write them and qualify
// (above) to count. Returns their counts (scalar blobs named "<update>::non_finite" in the
// current scope, at the location) and, in `uncounted`, the weights no update counts.
std::vector<Blob*> count_in_updates(Graph& graph, const std::vector<Blob*>& weights,
                                    std::vector<Blob*>* uncounted);

}  // namespace purine
