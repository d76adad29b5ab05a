// Kernels behind the losses of loss.h. The fronts check shapes, dtypes and devices, promote/cast, and pass
// contiguous tensors of one floating dtype; index tensors are i64 or i32.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {

// The elementwise losses (formulas in ops/loss/loss_math.h).
enum class PointwiseLoss : uint8_t { mse, l1, smooth_l1, huber, bce_logits, kl_div, kl_div_log_target };

// What the kernels compute. x, t: same shape; w, pw: undefined (= 1) or the input's shape (bce_logits only).
// reduce: out is [] and holds sum / divisor; otherwise out has x's shape. param: beta or delta.
struct PointwiseLossArgs {
  PointwiseLoss kind;
  double param = 0.0;
  bool reduce = false;
  double divisor = 1.0;
};

// nll_loss over x viewed as [n, classes, inner] and target as [n, inner].
struct NllLossArgs {
  int64_t n, classes, inner;
  int64_t ignore_index;
  bool reduce = false;  // out is [] (else target's shape)
  bool mean = false;    // with reduce: divide by the total weight of the non-ignored targets
};

namespace cpu {
void pointwise_loss_forward(const PointwiseLossArgs& a, const Tensor& x, const Tensor& t, const Tensor& w,
                            const Tensor& pw, const Tensor& out);
// gy: out's shape. gx / gt may be undefined (not needed).
void pointwise_loss_backward(const PointwiseLossArgs& a, const Tensor& x, const Tensor& t, const Tensor& w,
                             const Tensor& pw, const Tensor& gy, const Tensor& gx, const Tensor& gt);
// w undefined or [classes]; total_weight: [] in the accumulation dtype (f64 for f64, else f32), saved for the
// backward of "mean". Targets are validated by the front.
void nll_loss_forward(const NllLossArgs& a, const Tensor& x, const Tensor& target, const Tensor& w,
                      const Tensor& out, const Tensor& total_weight);
void nll_loss_backward(const NllLossArgs& a, const Tensor& target, const Tensor& w,
                       const Tensor& total_weight, const Tensor& gy, const Tensor& gx);
}  // namespace cpu
namespace cuda {
void pointwise_loss_forward(const PointwiseLossArgs& a, const Tensor& x, const Tensor& t, const Tensor& w,
                            const Tensor& pw, const Tensor& out);
void pointwise_loss_backward(const PointwiseLossArgs& a, const Tensor& x, const Tensor& t, const Tensor& w,
                             const Tensor& pw, const Tensor& gy, const Tensor& gx, const Tensor& gt);
// A target outside [0, classes) that is not ignore_index makes its loss NaN (no host sync to throw).
void nll_loss_forward(const NllLossArgs& a, const Tensor& x, const Tensor& target, const Tensor& w,
                      const Tensor& out, const Tensor& total_weight);
void nll_loss_backward(const NllLossArgs& a, const Tensor& target, const Tensor& w,
                       const Tensor& total_weight, const Tensor& gy, const Tensor& gx);
}  // namespace cuda
}  // namespace liftoff
