#include "models/train/schedule.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace liftoff {

namespace {

void check_step(int64_t step) {
  LIFTOFF_CHECK(step >= 0, ValueError, "lr schedule: step must be >= 0, got ", step);
}

// PyTorch's _annealing_cos: from start (pct 0) to end (pct 1).
double anneal_cos(double start, double end, double pct) {
  return end + (start - end) / 2.0 * (std::cos(M_PI * pct) + 1.0);
}

}  // namespace

ConstantLR::ConstantLR(double base_lr) : base_lr_(base_lr) {
  LIFTOFF_CHECK(base_lr >= 0, ValueError, "constant schedule: lr must be >= 0, got ", base_lr);
}

double ConstantLR::lr_at(int64_t step) const {
  check_step(step);
  return base_lr_;
}

StepLR::StepLR(double base_lr, int64_t step_size, double gamma)
    : base_lr_(base_lr), step_size_(step_size), gamma_(gamma) {
  LIFTOFF_CHECK(base_lr >= 0, ValueError, "step schedule: lr must be >= 0, got ", base_lr);
  LIFTOFF_CHECK(step_size > 0, ValueError, "step schedule: step_size must be > 0, got ", step_size);
  LIFTOFF_CHECK(gamma > 0, ValueError, "step schedule: gamma must be > 0, got ", gamma);
}

double StepLR::lr_at(int64_t step) const {
  check_step(step);
  return base_lr_ * std::pow(gamma_, static_cast<double>(step / step_size_));
}

CosineLR::CosineLR(double base_lr, int64_t total_steps, double min_lr)
    : base_lr_(base_lr), total_steps_(total_steps), min_lr_(min_lr) {
  LIFTOFF_CHECK(base_lr >= 0 && min_lr >= 0, ValueError, "cosine schedule: lr and min_lr must be >= 0, got ",
                base_lr, " and ", min_lr);
  LIFTOFF_CHECK(total_steps > 0, ValueError, "cosine schedule: total_steps must be > 0, got ", total_steps);
}

double CosineLR::lr_at(int64_t step) const {
  check_step(step);
  if (step >= total_steps_) return min_lr_;
  return anneal_cos(base_lr_, min_lr_, static_cast<double>(step) / static_cast<double>(total_steps_));
}

OneCycleLR::OneCycleLR(double max_lr, int64_t total_steps, double pct_start, double div_factor,
                       double final_div_factor)
    : max_lr_(max_lr),
      initial_lr_(max_lr / div_factor),
      min_lr_(max_lr / div_factor / final_div_factor),
      total_steps_(total_steps),
      peak_step_(pct_start * static_cast<double>(total_steps) - 1.0) {
  LIFTOFF_CHECK(max_lr >= 0, ValueError, "onecycle schedule: lr must be >= 0, got ", max_lr);
  LIFTOFF_CHECK(total_steps > 0, ValueError, "onecycle schedule: total_steps must be > 0, got ", total_steps);
  LIFTOFF_CHECK(pct_start > 0 && pct_start < 1, ValueError,
                "onecycle schedule: pct_start must be in (0, 1), got ", pct_start);
  LIFTOFF_CHECK(div_factor > 0 && final_div_factor > 0, ValueError,
                "onecycle schedule: div_factor and final_div_factor must be > 0");
  // PyTorch divides by the phase lengths and refuses a run whose rising phase ends before step 0 (at most
  // 1 / pct_start steps: a smoke test). Such a run keeps the decay: its first step at the peak.
  if (peak_step_ <= 0) {
    peak_step_ = 0.0;
    note_ = str_cat("onecycle: ", total_steps, " step", total_steps == 1 ? " is" : "s are",
                    " too few for a warm-up phase (pct_start ", pct_start, "): lr ", max_lr,
                    " from the first step",
                    total_steps > 1 ? str_cat(", annealed to ", min_lr_, " at the last") : std::string());
  }
}

double OneCycleLR::lr_at(int64_t step) const {
  check_step(step);
  const double s = static_cast<double>(std::min(step, total_steps_ - 1));
  if (s <= peak_step_) return peak_step_ > 0 ? anneal_cos(initial_lr_, max_lr_, s / peak_step_) : max_lr_;
  const double end = static_cast<double>(total_steps_) - 1.0;
  return anneal_cos(max_lr_, min_lr_, (s - peak_step_) / (end - peak_step_));
}

WarmupLR::WarmupLR(std::unique_ptr<LRSchedule> inner, int64_t warmup_steps)
    : inner_(std::move(inner)), warmup_steps_(warmup_steps) {
  LIFTOFF_CHECK(inner_ != nullptr, ValueError, "warmup schedule: the wrapped schedule is null");
  LIFTOFF_CHECK(warmup_steps > 0, ValueError, "warmup schedule: warmup_steps must be > 0, got ",
                warmup_steps);
}

double WarmupLR::lr_at(int64_t step) const {
  const double lr = inner_->lr_at(step);
  if (step >= warmup_steps_) return lr;
  return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps_);
}

std::vector<std::string> schedule_names() {
  return {"constant", "step", "cosine", "onecycle"};
}

std::unique_ptr<LRSchedule> make_schedule(const std::string& name, double base_lr, int64_t total_steps,
                                          int64_t warmup_steps, const ScheduleOptions& options) {
  LIFTOFF_CHECK(warmup_steps >= 0, ValueError, "lr schedule: warmup steps must be >= 0, got ", warmup_steps);
  std::unique_ptr<LRSchedule> schedule;
  if (name == "constant") {
    schedule = std::make_unique<ConstantLR>(base_lr);
  } else if (name == "step") {
    schedule = std::make_unique<StepLR>(base_lr, options.step_size, options.gamma);
  } else if (name == "cosine") {
    schedule = std::make_unique<CosineLR>(base_lr, total_steps, options.min_lr);
  } else if (name == "onecycle") {
    schedule = std::make_unique<OneCycleLR>(base_lr, total_steps, options.pct_start, options.div_factor,
                                            options.final_div_factor);
  } else {
    std::string known;
    for (const auto& n : schedule_names()) known += (known.empty() ? "" : ", ") + n;
    throw ValueError(str_cat("unknown lr schedule \"", name, "\"; known schedules: ", known));
  }
  if (warmup_steps > 0) schedule = std::make_unique<WarmupLR>(std::move(schedule), warmup_steps);
  return schedule;
}

}  // namespace liftoff
