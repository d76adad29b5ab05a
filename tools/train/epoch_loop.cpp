#include "tools/train/epoch_loop.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>

#include "runtime/device.h"
#include "tools/common/signals.h"
#include "tools/train/format.h"
#include "tools/train/run_logs.h"
#include "tools/train/run_progress.h"

namespace liftoff::tools {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

RunShape run_shape(const Flags& f, const TrainSetup& s, const ResumePoint& resume) {
  RunShape shape;
  shape.micro_batches_per_epoch = s.micro_per_epoch;
  shape.accum = f.accum;
  shape.epochs = f.epochs;
  shape.max_steps = f.max_steps;
  shape.first_epoch = resume.epoch;
  shape.skip_micro_batches = resume.skip_micro_batches;
  shape.start_step = s.trainer->global_step();
  return shape;
}

// " (EMA, flip-averaged, shift-averaged)" and its shorter forms: what the evaluation averaged.
std::string test_time_label(bool ema, bool flip, bool shift) {
  std::string parts = ema ? "EMA" : "";
  for (const auto& [on, name] : {std::pair{flip, "flip-averaged"}, std::pair{shift, "shift-averaged"}}) {
    if (on) parts += (parts.empty() ? "" : ", ") + std::string(name);
  }
  return parts.empty() ? "" : " (" + parts + ")";
}

class EpochLoop {
 public:
  EpochLoop(const Flags& f, TrainSetup& s, RunCheckpoints& checkpoints, const ResumePoint& resume)
      : f_(f),
        s_(s),
        trainer_(*s.trainer),
        checkpoints_(checkpoints),
        logs_(f, s, clock_),
        progress_(run_shape(f, s, resume), f.no_eval ? 0 : f.eval_every, clock_) {
    r_.steady_started = f_.timing_warmup == 0;
  }

  LoopResult run(const ResumePoint& resume) {
    steady_start_ = Clock::now();
    run_start_ = Clock::now();
    first_step_ = trainer_.global_step();  // a resumed run counts its warm-up from here
    clock_.start();
    if (f_.profile) s_.monitor->start();
    if (s_.data.skips) s_.data.skips->report_new("load", logs_.jsonl(), false);  // printed in the header
    for (int64_t epoch = resume.epoch; epoch < f_.epochs && !trainer_.finished(); ++epoch) {
      label_ = progress_.epoch_label(epoch);
      epoch_images_at_start_ = 0;
      epoch_has_warmup_ = !r_.steady_started;
      const int64_t skip = epoch == resume.epoch ? resume.skip_micro_batches : 0;
      const EpochResult r = trainer_.train_epoch(
          s_.train_batches(), epoch, [this](const StepProgress& p) { on_step(p); }, skip);
      if (s_.rank0) progress_.end_epoch();
      logs_.on_epoch_end(r, trainer_.finished() || epoch + 1 == f_.epochs);
      if (!end_epoch(epoch, r)) break;
    }
    logs_.finish();
    return r_;
  }

 private:
  // A non-finite loss is checked wherever the loss is read anyway (progress, checkpoints, epoch ends), never
  // with an extra device sync inside a step.
  bool loss_is_bad(double loss) {
    if (std::isfinite(loss) || f_.on_nan != "stop") return false;
    r_.nan_step = trainer_.global_step();
    trainer_.request_stop();
    return true;
  }

  // Saves and says so (the path and the step), above the progress bar.
  void save_checkpoint(int64_t epoch, int64_t micro_batches_into_epoch) {
    const std::string path = checkpoints_.save(epoch, micro_batches_into_epoch);
    const std::string line =
        "checkpoint saved: " + path + " (optimizer step " + std::to_string(trainer_.global_step()) + ")";
    if (s_.rank0 && !path.empty() && line != last_checkpoint_line_) progress_.message(line);
    last_checkpoint_line_ = line;  // a run ending on a due step saves that step again at the epoch's end
  }

  void on_step(const StepProgress& p) {
    progress_.on_step(p);
    if (stop_signal() != 0) {
      trainer_.request_stop();
      if (checkpoints_.enabled() && !loss_is_bad(trainer_.running_loss())) {
        save_checkpoint(p.epoch, p.micro_batch_in_epoch);
      }
      return;
    }
    if (checkpoints_.enabled() && checkpoints_.due_at_step(p.global_step) &&
        !loss_is_bad(trainer_.running_loss())) {
      save_checkpoint(p.epoch, p.micro_batch_in_epoch);
    }
    if (!r_.steady_started && p.global_step - first_step_ == f_.timing_warmup) {
      synchronize(s_.device);
      r_.steady_started = true;
      steady_start_ = Clock::now();
      epoch_images_at_start_ = p.images;
    }
    logs_.on_step(p);
    if (!s_.rank0 || !progress_.due()) return;
    double running = 0.0;  // a step or so old: reading it must not stop the device
    if (!trainer_.recent_loss(&running)) return;
    if (loss_is_bad(running)) return;
    progress_.update(p, "loss " + fmt("%.4f", running) + " | lr " + fmt("%.4g", p.lr) +
                            (f_.profile ? " | " + s_.monitor->progress_text() : ""));
  }

  // --eval-every N: after every N-th epoch, and always after the run's last one.
  bool evaluates_after(int64_t epoch) {
    if (f_.no_eval) return false;
    return (epoch + 1) % f_.eval_every == 0 || epoch + 1 == f_.epochs || trainer_.finished();
  }

  // Checkpoint, counters, evaluation and the epoch line; false: stop training.
  bool end_epoch(int64_t epoch, const EpochResult& r) {
    if (loss_is_bad(r.mean_loss) || r_.nan_step >= 0) return false;
    if (stop_signal() != 0) return false;
    const bool saved_at_epoch_end = checkpoints_.enabled() && (checkpoints_.due_at_epoch_end(epoch) ||
                                                               epoch + 1 == f_.epochs || trainer_.finished());
    if (saved_at_epoch_end) save_checkpoint(epoch + 1, 0);
    r_.train_seconds += r.seconds;
    r_.train_images += r.images;
    if (r_.steady_started) {
      // train_epoch ends with a device synchronisation, so the host clock covers the device work.
      r_.steady_seconds += seconds_since(steady_start_);
      r_.steady_images += r.images - epoch_images_at_start_;
    }
    // The steady-state figure leaves the warm-up steps out: an epoch holding them says so, or the two figures
    // read as a contradiction.
    const std::string span = fmt("%.1f", r.seconds) + " s, " + std::to_string(r.steps) + " steps" +
                             (epoch_has_warmup_ ? ", warm-up included" : "");
    std::string line = label_ + ": train loss " + fmt("%.4f", r.mean_loss) + ", " +
                       fmt("%.0f", static_cast<double>(r.images * s_.placement.env.world_size) / r.seconds) +
                       " img/s (" + span + ")";
    if (evaluates_after(epoch)) {
      const double eval_start_s = clock_.elapsed_s();
      EvalOptions eval_options;
      eval_options.hflip = f_.tta_flip;
      eval_options.shift = f_.tta_shift;
      const EvalResult e = trainer_.evaluate(s_.test_batches(), eval_options);
      const double eval_s = clock_.elapsed_s() - eval_start_s;
      clock_.add_evaluation(eval_s);
      progress_.evaluated(eval_s);
      logs_.on_evaluation(epoch, e, eval_s);
      r_.last_accuracy = e.accuracy;
      line += std::string(" | test") + test_time_label(s_.ema != nullptr, f_.tta_flip, f_.tta_shift) +
              " loss " + fmt("%.4f", e.mean_loss) + ", accuracy " + fmt("%.2f", 100.0 * e.accuracy) + "% (" +
              fmt("%.1f", e.seconds) + " s)";
    }
    if (s_.rank0) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    if (s_.data.skips) s_.data.skips->report_new(str_cat("epoch ", epoch + 1), logs_.jsonl(), s_.rank0);
    steady_start_ = Clock::now();  // evaluation is not training time
    if (f_.target_accuracy > 0 && r_.last_accuracy >= f_.target_accuracy) {
      reached_target(epoch, saved_at_epoch_end);
      return false;
    }
    return true;
  }

  void reached_target(int64_t epoch, bool saved_at_epoch_end) {
    r_.time_to_target = seconds_since(run_start_);
    r_.train_time_to_target = r_.train_seconds;
    if (s_.rank0) {
      std::printf(
          "time to %.2f%% test accuracy: %.2f s (epoch %lld; wall time from the first step, data "
          "loading and evaluation included); %.2f s of training alone (evaluation left out)\n",
          100.0 * f_.target_accuracy, r_.time_to_target, static_cast<long long>(epoch + 1),
          r_.train_time_to_target);
    }
    if (checkpoints_.enabled() && !saved_at_epoch_end)
      save_checkpoint(epoch + 1, 0);  // the weights that did it
  }

  const Flags& f_;
  TrainSetup& s_;
  Trainer& trainer_;
  RunCheckpoints& checkpoints_;
  TrainClock clock_;  // before logs_ and progress_, which keep a reference
  RunLogs logs_;
  RunProgress progress_;
  LoopResult r_;
  Clock::time_point run_start_, steady_start_;
  std::string label_;
  std::string last_checkpoint_line_;
  int64_t epoch_images_at_start_ = 0;
  int64_t first_step_ = 0;         // the optimizer step this run started from (a resumed run's checkpoint)
  bool epoch_has_warmup_ = false;  // this epoch ran some of the --timing-warmup steps
};

}  // namespace

LoopResult run_epochs(const Flags& f, TrainSetup& s, RunCheckpoints& checkpoints, const ResumePoint& resume) {
  EpochLoop loop(f, s, checkpoints, resume);
  return loop.run(resume);
}

}  // namespace liftoff::tools
