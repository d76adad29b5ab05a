#include "tools/train/run_progress.h"

namespace liftoff::tools {

RunProgress::RunProgress(const RunShape& shape, int64_t eval_every, const TrainClock& clock)
    : plan_(shape), eval_every_(eval_every), clock_(clock) {}

std::string RunProgress::epoch_label(int64_t epoch) const {
  return "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(plan_.epochs());
}

void RunProgress::on_step(const StepProgress& p) {
  if (first_step_ >= 0) return;
  first_step_ = p.global_step;
  first_step_end_s_ = clock_.training_s();
}

double RunProgress::eta_s(int64_t global_step, int64_t epoch) const {
  const int64_t timed_steps = global_step - first_step_;
  if (first_step_ < 0 || timed_steps <= 0) return -1.0;
  const double per_step = (clock_.training_s() - first_step_end_s_) / static_cast<double>(timed_steps);
  double eta = per_step * static_cast<double>(plan_.total_steps() - global_step);
  if (eval_every_ > 0 && last_evaluation_s_ >= 0) {
    // After epochs epoch .. epochs - 1 (0-based): the multiples of eval_every among their numbers epoch + 1
    // .. epochs, and the last one when it is not a multiple.
    const int64_t epochs = plan_.epochs();
    const int64_t evaluations_left =
        epochs / eval_every_ - epoch / eval_every_ + (epochs % eval_every_ != 0 && epoch < epochs ? 1 : 0);
    eta += last_evaluation_s_ * static_cast<double>(evaluations_left);
  }
  return eta;
}

void RunProgress::update(const StepProgress& p, const std::string& text) {
  const double eta = eta_s(p.global_step, p.epoch);
  line_.update(epoch_label(p.epoch), p.micro_batch_in_epoch, plan_.epoch_micro_batches(p.epoch),
               text + " | elapsed " + format_duration(clock_.elapsed_s()) +
                   (eta >= 0 ? " | ETA " + format_duration(eta) : std::string()));
}

}  // namespace liftoff::tools
