// Kernels behind batch_norm2d(): x [N, C, H, W] contiguous, or on CUDA channels-last (then y, the residual,
// grad_y, y_relu and the input gradients are channels-last too); weight, bias, running stats [C] (running
// stats may be undefined in training). save_mean / save_invstd [C] are f64 for f64 input, f32 otherwise: the
// statistics used for normalization (batch ones in training, running ones in eval), kept for the backward.
#pragma once
#include <limits>

#include "runtime/tensor.h"

namespace liftoff {

// A fused epilogue: y = bn(x) (+ residual) (then min(max(., 0), relu_cap) when relu: ReLU, or ReLU6 with a
// cap of 6). residual: x's shape and dtype, or undefined. Backward then takes y_relu (the forward output,
// when relu was fused: gradients pass where 0 < y < relu_cap) and fills grad_residual (the gradient reaching
// bn + residual), when defined.
inline constexpr double kNoReluCap = std::numeric_limits<double>::infinity();
struct BnEpilogue {
  Tensor residual;
  bool relu = false;
  double relu_cap = kNoReluCap;  // CUDA only (the CPU path is never fused with a cap)
  // An i64 scalar (a layer's num_batches_tracked) that a CUDA training forward increments where it finalizes
  // the statistics; on the CPU the front increments it. Undefined: none.
  Tensor batches_tracked;
  // CUDA: compute the statistics only; the normalize pass comes later from batch_norm_apply (deferred, so
  // that a following relu or residual add folds into it: ops/batch_norm2d/fusion.h).
  bool skip_normalize = false;
};

namespace cpu {
void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double momentum, double eps,
                        const BnEpilogue& epilogue, const Tensor& y, const Tensor& save_mean,
                        const Tensor& save_invstd);
// gx, gweight, gbias, grad_residual: each preallocated, or undefined when not needed. relu_cap: as
// BnEpilogue's (kNoReluCap on the CPU). bias: the layer's bias when the ReLU was fused and no residual added
// (CUDA may then recompute the mask from x rather than read y_relu), else undefined; the CPU reads y_relu.
void batch_norm_backward(const Tensor& x, const Tensor& grad_y, const Tensor& weight, const Tensor& bias,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training,
                         const Tensor& y_relu, double relu_cap, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_residual);
}  // namespace cpu
namespace cuda {
void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double momentum, double eps,
                        const BnEpilogue& epilogue, const Tensor& y, const Tensor& save_mean,
                        const Tensor& save_invstd);
// Whether a training forward of x runs in one launch, statistics, finalize and normalize with the epilogue
// together (small channels-last inputs: ops/batch_norm2d/cuda_nhwc_resident.cuh); with skip_normalize it
// then takes the statistics alone in one launch.
bool batch_norm_one_launch(const Tensor& x);
// The normalize pass alone, with the statistics a forward with skip_normalize saved.
void batch_norm_apply(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& save_mean,
                      const Tensor& save_invstd, const BnEpilogue& epilogue, const Tensor& y);
void batch_norm_backward(const Tensor& x, const Tensor& grad_y, const Tensor& weight, const Tensor& bias,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training,
                         const Tensor& y_relu, double relu_cap, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_residual);
}  // namespace cuda
}  // namespace liftoff
