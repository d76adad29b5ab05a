#include "models/trainer.h"

#include <algorithm>

#include "models/autocast.h"
#include "ops/cast/cast.h"
#include "ops/cross_entropy/cross_entropy.h"
#include "ops/scale/scale.h"
#include "runtime/autograd.h"

namespace liftoff {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

Device parameter_device(const Module& model) {
  const std::vector<Tensor> params = model.parameters();
  return params.empty() ? Device::cpu() : params.front().device();
}

DType autocast_dtype_for(AmpMode mode) {
  return mode == AmpMode::off ? DType::f32 : amp_compute_dtype(mode);
}

GradScaler make_scaler(const TrainerOptions& o, Device device) {
  // A fixed scale of 1 is the GradScaler's inf/NaN check and step skip without any scaling.
  if (o.skip_nonfinite_steps && o.amp != AmpMode::fp16) return GradScaler::fixed(1.0, device);
  return GradScaler::for_mode(o.amp, device, o.loss_scale);
}
}  // namespace

Trainer::Trainer(Module& model, Optimizer& optimizer, const LRSchedule* schedule, TrainerOptions options)
    : model_(model),
      optimizer_(optimizer),
      schedule_(schedule),
      options_(options),
      scaler_(make_scaler(options, parameter_device(model))) {
  LIFTOFF_CHECK(options_.accum >= 1, ValueError, "Trainer: accum must be >= 1, got ", options_.accum);
  LIFTOFF_CHECK(options_.amp == AmpMode::off || parameter_device(model).is_cuda(), ValueError, "--amp ",
                amp_mode_name(options_.amp),
                " needs --device cuda: the CPU backend computes in f32/f64 only; use --amp off on the CPU");
}

void Trainer::optimizer_step() {
  if (options_.ddp) {
    options_.ddp->set_require_sync(true);
    options_.ddp->synchronize_gradients();  // the compute stream waits on the buckets, the host does not
  }
  if (schedule_) optimizer_.set_lr(schedule_->lr_at(global_step_));
  if (options_.ddp && scaler_.enabled()) {
    scaler_.unscale_(optimizer_);
    options_.ddp->sync_found_inf(scaler_);  // every rank skips the same steps
  }
  // Unscales, checks for inf/NaN and skips the update on the device (fp16); a plain step otherwise.
  scaler_.step(optimizer_);
  scaler_.update();
  optimizer_.zero_grad();
  advance_weight_version();  // autocast's half weights are stale now
  ++global_step_;
}

EpochResult Trainer::train_epoch(BatchSource& source, int64_t epoch,
                                 const std::function<void(const StepProgress&)>& on_step,
                                 int64_t skip_micro_batches) {
  EpochResult result;
  result.epoch = epoch;
  const auto start = Clock::now();
  model_.train();
  source.start_epoch(epoch);
  loss_sum_ = Tensor();
  loss_count_ = 0;
  const double micro_scale = 1.0 / static_cast<double>(options_.accum);
  int64_t pending = 0;  // micro-batches accumulated since the last optimizer step
  Device device = Device::cpu();
  const AutocastGuard autocast(autocast_dtype_for(options_.amp));
  Batch batch;
  for (int64_t i = 0; i < skip_micro_batches && source.next(batch); ++i) ++result.micro_batches;
  Profiler* prof = options_.profiler;
  int64_t step_images = 0;
  auto timed_optimizer_step = [&] {
    Profiler::StageScope host(prof, Stage::optimizer);
    Profiler::DeviceScope dev(prof, Stage::optimizer);
    optimizer_step();
  };
  while (!finished()) {
    if (prof) prof->begin_step();
    bool got = false;
    {
      Profiler::StageScope wait(prof, Stage::data_wait);
      got = source.next(batch);
    }
    if (!got) break;
    device = batch.input.device();
    Tensor loss;
    {
      Profiler::StageScope host(prof, Stage::forward);
      Profiler::DeviceScope dev(prof, Stage::forward);
      // The loss (log-softmax) is computed in f32 whatever the autocast dtype of the logits.
      const Tensor logits = cast(model_.forward(batch.input), DType::f32);
      loss = cross_entropy(logits, batch.labels, options_.label_smoothing);
    }
    {
      Profiler::StageScope host(prof, Stage::backward);
      Profiler::DeviceScope dev(prof, Stage::backward);
      // DDP communicates only on the micro-batch that completes an optimizer step.
      if (options_.ddp) options_.ddp->set_require_sync(pending + 1 == options_.accum);
      scaler_.scale(options_.accum > 1 ? scale(loss, micro_scale) : loss).backward();
    }
    if (!loss_sum_.defined()) {
      loss_sum_ = loss.detach().clone();
    } else {
      accumulate_into(loss_sum_, loss.detach());
    }
    ++loss_count_;
    ++pending;
    ++result.micro_batches;
    result.images += batch.input.size(0);
    step_images += batch.input.size(0);
    if (pending == options_.accum) {
      timed_optimizer_step();
      pending = 0;
      ++result.steps;
      if (loss_sum_.dtype() == DType::f32)
        recent_loss_.post(loss_sum_, 1.0 / static_cast<double>(loss_count_));
      if (on_step) {
        StepProgress p;
        p.epoch = epoch;
        p.micro_batch_in_epoch = result.micro_batches;
        p.micro_batches_per_epoch = source.batches_per_epoch();
        p.global_step = global_step_;
        p.images = result.images;
        p.seconds = seconds_since(start);
        p.lr = optimizer_.lr();
        on_step(p);
      }
      if (prof) prof->end_step(step_images);  // after on_step: its prints count as "other"
      step_images = 0;
    }
  }
  // A short tail (fewer than accum micro-batches) still updates, with its gradients scaled by 1/accum.
  if (pending > 0) {
    timed_optimizer_step();
    ++result.steps;
    if (prof) prof->end_step(step_images);
  } else if (prof) {
    prof->abandon_step();  // the step opened before the final, empty next()
  }
  synchronize(device);
  result.seconds = seconds_since(start);
  result.mean_loss = running_loss();
  result.stopped_early = finished();
  return result;
}

double Trainer::running_loss() const {
  if (!loss_sum_.defined() || loss_count_ == 0) return 0.0;
  return loss_sum_.item() / static_cast<double>(loss_count_);
}

EvalResult Trainer::evaluate(BatchSource& source) {
  EvalResult result;
  const auto start = Clock::now();
  NoGradGuard no_grad;
  const AutocastGuard autocast(autocast_dtype_for(options_.amp));
  if (options_.ddp) options_.ddp->broadcast_buffers();  // every rank evaluates rank 0's running statistics
  model_.eval();
  source.start_epoch(0);
  double loss_total = 0.0;
  int64_t correct = 0;
  Batch batch;
  while (source.next(batch)) {
    const Tensor logits = cast(model_.forward(batch.input), DType::f32);
    const int64_t n = logits.size(0);
    const int64_t classes = logits.size(1);
    loss_total += cross_entropy(logits, batch.labels, 0.0).item() * static_cast<double>(n);
    const std::vector<float> host_logits = logits.to_vector<float>();
    const std::vector<int64_t> labels = batch.labels.to_vector<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      const float* row = host_logits.data() + i * classes;
      const int64_t predicted = std::max_element(row, row + classes) - row;
      correct += predicted == labels[static_cast<size_t>(i)] ? 1 : 0;
    }
    result.images += n;
  }
  model_.train();
  if (options_.group) {
    const EvalTotals totals = all_reduce_eval(*options_.group, {correct, result.images, loss_total});
    correct = totals.correct;
    result.images = totals.count;
    loss_total = totals.loss_sum;
  }
  if (result.images > 0) {
    result.mean_loss = loss_total / static_cast<double>(result.images);
    result.accuracy = static_cast<double>(correct) / static_cast<double>(result.images);
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace liftoff
