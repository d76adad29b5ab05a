// train's progress line: the epoch's bar with totals that honour --max-steps, the time since training
// started and an estimate of the time left; and a line for each checkpoint written.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

#include "models/train/trainer.h"
#include "tools/common/progress.h"
#include "tools/common/run_plan.h"

namespace liftoff::tools {

// Wall time since training started, and the part of it spent training (evaluation passes left out).
class TrainClock {
 public:
  void start() { start_ = std::chrono::steady_clock::now(); }
  double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  double training_s() const { return elapsed_s() - evaluation_s_; }
  void add_evaluation(double seconds) { evaluation_s_ += seconds; }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double evaluation_s_ = 0.0;
};

class RunProgress {
 public:
  // eval_every: an evaluation follows every N-th epoch and the last (0: none); its measured time goes into
  // the estimate.
  RunProgress(const RunShape& shape, int64_t eval_every, const TrainClock& clock);
  // "epoch 2/3", out of the epochs the run goes through.
  std::string epoch_label(int64_t epoch) const;
  // After every optimizer step (cheap): remembers when the first one of this process ended.
  void on_step(const StepProgress& p);
  bool due() { return line_.due(); }
  // The bar for `p` with `text`, then "elapsed 1:02 | ETA 3:10" (no ETA before two steps were timed).
  void update(const StepProgress& p, const std::string& text);
  void end_epoch() { line_.finish(); }
  void evaluated(double seconds) { last_evaluation_s_ = seconds; }
  void message(const std::string& line) { line_.message(line); }
  // Seconds left: the remaining steps at this process's mean step time (its first step, warm-up and
  // capture, left out) plus the remaining evaluations at the last one's time; < 0 while not measured.
  double eta_s(int64_t global_step, int64_t epoch) const;

 private:
  RunPlan plan_;
  int64_t eval_every_;
  const TrainClock& clock_;
  ProgressLine line_;
  int64_t first_step_ = -1;  // global step at the end of this process's first step
  double first_step_end_s_ = 0.0;
  double last_evaluation_s_ = -1.0;
};

}  // namespace liftoff::tools
