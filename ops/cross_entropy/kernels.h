// Kernels behind cross_entropy(): logits [N, C] and labels [N] contiguous, N >= 1, C >= 1.
// lse [N] holds each row's log-sum-exp (f64 for f64 logits, else f32), saved for the backward.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
// Labels are already validated by the front.
void cross_entropy_forward(const Tensor& logits, const Tensor& labels, double smoothing, const Tensor& loss,
                           const Tensor& lse);
void cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& lse,
                            const Tensor& grad_loss, double smoothing, const Tensor& grad_logits);
}  // namespace cpu
namespace cuda {
// A label outside [0, C) makes the loss (and that row's gradient) NaN.
void cross_entropy_forward(const Tensor& logits, const Tensor& labels, double smoothing, const Tensor& loss,
                           const Tensor& lse);
void cross_entropy_backward(const Tensor& logits, const Tensor& labels, const Tensor& lse,
                            const Tensor& grad_loss, double smoothing, const Tensor& grad_logits);
}  // namespace cuda
}  // namespace liftoff
