#include "ops/amp/amp.h"

#include <cmath>

#include "ops/amp/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
std::string describe(const Tensor& t) {
  return str_cat(shape_str(t.shape()), " ", dtype_name(t.dtype()), " on ", t.device().str());
}

// A one-element tensor of `dtype` on `device` (a device-side scalar: scale, flag, counter).
void check_scalar(const char* op, const char* name, const Tensor& t, DType dtype, Device device) {
  LIFTOFF_CHECK(t.defined(), ValueError, op, ": ", name, " is an undefined tensor");
  LIFTOFF_CHECK(t.numel() == 1 && t.dtype() == dtype, DTypeError, op, ": ", name, " ", describe(t),
                " must be a one-element ", dtype_name(dtype), " tensor");
  LIFTOFF_CHECK(t.device() == device, DeviceError, op, ": ", name, " ", describe(t), " must be on ",
                device.str());
}
}  // namespace

Tensor scale_by(const Tensor& input, const Tensor& factor) {
  LIFTOFF_CHECK(input.defined(), ValueError, "scale_by: input is an undefined tensor");
  LIFTOFF_CHECK(is_floating(input.dtype()), DTypeError, "scale_by: input ", describe(input),
                " must have a floating dtype");
  check_scalar("scale_by", "factor", factor, DType::f32, input.device());
  const Tensor x = input.contiguous();
  const Tensor f = factor.detach();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), scale_by_forward, x, f, y);
  if (should_record({x})) {
    record(y, "scale_by", {x}, [f](const Tensor& gy, const NeedsGrad&) {
      const Tensor grad_y = gy.contiguous();
      Tensor gx = Tensor::empty(grad_y.shape(), grad_y.dtype(), grad_y.device());
      LIFTOFF_DISPATCH(grad_y.device(), scale_by_forward, grad_y, f, gx);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

void unscale_and_check(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf) {
  LIFTOFF_CHECK(inv_scale.defined(), ValueError, "unscale_and_check: inv_scale is an undefined tensor");
  const Device device = inv_scale.device();
  check_scalar("unscale_and_check", "inv_scale", inv_scale, DType::f32, device);
  check_scalar("unscale_and_check", "found_inf", found_inf, DType::f32, device);
  // One fused pass per gradient dtype (normally all f32).
  const DType dtypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16};
  std::vector<Tensor> groups[4];
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined()) continue;
    LIFTOFF_CHECK(g.device() == device, DeviceError, "unscale_and_check: gradient ", i, " ", describe(g),
                  " is not on the device of inv_scale (", device.str(), ")");
    LIFTOFF_CHECK(g.is_contiguous(), ValueError, "unscale_and_check: gradient ", i, " ", describe(g),
                  " must be contiguous (it is unscaled in place)");
    bool placed = false;
    for (int d = 0; d < 4; ++d) {
      if (g.dtype() == dtypes[d]) {
        if (g.numel() > 0) groups[d].push_back(g);
        placed = true;
      }
    }
    LIFTOFF_CHECK(placed, DTypeError, "unscale_and_check: gradient ", i, " ", describe(g),
                  " must be f32, f64, f16 or bf16");
  }
  for (const auto& group : groups) {
    if (!group.empty()) LIFTOFF_DISPATCH(device, unscale_and_check, group, inv_scale, found_inf);
  }
}

void inverse_scale(const Tensor& scale, const Tensor& inv_scale) {
  LIFTOFF_CHECK(scale.defined(), ValueError, "inverse_scale: scale is an undefined tensor");
  check_scalar("inverse_scale", "scale", scale, DType::f32, scale.device());
  check_scalar("inverse_scale", "inv_scale", inv_scale, DType::f32, scale.device());
  LIFTOFF_DISPATCH(scale.device(), inverse_scale, scale, inv_scale);
}

void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  double growth_factor, double backoff_factor, int64_t growth_interval,
                  const Tensor& skipped_steps) {
  LIFTOFF_CHECK(scale.defined(), ValueError, "update_scale: scale is an undefined tensor");
  const Device device = scale.device();
  check_scalar("update_scale", "scale", scale, DType::f32, device);
  LIFTOFF_CHECK(growth_tracker.defined(), ValueError, "update_scale: growth_tracker is an undefined tensor");
  check_scalar("update_scale", "growth_tracker", growth_tracker,
               growth_tracker.dtype() == DType::i64 ? DType::i64 : DType::i32, device);
  check_scalar("update_scale", "found_inf", found_inf, DType::f32, device);
  if (skipped_steps.defined())
    check_scalar("update_scale", "skipped_steps", skipped_steps, DType::i64, device);
  LIFTOFF_CHECK(std::isfinite(growth_factor) && growth_factor > 0.0, ValueError,
                "update_scale: growth_factor ", growth_factor, " must be finite and > 0");
  LIFTOFF_CHECK(std::isfinite(backoff_factor) && backoff_factor > 0.0, ValueError,
                "update_scale: backoff_factor ", backoff_factor, " must be finite and > 0");
  LIFTOFF_CHECK(growth_interval >= 1, ValueError, "update_scale: growth_interval ", growth_interval,
                " must be >= 1");
  const UpdateScaleArgs args{growth_factor, backoff_factor, growth_interval};
  LIFTOFF_DISPATCH(device, update_scale, scale, growth_tracker, found_inf, args, skipped_steps);
}

}  // namespace liftoff
