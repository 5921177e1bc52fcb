// Whether the kernels that can trade run-to-run bit identity for speed keep it: the value a
// convolution op takes when it has no `deterministic` attribute of its own (operators/conv.hpp:
// on the CPU, conv_grad_weight's one-primitive oneDNN form; on the GPU, cuDNN's algorithms with
// atomics, in all three directions). On by default. Process-wide: set it before the first run
// of a graph (the kernels choose on first use); `purine train --nodeterministic` turns it off.
#pragma once

namespace purine {

void set_deterministic_kernels(bool on);
bool deterministic_kernels();

}  // namespace purine
