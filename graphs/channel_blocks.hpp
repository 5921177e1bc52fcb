// Channel blocks: a rewrite of a whole training graph (forward, backward and optimizer, before
// compile) that keeps activations between oneDNN's convolutions in the channel blocks those
// kernels compute in, so that no convolution reorders its input or output on every run.
//
// oneDNN's direct convolutions on a CPU read and write [N, C, H, W] activations as [N, C/b, H,
// W, b] (b = 16 with AVX-512, 8 with AVX2). With plain tensors each run reorders x and y (and
// dy, dx) to and from that layout: in a resnet20 training step at batch 64, 263 reorders took
// 12.0 ms of the 73 ms that oneDNN ran (ONEDNN_VERBOSE, 2 Zen 5 cores, 2026-11-28). A blob whose
// every reader and writer can take the blocks (Operator::channel_blocking: the convolutions,
// whose kernels other than oneDNN's reorder through plain copies, batch norm and synchronized
// batch norm, pooling, the element-wise activations and sums, the bias gradients, and concat and
// split along whole blocks of channels) is given them (Blob::set_channel_block); its tensor then
// holds them (Tensor::channel_block) while its shape, and what the host reads or writes through
// it, stays [N, C, H, W].
//
// Blobs blocked together (below) are blocked only when that makes the kernels reorder no more
// elements per run than keeping them plain would: oneDNN's convolutions reorder plain
// arguments, the other convolution kernels (small planes, stems) blocked ones
// (ChannelBlocking::reorders).
//
// A blob is left plain when any op that touches it cannot take the blocks (LRN, an inner product's
// reshape, a copy, a concat or split whose parts are not whole blocks of channels of several
// images, an op at a GPU), when it is held outside the ops (a parameter, a copy's source, a view:
// Graph::held_outside_ops), accumulates several writers, or already has a tensor; and the blobs an
// element-wise op, a batch norm, a bias gradient, a concat or a split reads and writes are blocked
// together or not at all (a pooling takes each of its own). The floats do not change: a blocked
// convolution runs the primitive it ran before without the reorders (exact copies), the
// element-wise ops, concats and splits compute or copy the same elements in another order, and the
// sums of batch norm and the bias gradients and pooling's windows keep each channel's plain order
// (tests/graphs/test_channel_blocks.cpp, tests/train/test_trainer_channel_blocks.cpp). Training
// graphs (TrainOptions::block_channels) and the predictor's (train/predictor.hpp) are blocked.
#pragma once

#include "purine/graph.hpp"

namespace purine {

// Gives channel blocks of `block` to every blob of `graph` that qualifies (above); `block` is
// conv_channel_block() (operators/conv.hpp) for blobs that meet a convolution. Returns how many
// blobs.
int block_channels(Graph& graph, int block);

}  // namespace purine
