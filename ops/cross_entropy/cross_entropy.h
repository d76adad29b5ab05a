#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Mean cross-entropy of logits [N, classes] against labels [N] (i64), with a fused log-softmax and PyTorch's
// label smoothing: target = (1 - s) * onehot + s / classes, s in [0, 1]. Returns a one-element tensor [] of
// the logits' dtype (f32/f64 on the CPU; also f16/bf16 on CUDA, computed in f32). N >= 1. Backward: glogits =
// (softmax - target) / N * gy. Labels outside [0, classes): on the CPU, throws ValueError naming the label
// and its row. On CUDA the labels are never read by the host (no sync), so such a row makes the loss NaN (and
// its gradient row NaN), which the GradScaler's inf/NaN check or the logged loss reveals.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing = 0.0);

}  // namespace liftoff
