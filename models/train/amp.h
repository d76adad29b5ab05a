// Mixed precision: the --amp mode and the GradScaler (torch.amp.GradScaler's semantics and defaults), built
// on the device-side ops of ops/amp. Inside a training step nothing here reads a device value on the host:
// the scale, the inf/NaN flag, the growth tracker and the skipped-step counter all live on the scaler's
// device, and SGD/AdamW skip their update on the device when the flag is set.
//
// One step (K micro-batches, one optimizer):
//   for each micro-batch: scaler.scale(loss * (1/K)).backward();
//   scaler.step(optimizer);   // unscale_ (if not done yet: e.g. after unscale_ for gradient clipping), skip
//   on inf scaler.update();          // backoff on inf, growth after growth_interval clean steps
//   optimizer.zero_grad();
//
// bf16 needs no scaler: bf16 has f32's exponent range, so gradients do not underflow. for_mode(bf16) (and
// off) gives a disabled scaler: scale() returns the loss unchanged, step() is optimizer.step(), update() does
// nothing, no step is ever skipped, current_scale() is 1.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/nn/module.h"
#include "models/train/optim.h"
#include "runtime/capture.h"
#include "runtime/dtype.h"
#include "runtime/tensor.h"

namespace liftoff {

enum class AmpMode { off, bf16, fp16 };

// "off", "bf16" or "fp16"; anything else throws ValueError listing the choices.
AmpMode parse_amp(const std::string& text);
const char* amp_mode_name(AmpMode mode);
// The dtype autocast runs conv/linear in: f32 (off), bf16, f16.
DType amp_compute_dtype(AmpMode mode);

struct GradScalerOptions {
  double init_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // in (0, 1)
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler : public CaptureParticipant {
 public:
  // Dynamic loss scaling with its state on `device` (the device of the model's parameters and gradients).
  explicit GradScaler(Device device = Device::cpu(), const GradScalerOptions& options = {});
  // A static loss scale (--loss-scale N): never grows or backs off, but a step with inf/NaN gradients is
  // still skipped (and counted).
  static GradScaler fixed(double scale, Device device = Device::cpu());
  // What --amp asks for: fp16 scales (dynamically, or statically when static_loss_scale > 0), bf16 and off
  // give a disabled scaler.
  static GradScaler for_mode(AmpMode mode, Device device, double static_loss_scale = 0.0);

  GradScaler(GradScaler&&) = default;
  GradScaler& operator=(GradScaler&&) = default;
  GradScaler(const GradScaler&) = delete;
  GradScaler& operator=(const GradScaler&) = delete;

  bool enabled() const { return options_.enabled; }
  bool is_dynamic() const { return dynamic_; }
  const GradScalerOptions& options() const { return options_; }

  // loss * scale (differentiable; f16/bf16 losses are cast to f32 first, as PyTorch promotes). Disabled:
  // loss.
  Tensor scale(const Tensor& loss) const;
  // Divides the gradients by the scale in place and records whether any is inf/NaN (found_inf). Call it at
  // most once between update()s, after the last backward of the step (e.g. before clipping gradients).
  void unscale_(const std::vector<Tensor>& grads);
  void unscale_(const Optimizer& optimizer);  // the gradients of optimizer.params()
  // unscale_(optimizer) unless done already, then optimizer.step(found_inf): skipped on the device when
  // found_inf is set. One optimizer per scaler; at most once between update()s.
  void step(Optimizer& optimizer);
  // Backoff on inf/NaN (and count the skipped step), growth after growth_interval clean steps. Needs an
  // unscale_ or step since the last update().
  void update();

  // A participant of captured steps (runtime/capture.h): a failed capture's step never ran on the device, so
  // it is forgotten (the next call starts a new step); the device state is untouched.
  void abort_capture() noexcept override { stage_ = Stage::ready; }

  // Device-side state (one-element tensors on the scaler's device). Reading them synchronises; do it only
  // for logging, outside the step.
  const Tensor& found_inf() const { return found_inf_; }          // f32: 1 when this step's grads had inf/NaN
  const Tensor& skipped_steps() const { return skipped_steps_; }  // i64: steps skipped since construction
  const Tensor& growth_tracker() const { return growth_tracker_; }  // i32: clean steps since the last change
  double current_scale() const;                                     // host read (syncs); 1 when disabled
  // For checkpoints: {"scale", "growth_tracker", "skipped_steps"}; a loader copy_()s into them.
  NamedTensors named_state() const;

 private:
  enum class Stage { ready, unscaled, stepped };

  GradScalerOptions options_;
  bool dynamic_ = true;
  Device device_;
  Tensor scale_, inv_scale_, growth_tracker_, found_inf_, skipped_steps_;
  Stage stage_ = Stage::ready;
};

}  // namespace liftoff
