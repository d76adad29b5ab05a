// train's --log (JSON lines) and --tensorboard (event files): a record per window of --log-every optimizer
// steps, with the window's own loss, step time and images/s, and one per evaluation. Rank 0 writes them.
#pragma once
#include <cstdint>
#include <memory>

#include "models/report/metrics_log.h"
#include "models/report/tensorboard.h"
#include "tools/train/flags.h"
#include "tools/train/run_progress.h"
#include "tools/train/run_setup.h"

namespace liftoff::tools {

class RunLogs {
 public:
  // Opens the files the flags ask for (rank 0 only; other ranks log nothing). Throws IOError.
  RunLogs(const Flags& f, TrainSetup& s, const TrainClock& clock);
  // After every optimizer step; at every --log-every-th it reads the loss (one device sync) and writes.
  void on_step(const StepProgress& p);
  // After train_epoch returned: the epoch's last loss reading (a window may span epochs). When `run_ends`,
  // the last, partial window is written now, before the evaluation's record.
  void on_epoch_end(const EpochResult& r, bool run_ends);
  void on_evaluation(int64_t epoch, const EvalResult& e, double seconds);
  // The last, partial window (when steps were taken since the last record).
  void finish();
  // The JSONL log, or null (for records of other kinds, e.g. skipped files).
  MetricsLog* jsonl() const { return jsonl_.get(); }

 private:
  bool enabled() const { return jsonl_ || tensorboard_; }
  RunTotals totals() const;
  void write_window();
  // The training loader's figures for the window: the hybrid's CPU share now, the workers' busy share.
  void add_loader_figures(const LoaderStats& stats, MetricsRecord& r);

  const Flags& f_;
  TrainSetup& s_;
  const TrainClock& clock_;
  std::unique_ptr<MetricsLog> jsonl_;
  std::unique_ptr<SummaryWriter> tensorboard_;
  MetricsWindow window_;
  double workers_busy_seen_s_ = 0.0;                    // the loader workers' busy seconds at the last window
  int64_t images_before_epoch_ = 0, epoch_images_ = 0;  // this rank's
  int64_t epoch_ = 0;
  double lr_ = 0.0;
};

}  // namespace liftoff::tools
