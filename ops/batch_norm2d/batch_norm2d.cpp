#include "ops/batch_norm2d/batch_norm2d.h"

#include "ops/batch_norm2d/fusion.h"
#include "ops/batch_norm2d/kernels.h"
#include "ops/common/layout.h"
#include "runtime/autograd.h"
#include "runtime/branches.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
std::string describe(const Tensor& t) {
  return str_cat(shape_str(t.shape()), " ", dtype_name(t.dtype()), " on ", t.device().str());
}

bool is_half(DType d) {
  return d == DType::f16 || d == DType::bf16;
}

void check_param(const Tensor& x, const char* name, const Tensor& p, const Tensor& weight) {
  const int64_t channels = x.size(1);
  LIFTOFF_CHECK(p.dim() == 1 && p.size(0) == channels, ShapeError, "batch_norm2d: ", name, " ", describe(p),
                " does not match input ", describe(x), " (expected [", channels, "])");
  LIFTOFF_CHECK(p.device() == x.device(), DeviceError, "batch_norm2d: ", name, " ", describe(p),
                " is not on the input's device (input ", describe(x), ")");
  LIFTOFF_CHECK(p.dtype() == weight.dtype(), DTypeError, "batch_norm2d: ", name, " ", describe(p),
                " and weight ", describe(weight), " have different dtypes");
}
}  // namespace

namespace {
// batch_norm2d with an optional fused epilogue (residual add, ReLU); the checks and the autograd node of
// both.
Tensor batch_norm_impl(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                       const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
                       double eps, const Tensor& residual_in, bool relu, const Tensor& batches_tracked) {
  LIFTOFF_CHECK(x_in.defined() && weight_in.defined() && bias_in.defined(), ValueError,
                "batch_norm2d: input, weight and bias must be defined tensors");
  LIFTOFF_CHECK(x_in.dim() == 4, ShapeError, "batch_norm2d: expected input [N, C, H, W], got ",
                describe(x_in), " (weight ", describe(weight_in), ")");
  const DType xt = x_in.dtype();
  const DType wt = weight_in.dtype();
  LIFTOFF_CHECK(is_floating(xt), DTypeError, "batch_norm2d: input ", describe(x_in),
                " is not a floating type");
  LIFTOFF_CHECK(wt == xt || (is_half(xt) && wt == DType::f32), DTypeError, "batch_norm2d: weight ",
                describe(weight_in), " must have the input's dtype, or f32 for f16/bf16 input (input ",
                describe(x_in), ")");
  check_param(x_in, "weight", weight_in, weight_in);
  check_param(x_in, "bias", bias_in, weight_in);
  LIFTOFF_CHECK(running_mean.defined() == running_var.defined(), ValueError,
                "batch_norm2d: running_mean and running_var must be both defined or both undefined");
  const bool has_running = running_mean.defined();
  if (has_running) {
    check_param(x_in, "running_mean", running_mean, weight_in);
    check_param(x_in, "running_var", running_var, weight_in);
    LIFTOFF_CHECK(running_mean.is_contiguous() && running_var.is_contiguous(), ValueError,
                  "batch_norm2d: running_mean ", describe(running_mean), " and running_var ",
                  describe(running_var), " must be contiguous (they are updated in place)");
  }
  LIFTOFF_CHECK(training || has_running, ValueError,
                "batch_norm2d: eval mode needs running_mean and running_var (input ", describe(x_in), ")");
  const int64_t per_channel = x_in.size(0) * x_in.size(2) * x_in.size(3);
  LIFTOFF_CHECK(!training || per_channel > 1, ValueError,
                "batch_norm2d: training needs more than one value per channel, got input ", describe(x_in));
  LIFTOFF_CHECK(eps > 0.0, ValueError, "batch_norm2d: eps ", eps, " must be positive");
  LIFTOFF_CHECK(momentum >= 0.0 && momentum <= 1.0, ValueError, "batch_norm2d: momentum ", momentum,
                " is outside [0, 1]");

  if (batches_tracked.defined()) {
    LIFTOFF_CHECK(batches_tracked.dim() == 0 && batches_tracked.dtype() == DType::i64 &&
                      batches_tracked.device() == x_in.device(),
                  ValueError, "batch_norm2d: num_batches_tracked ", describe(batches_tracked),
                  " must be an i64 scalar on the input's device (input ", describe(x_in), ")");
  }
  if (residual_in.defined()) {
    LIFTOFF_CHECK(residual_in.shape() == x_in.shape() && residual_in.dtype() == xt &&
                      residual_in.device() == x_in.device(),
                  ShapeError, "batch_norm2d_relu: residual ", describe(residual_in), " must match the input ",
                  describe(x_in));
  }

  // A channels-last CUDA input is normalized in place of its layout (NHWC kernels, any channel count); y, the
  // residual and every gradient share x's layout.
  const MemoryFormat format = op_memory_format(x_in);
  const Tensor x = x_in.contiguous(format);
  const Tensor weight = weight_in.contiguous();
  const Tensor bias = bias_in.contiguous();
  BnEpilogue epilogue;
  if (residual_in.defined()) epilogue.residual = residual_in.contiguous(format);
  epilogue.relu = relu;
  if (training && batches_tracked.defined()) {
    if (x.device().is_cuda()) {
      epilogue.batches_tracked = batches_tracked;
    } else {
      *static_cast<int64_t*>(batches_tracked.raw_data()) += 1;
    }
  }
  const int64_t channels = x.size(1);
  const DType stat_dtype = xt == DType::f64 ? DType::f64 : DType::f32;
  Tensor y = Tensor::empty(x.shape(), xt, x.device(), format);
  Tensor save_mean = Tensor::empty({channels}, stat_dtype, x.device());
  Tensor save_invstd = Tensor::empty({channels}, stat_dtype, x.device());
  // Training updates the running statistics in place: concurrent branches (a step's micro-batches on their
  // own streams) take turns, in branch order.
  const bool updates_running = training && has_running;
  // On CUDA a plain batch norm defers its normalize pass, so that a following relu / residual add folds into
  // it (fusion.h); the zoo's explicit batch_norm2d_relu calls run it at once. Where the whole training
  // forward is one launch, its statistics wait for that launch too.
  const bool plain = x.device().is_cuda() && !relu && !residual_in.defined();
  if (plain && detail::batch_norm_defers_forward(x, training)) {
    detail::defer_batch_norm_forward(y, x, weight, bias, running_mean, running_var, momentum, eps,
                                     epilogue.batches_tracked, save_mean, save_invstd);
    detail::record_batch_norm_node(y, x, weight, bias, Tensor(), save_mean, save_invstd, training, false,
                                   kNoReluCap);
    return y;
  }
  epilogue.skip_normalize = plain;
  if (updates_running) order_shared_state(running_mean.raw_data());
  LIFTOFF_DISPATCH(x.device(), batch_norm_forward, x, weight, bias, running_mean, running_var, training,
                   momentum, eps, epilogue, y, save_mean, save_invstd);
  if (updates_running) record_shared_state(running_mean.raw_data());
  if (epilogue.skip_normalize)
    detail::defer_batch_norm_output(y, x, weight, bias, save_mean, save_invstd, training);
  detail::record_batch_norm_node(y, x, weight, bias, epilogue.residual, save_mean, save_invstd, training,
                                 relu, kNoReluCap);
  return y;
}
}  // namespace

Tensor batch_norm2d(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                    const Tensor& running_var, bool training, double momentum, double eps,
                    const Tensor& num_batches_tracked) {
  return batch_norm_impl(x, weight, bias, running_mean, running_var, training, momentum, eps, Tensor(), false,
                         num_batches_tracked);
}

Tensor batch_norm2d_relu(const Tensor& x, const Tensor& weight, const Tensor& bias,
                         const Tensor& running_mean, const Tensor& running_var, bool training,
                         double momentum, double eps, const Tensor& residual,
                         const Tensor& num_batches_tracked) {
  return batch_norm_impl(x, weight, bias, running_mean, running_var, training, momentum, eps, residual, true,
                         num_batches_tracked);
}

}  // namespace liftoff
