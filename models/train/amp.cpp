#include "models/train/amp.h"

#include <cmath>

#include "ops/amp/amp.h"
#include "ops/cast/cast.h"
#include "runtime/autograd.h"
#include "runtime/error.h"

namespace liftoff {

AmpMode parse_amp(const std::string& text) {
  if (text == "off") return AmpMode::off;
  if (text == "bf16") return AmpMode::bf16;
  if (text == "fp16") return AmpMode::fp16;
  throw ValueError(str_cat("--amp: unknown mode '", text, "' (choices: off, bf16, fp16)"));
}

const char* amp_mode_name(AmpMode mode) {
  switch (mode) {
    case AmpMode::off:
      return "off";
    case AmpMode::bf16:
      return "bf16";
    case AmpMode::fp16:
      return "fp16";
  }
  return "?";
}

DType amp_compute_dtype(AmpMode mode) {
  switch (mode) {
    case AmpMode::bf16:
      return DType::bf16;
    case AmpMode::fp16:
      return DType::f16;
    case AmpMode::off:
      break;
  }
  return DType::f32;
}

GradScaler::GradScaler(Device device, const GradScalerOptions& options) : options_(options), device_(device) {
  LIFTOFF_CHECK(std::isfinite(options.init_scale) && options.init_scale > 0.0, ValueError,
                "GradScaler: init_scale must be finite and > 0, got ", options.init_scale);
  LIFTOFF_CHECK(std::isfinite(options.growth_factor) && options.growth_factor > 1.0, ValueError,
                "GradScaler: growth_factor must be > 1, got ", options.growth_factor);
  LIFTOFF_CHECK(options.backoff_factor > 0.0 && options.backoff_factor < 1.0, ValueError,
                "GradScaler: backoff_factor must be in (0, 1), got ", options.backoff_factor);
  LIFTOFF_CHECK(options.growth_interval >= 1, ValueError, "GradScaler: growth_interval must be >= 1, got ",
                options.growth_interval);
  scale_ = Tensor::full({1}, options.init_scale, DType::f32, device);
  inv_scale_ = Tensor::zeros({1}, DType::f32, device);
  growth_tracker_ = Tensor::zeros({1}, DType::i32, device);  // i32 as PyTorch's _growth_tracker
  found_inf_ = Tensor::zeros({1}, DType::f32, device);
  skipped_steps_ = Tensor::zeros({1}, DType::i64, device);
}

GradScaler GradScaler::fixed(double scale, Device device) {
  GradScalerOptions options;
  options.init_scale = scale;
  GradScaler scaler(device, options);
  scaler.dynamic_ = false;
  return scaler;
}

GradScaler GradScaler::for_mode(AmpMode mode, Device device, double static_loss_scale) {
  LIFTOFF_CHECK(static_loss_scale >= 0.0, ValueError, "--loss-scale must be > 0 (or 0 for dynamic), got ",
                static_loss_scale);
  if (mode == AmpMode::fp16) {
    return static_loss_scale > 0.0 ? fixed(static_loss_scale, device) : GradScaler(device);
  }
  GradScalerOptions options;
  options.enabled = false;
  return GradScaler(device, options);
}

Tensor GradScaler::scale(const Tensor& loss) const {
  LIFTOFF_CHECK(loss.defined(), ValueError, "GradScaler::scale: loss is an undefined tensor");
  if (!enabled()) return loss;
  LIFTOFF_CHECK(loss.device() == device_, DeviceError, "GradScaler::scale: the loss is on ",
                loss.device().str(), " but the scaler's state is on ", device_.str(),
                " (build the scaler for the model's device)");
  const bool half = loss.dtype() == DType::f16 || loss.dtype() == DType::bf16;
  return scale_by(half ? cast(loss, DType::f32) : loss, scale_);
}

void GradScaler::unscale_(const std::vector<Tensor>& grads) {
  if (!enabled()) return;
  LIFTOFF_CHECK(stage_ == Stage::ready, ValueError, "GradScaler::unscale_: ",
                stage_ == Stage::unscaled ? "already called since the last update()" : "called after step()",
                "; call update() once per step");
  NoGradGuard no_grad;
  found_inf_.zero_();
  inverse_scale(scale_, inv_scale_);
  unscale_and_check(grads, inv_scale_, found_inf_);
  stage_ = Stage::unscaled;
}

void GradScaler::unscale_(const Optimizer& optimizer) {
  std::vector<Tensor> grads;
  for (const Tensor& p : optimizer.params()) grads.push_back(p.grad());
  unscale_(grads);
}

void GradScaler::step(Optimizer& optimizer) {
  if (!enabled()) {
    optimizer.step();
    return;
  }
  LIFTOFF_CHECK(stage_ != Stage::stepped, ValueError,
                "GradScaler::step: already called since the last update(); call update() once per step");
  if (stage_ == Stage::ready) unscale_(optimizer);
  optimizer.step(found_inf_);
  stage_ = Stage::stepped;
}

void GradScaler::update() {
  if (!enabled()) return;
  LIFTOFF_CHECK(
      stage_ != Stage::ready, ValueError,
      "GradScaler::update: no inf/NaN check since the last update(); call step() (or unscale_()) first");
  // A static scale keeps its value (factors of 1) but still counts skipped steps.
  update_scale(scale_, growth_tracker_, found_inf_, dynamic_ ? options_.growth_factor : 1.0,
               dynamic_ ? options_.backoff_factor : 1.0, options_.growth_interval, skipped_steps_);
  stage_ = Stage::ready;
}

double GradScaler::current_scale() const {
  return enabled() ? scale_.item() : 1.0;
}

NamedTensors GradScaler::named_state() const {
  return {{"scale", scale_}, {"growth_tracker", growth_tracker_}, {"skipped_steps", skipped_steps_}};
}

}  // namespace liftoff
