#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Mean cross-entropy of logits [N, classes] (f32/f64) against labels [N] (i64), with a fused log-softmax and
// PyTorch's label smoothing: target = (1 - s) * onehot + s / classes. Returns a one-element tensor [] of the
// logits' dtype. Labels outside [0, classes) throw ValueError (checked on the host for CPU tensors; on CUDA the
// kernel records a flag that is checked when the loss is read).
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing = 0.0);

}  // namespace liftoff
