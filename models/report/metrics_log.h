// --log metrics.jsonl: one JSON object per line (docs/report-schema.md): a "train" record per window of
// --log-every optimizer steps, with the window's own figures (not running means), and an "eval" record per
// evaluation. MetricsWindow turns a run's cumulative counters into those windows.
#pragma once
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

namespace liftoff {

// One window of training: the optimizer steps after the previous record up to and including `step`.
struct MetricsRecord {
  int64_t step = 0;                         // optimizer steps done (the window's last)
  int64_t epoch = 0;                        // index from 0 of the epoch `step` belongs to
  int64_t steps = 0;                        // optimizer steps in the window
  int64_t images = 0;                       // training images in the window (all ranks)
  double window_s = 0.0;                    // training wall time of the window (evaluation left out)
  std::optional<double> loss;               // mean micro-batch loss over the window (rank 0's)
  double lr = 0.0;                          // at `step`
  std::optional<double> images_per_second;  // images / window_s
  std::optional<double> step_ms;            // window_s / steps
  double elapsed_s = 0.0;                   // wall time since training started, evaluation included
  std::optional<double> gpu_util_pct;       // latest NVML sample (with --profile)
  std::optional<int64_t> device_memory;     // caching allocator, bytes allocated now (CUDA runs)
  std::optional<int64_t> host_rss;          // bytes resident now
  // --decode auto on CUDA: the CPU + GPU hybrid's CPU share now (its path over a run: when it moved).
  std::optional<double> hybrid_cpu_share;
  std::optional<double> loader_workers_busy_pct;  // loader workers' mean busy share over the window, percent
};

// One evaluation on the test set.
struct EvalRecord {
  int64_t step = 0;   // optimizer steps done when it ran
  int64_t epoch = 0;  // index from 0 of the epoch it followed
  double test_loss = 0.0;
  double accuracy = 0.0;  // fraction in [0, 1]
  int64_t images = 0;
  double eval_s = 0.0;
  double elapsed_s = 0.0;
};

// A run's counters at one moment, cumulative from the start of training in this process.
struct RunTotals {
  int64_t step = 0;            // optimizer steps done (global step, resumed runs included)
  int64_t images = 0;          // training images (all ranks)
  double train_seconds = 0.0;  // wall time training, evaluation left out
};

// Per-window figures from cumulative counters. The trainer's loss is a running mean that restarts every
// epoch; the window keeps the sum and count it has seen of the current epoch so that a window that spans an
// epoch's end still averages exactly its own micro-batches.
class MetricsWindow {
 public:
  explicit MetricsWindow(RunTotals start = {}) : start_(start) {}
  // The current epoch's loss so far: its running mean over `count` micro-batches. Call it at each close()
  // and at each epoch's end (the last reading of an epoch).
  void observe_epoch_loss(double running_mean, int64_t count);
  // A new epoch begins: the trainer's running loss starts again from zero.
  void start_epoch() {
    epoch_sum_seen_ = 0.0;
    epoch_count_seen_ = 0;
  }
  bool empty(const RunTotals& now) const { return now.step == start_.step; }
  // Fills step, steps, images, window_s, loss, images_per_second and step_ms of the window from the previous
  // close() (or the start) to `now`; the next window starts at `now`.
  MetricsRecord close(const RunTotals& now);

 private:
  RunTotals start_;
  double epoch_sum_seen_ = 0.0, window_loss_sum_ = 0.0;
  int64_t epoch_count_seen_ = 0, window_loss_count_ = 0;
};

// A file left out (--on-bad-sample skip): {"event": "skipped_file", "path", "reason", "found"}.
struct SkippedFileRecord {
  std::string path;
  std::string reason;
  std::string found;  // "load" or "epoch N"
};

class MetricsLog {
 public:
  explicit MetricsLog(const std::string& path);  // truncates; throws IOError
  void write(const MetricsRecord& record);       // one line {"kind": "train", ...}, flushed
  void write(const EvalRecord& record);          // one line {"kind": "eval", ...}, flushed
  void write(const SkippedFileRecord& record);   // one line {"kind": "skipped_file", ...}, flushed
 private:
  void write_line(const std::string& line);
  std::string path_;
  std::ofstream out_;
};

}  // namespace liftoff
