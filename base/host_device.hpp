// PURINE_HOST_DEVICE marks a function that the CPU code and, compiled by nvcc, the GPU kernels
// both call (operators/formulas.hpp, the launch geometry of operators/cuda/launch.hpp); elsewhere
// it is nothing.
#pragma once

#ifdef __CUDACC__
#define PURINE_HOST_DEVICE __host__ __device__
#else
#define PURINE_HOST_DEVICE
#endif
