// Trainer: the training loop shared by tools/train and embedding programs. It ties a model, an optimizer, an
// LR schedule and a BatchSource together, with gradient accumulation. Inside an optimizer step nothing reads
// device values on the host: the loss is summed on the device and read only when the caller asks.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/batch_iterator.h"
#include "models/nn/module.h"
#include "models/train/optim.h"
#include "models/train/schedule.h"
#include "models/train/step_executor.h"
#include "models/train/step_runner.h"
#include "models/train/trainer_options.h"
#include "runtime/async_scalar.h"

namespace liftoff {

struct StepProgress {
  int64_t epoch = 0;
  int64_t micro_batch_in_epoch = 0;  // micro-batches done in this epoch
  int64_t micro_batches_per_epoch = 0;
  int64_t global_step = 0;  // optimizer steps done so far
  int64_t images = 0;       // training images seen this epoch
  double seconds = 0.0;     // wall time of this epoch so far
  double lr = 0.0;
};

struct EpochResult {
  int64_t epoch = 0;
  int64_t steps = 0;  // optimizer steps taken in this epoch
  int64_t micro_batches = 0;
  int64_t images = 0;
  double seconds = 0.0;        // wall time including the final device synchronisation
  double mean_loss = 0.0;      // mean of the (unscaled) micro-batch losses
  bool stopped_early = false;  // max_steps reached
};

struct EvalResult {
  int64_t images = 0;
  double mean_loss = 0.0;
  double accuracy = 0.0;  // fraction in [0, 1]
  double seconds = 0.0;
};

struct EvalOptions {
  // Test-time flip averaging: the logits of each image and of its horizontal mirror are averaged before the
  // loss and the top-1 (inputs [N, C, H, W]; two forwards per view).
  bool hflip = false;
  // Test-time translation: also the batch shifted by one pixel down-right and up-left (edges replicated),
  // each view (with its mirror under hflip) weighted 1/4 and the unshifted view 1/2 (inputs [N, C, H, W]).
  bool shift = false;
  // With TrainerOptions::ema: evaluate the averaged weights (the model's own are back afterwards).
  bool use_ema = true;
};

// The f32 logits of `model` for `input` with EvalOptions' test-time views averaged (hflip, shift; the model
// as it is: no EMA swap, no grad or autocast set here). Trainer::evaluate and the evaluate tool use it.
Tensor test_time_logits(Module& model, const Tensor& input, const EvalOptions& options);

class Trainer {
 public:
  // schedule may be null (constant learning rate). The model and optimizer must outlive the trainer.
  // With DDP and CUDA graphs, destroy the Trainer (it owns the graph, which holds captured collectives)
  // before the process group.
  Trainer(Module& model, Optimizer& optimizer, const LRSchedule* schedule, TrainerOptions options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Runs one epoch of `source`: gathers each optimizer step's micro-batches and hands the step to a runner
  // (the captured graph when it takes the step, else eager). on_step runs after every optimizer step (cheap:
  // it must not sync the device unless it wants to, e.g. running_loss()).
  // skip_micro_batches: resume inside an epoch (the first batches are drawn and dropped: the data order and
  // augmentation are pure functions of seed, epoch and sample index, so the rest is what the run would see).
  EpochResult train_epoch(BatchSource& source, int64_t epoch,
                          const std::function<void(const StepProgress&)>& on_step = nullptr,
                          int64_t skip_micro_batches = 0);
  // The loss (options' loss function) and, for [N, classes] outputs with class-index labels, top-1 accuracy
  // over one pass of `source` in eval mode, without autograd; see EvalOptions.
  EvalResult evaluate(BatchSource& source, const EvalOptions& options = {});

  // Mean micro-batch loss of the current epoch so far; reads the device (synchronises).
  double running_loss() const;
  // The micro-batches that mean is over (0 at an epoch's start).
  int64_t running_loss_count() const { return loss_count_; }
  // The same mean as of a recent optimizer step, read without waiting for the device (copied asynchronously
  // after each step); false until one has arrived. For progress lines.
  bool recent_loss(double* loss) { return recent_loss_.latest(loss); }
  int64_t global_step() const { return executor_.global_step(); }
  GradScaler& scaler() { return executor_.scaler(); }
  const TrainerOptions& options() const { return options_; }
  bool finished() const {
    return stop_requested_ || (options_.max_steps >= 0 && global_step() >= options_.max_steps);
  }
  // Ends train_epoch after the current optimizer step (signals, NaN checks); safe to call from on_step.
  void request_stop() { stop_requested_ = true; }
  bool stop_requested() const { return stop_requested_; }
  // Resume: the optimizer steps already done (drives the LR schedule and max_steps).
  void set_global_step(int64_t step) { executor_.set_global_step(step); }
  const GraphStatus& graph_status() const { return graph_status_; }
  // Rows of the tail shape prepared up front (TrainerOptions::prepare_tail_shape); 0 when none was.
  int64_t prepared_tail_rows() const { return prepared_tail_rows_; }
  // Forward FLOPs per image of the model's convolutions, linear layers, products and attention, counted in
  // the first training step (runtime/profile/flops.h; a training step costs about 3x); 0 before it.
  double model_flops_per_image() const { return executor_.model_flops_per_image(); }

 private:
  // The next step's micro-batches (up to accum; fewer at an epoch's end), each draw timed as data wait.
  Step gather_step(BatchSource& source, EpochResult& result);
  // Hands the step to the graph runner when it takes it, else (or when its capture failed) to the eager one.
  Tensor run_step(const Step& step);
  // One pass of evaluate() with whichever weights the model holds now.
  EvalResult evaluate_pass(BatchSource& source, const EvalOptions& options);
  // Once per run, after the first step: forward + backward at the source's tail shape, then undone.
  void prepare_tail_shape(const BatchSource& source, const Step& step);

  TrainerOptions options_;
  GraphStatus graph_status_;
  StepExecutor executor_;
  EagerRunner eager_;
  GraphRunner graph_;
  bool stop_requested_ = false;
  Tensor loss_sum_;  // device-side sum of micro-batch losses this epoch
  AsyncScalar recent_loss_;
  int64_t loss_count_ = 0;
  bool tail_checked_ = false;
  int64_t prepared_tail_rows_ = 0;
};

}  // namespace liftoff
