#include "tools/common/run_plan.h"

#include <algorithm>

namespace liftoff::tools {

namespace {

int64_t ceil_div(int64_t a, int64_t b) {
  return b > 0 ? (std::max<int64_t>(a, 0) + b - 1) / b : 0;
}

}  // namespace

RunPlan::RunPlan(const RunShape& shape) : shape_(shape) {
  shape_.accum = std::max<int64_t>(shape_.accum, 1);
  const int64_t m = shape_.micro_batches_per_epoch;
  first_epoch_steps_ = ceil_div(m - shape_.skip_micro_batches, shape_.accum);
  full_epoch_steps_ = ceil_div(m, shape_.accum);
  const int64_t epochs_left = shape_.epochs - shape_.first_epoch;
  int64_t total = shape_.start_step;
  if (epochs_left > 0) total += first_epoch_steps_ + (epochs_left - 1) * full_epoch_steps_;
  if (shape_.max_steps >= 0) total = std::max(shape_.start_step, std::min(total, shape_.max_steps));
  total_steps_ = total;
  // The last epoch: the first one whose end reaches the total (the last of --epochs when none does).
  last_epoch_ = std::max(shape_.first_epoch, shape_.epochs - 1);
  if (total_steps_ - shape_.start_step <= first_epoch_steps_) {
    last_epoch_ = shape_.first_epoch;
  } else if (full_epoch_steps_ > 0) {
    const int64_t after_first = total_steps_ - shape_.start_step - first_epoch_steps_;
    last_epoch_ = std::min(last_epoch_, shape_.first_epoch + ceil_div(after_first, full_epoch_steps_));
  }
}

int64_t RunPlan::steps_before(int64_t epoch) const {
  if (epoch <= shape_.first_epoch) return 0;
  return first_epoch_steps_ + (epoch - shape_.first_epoch - 1) * full_epoch_steps_;
}

int64_t RunPlan::epoch_micro_batches(int64_t epoch) const {
  const int64_t skipped = epoch == shape_.first_epoch ? shape_.skip_micro_batches : 0;
  const int64_t steps_left = std::max<int64_t>(0, total_steps_ - shape_.start_step - steps_before(epoch));
  const int64_t room = std::max<int64_t>(0, shape_.micro_batches_per_epoch - skipped);
  return skipped + std::min(room, steps_left * shape_.accum);
}

}  // namespace liftoff::tools
