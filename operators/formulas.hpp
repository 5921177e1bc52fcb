// Element-wise formulas written once for the CPU kernels (operators/cpu/) and the GPU kernels
// (operators/cuda/, compiled by nvcc, where PURINE_HOST_DEVICE makes them device functions too),
// so that both backends compute the same expression in the same order. A CPU kernel that runs a
// formula four floats at a time in SSE writes those vector operations in the formula's order next
// to it (operators/cpu/update_loop.hpp). Results may still differ in the last bits between the
// two: nvcc contracts a * b + c into one fused multiply-add, and the libraries' exp and tanh are
// not the same code.
#pragma once

#include <math.h>

#include "base/host_device.hpp"
#include "operators/counter_rng.hpp"

namespace purine::formula {

// Activations, and their gradients from the forward output y.
struct Relu {
  PURINE_HOST_DEVICE float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct Sigmoid {
  PURINE_HOST_DEVICE float operator()(float x) const { return 1.0f / (1.0f + expf(-x)); }
};
struct Tanh {
  PURINE_HOST_DEVICE float operator()(float x) const { return tanhf(x); }
};
struct ReluGrad {
  PURINE_HOST_DEVICE float operator()(float y, float dy) const { return y > 0.0f ? dy : 0.0f; }
};
struct SigmoidGrad {
  PURINE_HOST_DEVICE float operator()(float y, float dy) const { return dy * y * (1.0f - y); }
};
struct TanhGrad {
  PURINE_HOST_DEVICE float operator()(float y, float dy) const { return dy * (1.0f - y * y); }
};

// Batch normalization's output from a channel's statistics: y = x scale + shift with
// scale = gamma inv_std and shift = beta - mean scale (batch_norm and sync_batch_norm).
struct BatchNormAffine {
  float scale, shift;
  PURINE_HOST_DEVICE BatchNormAffine(float gamma, float beta, float mean, float inv_std)
      : scale(gamma * inv_std), shift(beta - mean * (gamma * inv_std)) {}
  PURINE_HOST_DEVICE float operator()(float x) const { return x * scale + shift; }
};

// SGD with momentum and L2 weight decay (operators/sgd_update.hpp), one element: the new history
// h' = momentum h + lr (g + decay w), then the new weight w - h'.
struct SgdStep {
  float lr, momentum, decay;
  PURINE_HOST_DEVICE float history(float w, float g, float h) const {
    return momentum * h + lr * (g + decay * w);
  }
  PURINE_HOST_DEVICE float weight(float w, float new_history) const { return w - new_history; }
};

// Adam (operators/adam_update.hpp) at step t: the constants of the step, then one element.
struct AdamStep {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps;
  float step_size;    // lr / (1 - beta1^t)
  float correction2;  // sqrt(1 - beta2^t)
  float shrink;       // 1 - lr decay with decoupled decay (AdamW), else 1
  float l2;           // decay added to the gradient without decoupling, else 0
  // The hyper-parameters as AdamUpdateOp::Hyper holds them.
  PURINE_HOST_DEVICE AdamStep(float beta1_in, float beta2_in, float one_minus_beta1_in,
                              float one_minus_beta2_in, float eps_in, float weight_decay,
                              bool decoupled, float lr, double t)
      : beta1(beta1_in),
        beta2(beta2_in),
        one_minus_beta1(one_minus_beta1_in),
        one_minus_beta2(one_minus_beta2_in),
        eps(eps_in),
        step_size(static_cast<float>(lr / (1.0 - pow(double(beta1_in), t)))),
        correction2(static_cast<float>(sqrt(1.0 - pow(double(beta2_in), t)))),
        shrink(decoupled ? 1.0f - lr * weight_decay : 1.0f),
        l2(decoupled ? 0.0f : weight_decay) {}
  PURINE_HOST_DEVICE float gradient(float w, float g) const { return g + l2 * w; }
  PURINE_HOST_DEVICE float first_moment(float m, float g) const {
    return beta1 * m + one_minus_beta1 * g;
  }
  PURINE_HOST_DEVICE float second_moment(float v, float g) const {
    return beta2 * v + one_minus_beta2 * g * g;
  }
  PURINE_HOST_DEVICE float weight(float w, float m, float v) const {
    return w * shrink - step_size * m / (sqrtf(v) / correction2 + eps);
  }
};

// Gradient clipping's factor (operators/clip.hpp, clip_grad_norm_'s): min(1, max_norm / (norm +
// 1e-6)) for the gradients' total sum of squares, added in double on both backends.
struct ClipFactor {
  double max_norm;
  PURINE_HOST_DEVICE float operator()(double sum_of_squares) const {
    return static_cast<float>(fmin(1.0, max_norm / (sqrt(sum_of_squares) + 1e-6)));
  }
};

// Dropout's mask for element i of a run keyed by `key` (operators/counter_rng.hpp): `scale` where
// the element is kept (the stream's i-th uniform at least `ratio`), else 0.
struct DropoutMask {
  float ratio, scale;
  PURINE_HOST_DEVICE float operator()(uint64_t key, uint64_t i) const {
    return of_uniform(counter_uniform01(key, i));
  }
  PURINE_HOST_DEVICE float of_uniform(float u) const { return u >= ratio ? scale : 0.0f; }
};

}  // namespace purine::formula
