#include "models/trainer.h"

#include <algorithm>

#include "ops/cross_entropy/cross_entropy.h"
#include "ops/scale/scale.h"
#include "runtime/autograd.h"

namespace liftoff {

namespace {
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
}  // namespace

Trainer::Trainer(Module& model, Optimizer& optimizer, const LRSchedule* schedule, TrainerOptions options)
    : model_(model), optimizer_(optimizer), schedule_(schedule), options_(options) {
  LIFTOFF_CHECK(options_.accum >= 1, ValueError, "Trainer: accum must be >= 1, got ", options_.accum);
}

void Trainer::optimizer_step() {
  if (schedule_) optimizer_.set_lr(schedule_->lr_at(global_step_));
  optimizer_.step();
  optimizer_.zero_grad();
  ++global_step_;
}

EpochResult Trainer::train_epoch(BatchSource& source, int64_t epoch,
                                 const std::function<void(const StepProgress&)>& on_step) {
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
  Batch batch;
  while (!finished() && source.next(batch)) {
    device = batch.input.device();
    const Tensor logits = model_.forward(batch.input);
    const Tensor loss = cross_entropy(logits, batch.labels, options_.label_smoothing);
    (options_.accum > 1 ? scale(loss, micro_scale) : loss).backward();
    if (!loss_sum_.defined()) {
      loss_sum_ = loss.detach().clone();
    } else {
      accumulate_into(loss_sum_, loss.detach());
    }
    ++loss_count_;
    ++pending;
    ++result.micro_batches;
    result.images += batch.input.size(0);
    if (pending == options_.accum) {
      optimizer_step();
      pending = 0;
      ++result.steps;
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
    }
  }
  // A short tail (fewer than accum micro-batches) still updates, with its gradients scaled by 1/accum.
  if (pending > 0) {
    optimizer_step();
    ++result.steps;
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
  model_.eval();
  source.start_epoch(0);
  double loss_total = 0.0;
  int64_t correct = 0;
  Batch batch;
  while (source.next(batch)) {
    const Tensor logits = model_.forward(batch.input);
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
  if (result.images > 0) {
    result.mean_loss = loss_total / static_cast<double>(result.images);
    result.accuracy = static_cast<double>(correct) / static_cast<double>(result.images);
  }
  result.seconds = seconds_since(start);
  return result;
}

}  // namespace liftoff
