// Learning-rate schedules: lr_at(step) gives the learning rate for the update that follows `step` optimizer
// steps (0-based: lr_at(0) is the first update's rate). Closed forms of PyTorch's schedulers, so a schedule
// can be evaluated at any step (resume needs no replay).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace liftoff {

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  // step >= 0; throws ValueError for a negative step.
  virtual double lr_at(int64_t step) const = 0;
  // What the schedule changed from its usual form to fit the run ("" when nothing): a tool prints it once.
  virtual std::string note() const { return {}; }
};

// base_lr at every step.
class ConstantLR : public LRSchedule {
 public:
  explicit ConstantLR(double base_lr);
  double lr_at(int64_t step) const override;

 private:
  double base_lr_;
};

// StepLR: base_lr * gamma^(step / step_size).
class StepLR : public LRSchedule {
 public:
  StepLR(double base_lr, int64_t step_size, double gamma);
  double lr_at(int64_t step) const override;

 private:
  double base_lr_;
  int64_t step_size_;
  double gamma_;
};

// CosineAnnealingLR with T_max = total_steps: min + (base - min) * (1 + cos(pi * step / total)) / 2,
// then min_lr from total_steps on.
class CosineLR : public LRSchedule {
 public:
  CosineLR(double base_lr, int64_t total_steps, double min_lr = 0.0);
  double lr_at(int64_t step) const override;

 private:
  double base_lr_;
  int64_t total_steps_;
  double min_lr_;
};

// OneCycleLR (two phases, cosine annealing) with max_lr = base_lr: from max_lr / div_factor up to max_lr over
// the first pct_start * total_steps - 1 steps, then down to max_lr / div_factor / final_div_factor at step
// total_steps - 1. Later steps keep the final rate (PyTorch raises there instead). A run too short for the
// rising phase (total_steps <= 1 / pct_start, which PyTorch refuses: `train --max-steps 2`) starts at max_lr
// and keeps the cosine decay to the final rate; note() says so.
class OneCycleLR : public LRSchedule {
 public:
  OneCycleLR(double max_lr, int64_t total_steps, double pct_start = 0.3, double div_factor = 25.0,
             double final_div_factor = 1e4);
  double lr_at(int64_t step) const override;
  std::string note() const override { return note_; }

 private:
  double max_lr_, initial_lr_, min_lr_;
  int64_t total_steps_;
  double peak_step_;  // end of the rising phase, as PyTorch computes it (may be fractional)
  std::string note_;  // set when the run is too short for PyTorch's phases
};

// Linear warmup around any schedule: inner(step) * (step + 1) / warmup_steps for step < warmup_steps.
class WarmupLR : public LRSchedule {
 public:
  WarmupLR(std::unique_ptr<LRSchedule> inner, int64_t warmup_steps);
  double lr_at(int64_t step) const override;
  std::string note() const override { return inner_->note(); }

 private:
  std::unique_ptr<LRSchedule> inner_;
  int64_t warmup_steps_;
};

struct ScheduleOptions {
  int64_t step_size = 30;  // step: steps between decays
  double gamma = 0.1;      // step: decay factor
  double min_lr = 0.0;     // cosine: final rate
  double pct_start = 0.3;  // onecycle
  double div_factor = 25.0;
  double final_div_factor = 1e4;
};

// The names make_schedule knows: constant, step, cosine, onecycle.
std::vector<std::string> schedule_names();

// Builds a schedule by name; warmup_steps > 0 wraps it in WarmupLR. cosine and onecycle need total_steps > 0
// (any positive count: onecycle degrades on very short runs, see OneCycleLR).
// Throws ValueError for an unknown name (listing the known ones) or bad arguments.
std::unique_ptr<LRSchedule> make_schedule(const std::string& name, double base_lr, int64_t total_steps,
                                          int64_t warmup_steps = 0, const ScheduleOptions& options = {});

}  // namespace liftoff
