#include "models/train/step_executor.h"

#include <utility>

#include "models/train/ema.h"
#include "ops/optimizer_step/optimizer_step.h"
#include "ops/scale/scale.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/profile/flops.h"

namespace liftoff {

namespace {
Device parameter_device(const Module& model) {
  const std::vector<Tensor> params = model.parameters();
  return params.empty() ? Device::cpu() : params.front().device();
}

GradScaler make_scaler(const TrainerOptions& o, Device device) {
  // A fixed scale of 1 is the GradScaler's inf/NaN check and step skip without any scaling.
  if (o.skip_nonfinite_steps && o.amp != AmpMode::fp16) return GradScaler::fixed(1.0, device);
  return GradScaler::for_mode(o.amp, device, o.loss_scale);
}
}  // namespace

StepExecutor::StepExecutor(Module& model, Optimizer& optimizer, const LRSchedule* schedule,
                           const TrainerOptions& options)
    : model_(model),
      optimizer_(optimizer),
      schedule_(schedule),
      options_(options),
      loss_(options.loss ? options.loss : cross_entropy_loss(options.label_smoothing)),
      scaler_(make_scaler(options, parameter_device(model))) {
  if (options_.ddp) options_.ddp->set_profiler(options_.profiler);
}

StepExecutor::~StepExecutor() {
  if (options_.ddp) options_.ddp->set_profiler(nullptr);  // the profiler may go before the DDP wrapper
}

Device StepExecutor::device() const {
  return parameter_device(model_);
}

Tensor StepExecutor::run_micro_batch(const MicroBatch& batch, int64_t index_in_step, bool completes_step,
                                     bool leave_in_grad) {
  Profiler* prof = options_.profiler;
  const GraphWarmupScope warmup(preparing_capture_ && batch.input.is_cuda());
  Tensor loss;
  {
    Profiler::StageScope host(prof, Stage::forward);
    Profiler::DeviceScope dev(prof, Stage::forward);
    loss = loss_(forward(batch.input), batch);
    LIFTOFF_CHECK(loss.defined() && loss.numel() == 1, ShapeError,
                  "Trainer: the loss function must return a one-element tensor, got ",
                  loss.defined() ? shape_str(loss.shape()) : std::string("an undefined tensor"));
  }
  {
    Profiler::StageScope host(prof, Stage::backward);
    Profiler::DeviceScope dev(prof, Stage::backward);
    // DDP communicates only on the micro-batch that completes an optimizer step.
    if (options_.ddp) options_.ddp->set_require_sync(completes_step);
    const double micro_scale = 1.0 / static_cast<double>(options_.accum);
    // The step's last micro-batch adds into the sums too, unless gradient-ready hooks (DDP's all-reduce) must
    // see the complete gradient in .grad when autograd reaches each parameter.
    const bool into_sums = !leave_in_grad && index_in_step >= 1 && (!completes_step || !grad_hooks_present());
    if (into_sums) {
      move_gradients_to_sums();
    } else if (!leave_in_grad) {
      restore_gradient_sums();
    }
    scaler_.scale(options_.accum > 1 ? scale(loss, micro_scale) : loss).backward();
    if (into_sums) add_gradients_to_sums();
  }
  return loss.detach();
}

Tensor StepExecutor::forward(const Tensor& input) {
  if (flops_counted_) return model_.forward(input);
  // The first forward is counted as it runs (no extra forward, nothing to undo), the loss left out.
  const FlopCounter counter;
  Tensor output = model_.forward(input);
  const int64_t images = input.dim() >= 1 ? input.size(0) : 0;
  flops_per_image_ = images > 0 ? counter.flops() / static_cast<double>(images) : 0.0;
  flops_counted_ = true;
  return output;
}

void StepExecutor::synchronize_gradients() {
  restore_gradient_sums();  // a short tail ends without the micro-batch that would
  if (!options_.ddp) return;
  // Host time of the call (CPU/MPI: the wait itself); on CUDA the device-side wait falls between the
  // backward and optimizer marks, where the allreduce mark on the comm stream shows what is exposed.
  Profiler::StageScope host(options_.profiler, Stage::allreduce);
  options_.ddp->set_require_sync(true);
  options_.ddp->synchronize_gradients();  // the compute stream waits on the buckets, the host does not
}

void StepExecutor::finish_step(bool set_lr) {
  synchronize_gradients();
  Profiler::StageScope host(options_.profiler, Stage::optimizer);
  Profiler::DeviceScope dev(options_.profiler, Stage::optimizer);
  if (schedule_ && set_lr) optimizer_.set_lr(schedule_->lr_at(global_step_));
  if (options_.ddp && scaler_.enabled()) {
    scaler_.unscale_(optimizer_);
    options_.ddp->sync_found_inf(scaler_);  // every rank skips the same steps
  }
  // Unscales, checks for inf/NaN and skips the update on the device (fp16); a plain step otherwise.
  scaler_.step(optimizer_);
  scaler_.update();
  if (options_.ema) options_.ema->update();  // on the device, in the step: captured with it
  optimizer_.zero_grad();
  advance_weight_version();  // autocast's half weights are stale now
  ++global_step_;
}

void StepExecutor::set_lr_for_step() {
  if (schedule_) optimizer_.set_lr(schedule_->lr_at(global_step_));
}

bool StepExecutor::grad_hooks_present() const {
  if (options_.ddp) return true;
  for (const Tensor& p : model_.parameters()) {
    if (!p.impl().grad_ready_hooks.empty()) return true;
  }
  return false;
}

void StepExecutor::move_gradients_to_sums() {
  if (!grad_sums_.empty()) return;  // already there, .grad holds fresh gradients or none
  grad_sums_ = take_gradients();
}

std::vector<Tensor> StepExecutor::take_gradients() {
  std::vector<Tensor> grads;
  for (const Tensor& p : model_.parameters()) {
    grads.push_back(p.grad());
    p.set_grad(Tensor());
  }
  return grads;
}

void StepExecutor::add_gradients_to_sums() {
  add_gradients_to_sums(take_gradients());
}

void StepExecutor::add_gradients_to_sums(std::vector<Tensor> fresh) {
  LIFTOFF_CHECK(fresh.size() == grad_sums_.size(), ValueError, "Trainer: the model has ", fresh.size(),
                " parameters but ", grad_sums_.size(), " gradient sums (parameters changed mid-step?)");
  for (size_t i = 0; i < fresh.size(); ++i) {
    // A parameter first reached in this micro-batch starts its sum here.
    if (!grad_sums_[i].defined()) grad_sums_[i] = std::exchange(fresh[i], Tensor());
  }
  accumulate_gradients(grad_sums_, fresh);
}

void StepExecutor::restore_gradient_sums() {
  if (grad_sums_.empty()) return;
  const std::vector<Tensor> params = model_.parameters();
  for (size_t i = 0; i < params.size() && i < grad_sums_.size(); ++i) {
    LIFTOFF_CHECK(!params[i].grad().defined(), ValueError, "Trainer: parameter ", i,
                  " has a gradient outside the step's accumulation");
    params[i].set_grad(grad_sums_[i]);
  }
  grad_sums_.clear();
}

std::vector<CaptureParticipant*> StepExecutor::capture_participants() {
  std::vector<CaptureParticipant*> out{this, &optimizer_, &scaler_};
  if (options_.ddp) out.push_back(options_.ddp);
  if (options_.profiler) out.push_back(options_.profiler);
  return out;
}

void StepExecutor::begin_capture() {
  step_before_capture_ = global_step_;
  // The capture must record the casts of the half-precision weights: copies cached outside it (e.g. by an
  // evaluation since the last optimizer step) would be read, frozen, by every replay.
  advance_weight_version();
}

void StepExecutor::abort_capture() noexcept {
  global_step_ = step_before_capture_;
  grad_sums_.clear();
  advance_weight_version();
}

void StepExecutor::after_replay() {
  advance_weight_version();  // what the captured optimizer step does on the host
  ++global_step_;
}

}  // namespace liftoff
