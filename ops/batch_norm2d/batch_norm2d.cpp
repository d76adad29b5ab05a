#include "ops/batch_norm2d/batch_norm2d.h"

#include "ops/batch_norm2d/kernels.h"
#include "runtime/autograd.h"
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

Tensor batch_norm2d(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                    const Tensor& running_mean, const Tensor& running_var, bool training, double momentum,
                    double eps) {
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

  const Tensor x = x_in.contiguous();
  const Tensor weight = weight_in.contiguous();
  const Tensor bias = bias_in.contiguous();
  const int64_t channels = x.size(1);
  const DType stat_dtype = xt == DType::f64 ? DType::f64 : DType::f32;
  Tensor y = Tensor::empty(x.shape(), xt, x.device());
  Tensor save_mean = Tensor::empty({channels}, stat_dtype, x.device());
  Tensor save_invstd = Tensor::empty({channels}, stat_dtype, x.device());
  LIFTOFF_DISPATCH(x.device(), batch_norm_forward, x, weight, bias, running_mean, running_var, training,
                   momentum, eps, y, save_mean, save_invstd);
  if (should_record({x, weight, bias})) {
    record(y, "batch_norm2d", {x, weight, bias},
           [x_saved = x.detach(), w_saved = weight.detach(), save_mean, save_invstd, training](
               const Tensor& gy, const NeedsGrad& needs) {
             const Tensor grad_y = gy.to(x_saved.dtype()).contiguous();
             Tensor gx, gw, gb;
             if (needs[0]) gx = Tensor::empty(x_saved.shape(), x_saved.dtype(), x_saved.device());
             if (needs[1]) gw = Tensor::empty(w_saved.shape(), w_saved.dtype(), w_saved.device());
             if (needs[2]) gb = Tensor::empty(w_saved.shape(), w_saved.dtype(), w_saved.device());
             LIFTOFF_DISPATCH(x_saved.device(), batch_norm_backward, x_saved, grad_y, w_saved, save_mean,
                              save_invstd, training, gx, gw, gb);
             return std::vector<Tensor>{gx, gw, gb};
           });
  }
  return y;
}

}  // namespace liftoff
