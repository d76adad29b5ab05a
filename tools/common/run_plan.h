// Where a training run will end, from its flags and its starting point: the totals a progress line and an
// ETA count towards (--epochs and --max-steps both honoured).
#pragma once
#include <cstdint>

namespace liftoff::tools {

struct RunShape {
  int64_t micro_batches_per_epoch = 0;
  int64_t accum = 1;       // micro-batches per optimizer step (an epoch's tail may step with fewer)
  int64_t epochs = 1;      // --epochs
  int64_t max_steps = -1;  // --max-steps; < 0: none
  // Where this process starts: epoch index, micro-batches of it already done (a resumed run), global step.
  int64_t first_epoch = 0;
  int64_t skip_micro_batches = 0;
  int64_t start_step = 0;
};

class RunPlan {
 public:
  explicit RunPlan(const RunShape& shape);
  // The optimizer step the run ends at.
  int64_t total_steps() const { return total_steps_; }
  // Epochs the run goes through, counted from the first epoch of training (for "epoch e/E").
  int64_t epochs() const { return last_epoch_ + 1; }
  // The micro-batch count `epoch` ends at (those skipped on resume included): all of the epoch, or where
  // --max-steps stops it.
  int64_t epoch_micro_batches(int64_t epoch) const;

 private:
  int64_t steps_before(int64_t epoch) const;  // steps from the start to the beginning of `epoch`
  RunShape shape_;
  int64_t first_epoch_steps_ = 0, full_epoch_steps_ = 0;
  int64_t total_steps_ = 0, last_epoch_ = 0;
};

}  // namespace liftoff::tools
