// Folding a user's relu (or relu6) and residual add into batch norm's normalize pass, without special calls.
//
// On CUDA, batch_norm2d() computes the statistics at once but defers the normalize pass (runtime/deferred.h):
// its output is handed out unwritten. relu(y) and y + residual look at their operand first: when it is such
// a pending output, they launch one normalize pass with the epilogue (bn + residual, then ReLU) and record
// one autograd node for the fused chain, exactly what batch_norm2d_relu() computes; the unfused output is
// never written. Anyone else who reads y (a view, another op, a copy to the host) issues the plain normalize
// pass first and sees bn(x). So `relu(bn2(conv2(y)) + shortcut)` in a user's block costs one pass over the
// activation instead of three, forward and backward (the fused node's backward applies the ReLU mask inside
// the batch-norm gradient pass). relu6(y) folds the same way (MobileNetV2's `relu6(bn(conv(x)))`). The CPU
// path stays unfused: it is the reference.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// relu(y) when y is a pending batch-norm output (whole, not a view): the fused result; undefined otherwise.
Tensor fold_relu_into_batch_norm(const Tensor& y);
// relu6(y) = min(max(y, 0), 6) likewise (its gradient passes where 0 < y < 6, as PyTorch's hardtanh).
Tensor fold_relu6_into_batch_norm(const Tensor& y);
// a + alpha * b when one operand is a pending batch-norm output without a residual yet and the other can be
// its residual (same shape, dtype and device; alpha 1): a pending output of bn + residual; undefined
// otherwise.
Tensor fold_add_into_batch_norm(const Tensor& a, const Tensor& b, double alpha);

namespace detail {
// For the batch_norm2d front: y (already allocated, x's shape and layout) becomes the pending output of
// bn(x) with the statistics the forward saved.
void defer_batch_norm_output(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const Tensor& save_mean, const Tensor& save_invstd, bool training);
// Whether the front defers a training forward of x whole, its statistics too: where the forward is one
// launch (cuda::batch_norm_one_launch), taking the statistics at the call would cost a launch of its own.
bool batch_norm_defers_forward(const Tensor& x, bool training);
// y becomes the pending output of bn(x) in training mode whose statistics (save_mean / save_invstd, the
// running statistics, batches_tracked) are taken in the launch of the first normalize pass issued (y's, or
// that of bn(x) + residual folded from it), or alone when the running statistics are read before, at the
// layer's next forward, or at backward's flush: once, before anyone can see them.
void defer_batch_norm_forward(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                              const Tensor& running_mean, const Tensor& running_var, double momentum,
                              double eps, const Tensor& batches_tracked, const Tensor& save_mean,
                              const Tensor& save_invstd);
// The autograd node of batch norm with an optional residual and ReLU capped at relu_cap (kNoReluCap of
// ops/batch_norm2d/kernels.h: none) (backward: one batch-norm gradient pass with the ReLU mask taken from
// `out`).
void record_batch_norm_node(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& residual, const Tensor& save_mean, const Tensor& save_invstd,
                            bool training, bool relu, double relu_cap);
}  // namespace detail

}  // namespace liftoff
