// The pieces a step runner composes: forward + backward of one micro-batch into the step's gradient sums, the
// gradient all-reduce (DDP) and the optimizer update with AMP's scaler. Eager, captured and concurrent
// runners (models/train/step_runner.h) call the same pieces, so a captured step computes exactly what an
// eager one does. Inside a step nothing reads device values on the host.
#pragma once
#include <cstdint>
#include <vector>

#include "models/nn/module.h"
#include "models/train/optim.h"
#include "models/train/schedule.h"
#include "models/train/step.h"
#include "models/train/trainer_options.h"
#include "runtime/capture.h"

namespace liftoff {

class StepExecutor : public CaptureParticipant {
 public:
  // The model, optimizer and schedule (may be null) must outlive the executor.
  StepExecutor(Module& model, Optimizer& optimizer, const LRSchedule* schedule,
               const TrainerOptions& options);
  ~StepExecutor() override;
  StepExecutor(const StepExecutor&) = delete;
  StepExecutor& operator=(const StepExecutor&) = delete;

  // Forward, loss and backward of micro-batch `index_in_step` (0: the step's first), timed; returns the
  // detached f32 loss. completes_step: the step's last micro-batch (DDP communicates only then).
  // leave_in_grad: its gradients stay in .grad for the caller (concurrent micro-batches).
  Tensor run_micro_batch(const MicroBatch& batch, int64_t index_in_step, bool completes_step,
                         bool leave_in_grad = false);
  // The step's end: gradient all-reduce (DDP), then the timed optimizer update (scaler, LR schedule unless
  // set_lr is false because the LR is already on the device), zero_grad, global step + 1.
  void finish_step(bool set_lr = true);
  // The learning rate of the current global step, written to the device (before a graph replay reads it).
  void set_lr_for_step();

  // Gradient accumulation over micro-batches: autograd adds each parameter's gradient into .grad with a
  // kernel of its own (about 60 per ResNet-20 micro-batch). A step's micro-batches after the first instead
  // leave fresh gradients, which one multi-tensor launch adds into the step's sums; the optimizer gets the
  // sums back in .grad. With gradient-ready hooks (DDP) the last micro-batch gets them back before its
  // backward and accumulates as usual, so the hooks see complete gradients. Same additions in the same order:
  // identical results, fewer graph nodes.
  bool grad_hooks_present() const;
  void move_gradients_to_sums();
  // Adds the fresh gradients in .grad (or `fresh`, one per parameter, when given) into the sums.
  void add_gradients_to_sums();
  void add_gradients_to_sums(std::vector<Tensor> fresh);
  // The parameters' .grad, taken out (each left undefined).
  std::vector<Tensor> take_gradients();

  // Eager steps before a capture tune first-use choices (cuDNN searches) for the replayed graph.
  void set_preparing_capture(bool on) { preparing_capture_ = on; }

  Module& model() { return model_; }
  Optimizer& optimizer() { return optimizer_; }
  GradScaler& scaler() { return scaler_; }
  const TrainerOptions& options() const { return options_; }
  int64_t global_step() const { return global_step_; }
  // Forward FLOPs per image of the model's GEMM-like ops (runtime/profile/flops.h), counted during the first
  // micro-batch's forward (always eager: graphs are captured after warm-up steps); 0 before it ran.
  double model_flops_per_image() const { return flops_per_image_; }
  void set_global_step(int64_t step) { global_step_ = step; }
  Device device() const;

  // What takes part in a captured step: this executor, the optimizer, the scaler, DDP and the profiler.
  std::vector<CaptureParticipant*> capture_participants();
  // The executor's own part: a failed capture restores the global step and drops the half-made sums; a
  // replay counts as the optimizer step the capture recorded.
  void begin_capture() override;
  void abort_capture() noexcept override;
  void after_replay() override;

 private:
  Tensor forward(const Tensor& input);  // model_.forward, the first call counting its FLOPs
  void synchronize_gradients();
  void restore_gradient_sums();

  Module& model_;
  Optimizer& optimizer_;
  const LRSchedule* schedule_;
  const TrainerOptions& options_;
  LossFn loss_;
  GradScaler scaler_;
  int64_t global_step_ = 0;
  int64_t step_before_capture_ = 0;
  bool preparing_capture_ = false;
  bool flops_counted_ = false;
  double flops_per_image_ = 0.0;
  std::vector<Tensor> grad_sums_;  // per parameter: this step's gradient sum while .grad is fresh (or empty)
};

}  // namespace liftoff
