#include "tools/train/epoch_loop.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "runtime/device.h"
#include "tools/common/progress.h"
#include "tools/common/signals.h"
#include "tools/train/format.h"

namespace liftoff::tools {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

class EpochLoop {
 public:
  EpochLoop(const Flags& f, TrainSetup& s, RunCheckpoints& checkpoints)
      : f_(f), s_(s), trainer_(*s.trainer), checkpoints_(checkpoints) {
    if (s_.rank0 && !f_.log.empty()) metrics_ = std::make_unique<MetricsLog>(f_.log);
    r_.steady_started = f_.timing_warmup == 0;
  }

  LoopResult run(const ResumePoint& resume) {
    steady_start_ = Clock::now();
    run_start_ = Clock::now();
    if (f_.profile) s_.monitor->start();
    for (int64_t epoch = resume.epoch; epoch < f_.epochs && !trainer_.finished(); ++epoch) {
      label_ = "epoch " + std::to_string(epoch + 1) + "/" + std::to_string(f_.epochs);
      epoch_images_at_start_ = 0;
      const int64_t skip = epoch == resume.epoch ? resume.skip_micro_batches : 0;
      const EpochResult r = trainer_.train_epoch(
          s_.train_batches(), epoch, [this](const StepProgress& p) { on_step(p); }, skip);
      if (s_.rank0) progress_.finish();
      if (!end_epoch(epoch, r)) break;
    }
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

  void on_step(const StepProgress& p) {
    if (stop_signal() != 0) {
      trainer_.request_stop();
      if (checkpoints_.enabled() && !loss_is_bad(trainer_.running_loss())) {
        checkpoints_.save(p.epoch, p.micro_batch_in_epoch);
      }
      return;
    }
    if (checkpoints_.enabled() && checkpoints_.due_at_step(p.global_step) &&
        !loss_is_bad(trainer_.running_loss())) {
      checkpoints_.save(p.epoch, p.micro_batch_in_epoch);
    }
    if (!r_.steady_started && p.global_step == f_.timing_warmup) {
      synchronize(s_.device);
      r_.steady_started = true;
      steady_start_ = Clock::now();
      epoch_images_at_start_ = p.images;
    }
    if (metrics_ && p.global_step % f_.log_every == 0) {
      MetricsRecord m;
      m.step = p.global_step;
      m.epoch = p.epoch;
      m.loss = trainer_.running_loss();  // a device read, only every --log-every steps
      m.lr = p.lr;
      m.images_per_second = f_.profile      ? s_.monitor->profiler().throughput().images_per_second()
                            : p.seconds > 0 ? static_cast<double>(p.images) / p.seconds
                                            : 0.0;
      m.elapsed_s = seconds_since(run_start_);
      metrics_->write(m);
    }
    if (!s_.rank0 || !progress_.due()) return;
    double running = 0.0;  // a step or so old: reading it must not stop the device
    if (!trainer_.recent_loss(&running)) return;
    if (loss_is_bad(running)) return;
    progress_.update(label_, p.micro_batch_in_epoch, p.micro_batches_per_epoch,
                     "loss " + fmt("%.4f", running) + " | lr " + fmt("%.4g", p.lr) +
                         (f_.profile ? " | " + s_.monitor->progress_text() : ""));
  }

  // Checkpoint, counters, evaluation and the epoch line; false: stop training.
  bool end_epoch(int64_t epoch, const EpochResult& r) {
    if (loss_is_bad(r.mean_loss) || r_.nan_step >= 0) return false;
    if (stop_signal() != 0) return false;
    const bool saved_at_epoch_end = checkpoints_.enabled() && (checkpoints_.due_at_epoch_end(epoch) ||
                                                               epoch + 1 == f_.epochs || trainer_.finished());
    if (saved_at_epoch_end) checkpoints_.save(epoch + 1, 0);
    r_.train_seconds += r.seconds;
    r_.train_images += r.images;
    if (r_.steady_started) {
      // train_epoch ends with a device synchronisation, so the host clock covers the device work.
      r_.steady_seconds += seconds_since(steady_start_);
      r_.steady_images += r.images - epoch_images_at_start_;
    }
    std::string line = label_ + ": train loss " + fmt("%.4f", r.mean_loss) + ", " +
                       fmt("%.0f", static_cast<double>(r.images * s_.placement.env.world_size) / r.seconds) +
                       " img/s (" + fmt("%.1f", r.seconds) + " s, " + std::to_string(r.steps) + " steps)";
    if (!f_.no_eval) {
      const EvalResult e = trainer_.evaluate(s_.test_batches());
      r_.last_accuracy = e.accuracy;
      line += " | test loss " + fmt("%.4f", e.mean_loss) + ", accuracy " + fmt("%.2f", 100.0 * e.accuracy) +
              "% (" + fmt("%.1f", e.seconds) + " s)";
    }
    if (s_.rank0) std::printf("%s\n", line.c_str());
    std::fflush(stdout);
    steady_start_ = Clock::now();  // evaluation is not training time
    if (f_.target_accuracy > 0 && r_.last_accuracy >= f_.target_accuracy) {
      reached_target(epoch, saved_at_epoch_end);
      return false;
    }
    return true;
  }

  void reached_target(int64_t epoch, bool saved_at_epoch_end) {
    r_.time_to_target = seconds_since(run_start_);
    if (s_.rank0) {
      std::printf(
          "time to %.2f%% test accuracy: %.1f s (epoch %lld; wall time from the first step, data "
          "loading and evaluation included)\n",
          100.0 * f_.target_accuracy, r_.time_to_target, static_cast<long long>(epoch + 1));
    }
    if (checkpoints_.enabled() && !saved_at_epoch_end)
      checkpoints_.save(epoch + 1, 0);  // the weights that did it
  }

  const Flags& f_;
  TrainSetup& s_;
  Trainer& trainer_;
  RunCheckpoints& checkpoints_;
  std::unique_ptr<MetricsLog> metrics_;
  ProgressLine progress_;
  LoopResult r_;
  Clock::time_point run_start_, steady_start_;
  std::string label_;
  int64_t epoch_images_at_start_ = 0;
};

}  // namespace

LoopResult run_epochs(const Flags& f, TrainSetup& s, RunCheckpoints& checkpoints, const ResumePoint& resume) {
  EpochLoop loop(f, s, checkpoints);
  return loop.run(resume);
}

}  // namespace liftoff::tools
