#include "models/report/metrics_log.h"

#include "models/report/json.h"
#include "runtime/error.h"

namespace liftoff {

namespace {

template <class Io, class M>
void describe_train(Io& io, M& r) {
  io("step", r.step);
  io("epoch", r.epoch);
  io("steps", r.steps);
  io("images", r.images);
  io("window_s", r.window_s);
  io("loss", r.loss);
  io("lr", r.lr);
  io("images_per_s", r.images_per_second);
  io("step_ms", r.step_ms);
  io("elapsed_s", r.elapsed_s);
  io("gpu_util_pct", r.gpu_util_pct);
  io("device_memory", r.device_memory);
  io("host_rss", r.host_rss);
  io.when_present(  // decode loaders only
      "hybrid_cpu_share", [&](auto& later) { later("hybrid_cpu_share", r.hybrid_cpu_share); },
      r.hybrid_cpu_share.has_value());
  io.when_present(
      "loader_workers_busy_pct",
      [&](auto& later) { later("loader_workers_busy_pct", r.loader_workers_busy_pct); },
      r.loader_workers_busy_pct.has_value());
}

template <class Io, class M>
void describe_eval(Io& io, M& r) {
  io("step", r.step);
  io("epoch", r.epoch);
  io("test_loss", r.test_loss);
  io("accuracy", r.accuracy);
  io("images", r.images);
  io("eval_s", r.eval_s);
  io("elapsed_s", r.elapsed_s);
}

template <class Record, class Describe>
std::string json_line(const char* kind, const Record& r, Describe describe) {
  report_json::json j;
  report_json::JsonWriter w(j);
  w("kind", std::string(kind));
  describe(w, r);
  return j.dump();
}

}  // namespace

void MetricsWindow::observe_epoch_loss(double running_mean, int64_t count) {
  if (count <= epoch_count_seen_) return;  // nothing new since the last reading
  const double sum = running_mean * static_cast<double>(count);
  window_loss_sum_ += sum - epoch_sum_seen_;
  window_loss_count_ += count - epoch_count_seen_;
  epoch_sum_seen_ = sum;
  epoch_count_seen_ = count;
}

MetricsRecord MetricsWindow::close(const RunTotals& now) {
  MetricsRecord r;
  r.step = now.step;
  r.steps = now.step - start_.step;
  r.images = now.images - start_.images;
  r.window_s = now.train_seconds - start_.train_seconds;
  if (window_loss_count_ > 0) r.loss = window_loss_sum_ / static_cast<double>(window_loss_count_);
  if (r.window_s > 0.0) r.images_per_second = static_cast<double>(r.images) / r.window_s;
  if (r.steps > 0) r.step_ms = 1000.0 * r.window_s / static_cast<double>(r.steps);
  start_ = now;
  window_loss_sum_ = 0.0;
  window_loss_count_ = 0;
  return r;
}

MetricsLog::MetricsLog(const std::string& path)
    : path_(path), out_(path, std::ios::binary | std::ios::trunc) {
  if (!out_) throw IOError("cannot write the metrics log '" + path + "'");
}

void MetricsLog::write(const MetricsRecord& r) {
  write_line(json_line("train", r, [](auto& io, const MetricsRecord& m) { describe_train(io, m); }));
}

void MetricsLog::write(const EvalRecord& r) {
  write_line(json_line("eval", r, [](auto& io, const EvalRecord& m) { describe_eval(io, m); }));
}

void MetricsLog::write(const SkippedFileRecord& r) {
  write_line(json_line("skipped_file", r, [](auto& io, const SkippedFileRecord& f) {
    io("path", f.path);
    io("reason", f.reason);
    io("found", f.found);
  }));
}

void MetricsLog::write_line(const std::string& line) {
  out_ << line << "\n";
  out_.flush();
  if (!out_) throw IOError("writing the metrics log '" + path_ + "' failed");
}

}  // namespace liftoff
