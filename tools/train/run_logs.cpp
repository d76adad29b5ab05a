#include "tools/train/run_logs.h"

namespace liftoff::tools {

RunLogs::RunLogs(const Flags& f, TrainSetup& s, const TrainClock& clock)
    : f_(f), s_(s), clock_(clock), window_(RunTotals{s.trainer->global_step(), 0, 0.0}) {
  if (!s_.rank0) return;
  if (!f_.log.empty()) jsonl_ = std::make_unique<MetricsLog>(f_.log);
  if (!f_.tensorboard.empty()) tensorboard_ = std::make_unique<SummaryWriter>(f_.tensorboard);
}

RunTotals RunLogs::totals() const {
  RunTotals t;
  t.step = s_.trainer->global_step();
  t.images = (images_before_epoch_ + epoch_images_) * s_.placement.env.world_size;
  t.train_seconds = clock_.training_s();
  return t;
}

void RunLogs::on_step(const StepProgress& p) {
  epoch_images_ = p.images;
  epoch_ = p.epoch;
  lr_ = p.lr;
  if (!enabled() || p.global_step % f_.log_every != 0) return;
  Trainer& trainer = *s_.trainer;
  window_.observe_epoch_loss(trainer.running_loss(), trainer.running_loss_count());  // waits for the device
  write_window();
}

void RunLogs::on_epoch_end(const EpochResult& r, bool run_ends) {
  if (enabled()) window_.observe_epoch_loss(r.mean_loss, s_.trainer->running_loss_count());
  window_.start_epoch();
  images_before_epoch_ += r.images;
  epoch_images_ = 0;
  if (run_ends) finish();
}

void RunLogs::on_evaluation(int64_t epoch, const EvalResult& e, double seconds) {
  if (!enabled()) return;
  EvalRecord r;
  r.step = s_.trainer->global_step();
  r.epoch = epoch;
  r.test_loss = e.mean_loss;
  r.accuracy = e.accuracy;
  r.images = e.images;
  r.eval_s = seconds;
  r.elapsed_s = clock_.elapsed_s();
  if (jsonl_) jsonl_->write(r);
  if (tensorboard_) add_scalars(*tensorboard_, r);
}

void RunLogs::finish() {
  if (enabled() && !window_.empty(totals())) write_window();
}

void RunLogs::write_window() {
  MetricsRecord r = window_.close(totals());
  r.epoch = epoch_;
  r.lr = lr_;
  r.elapsed_s = clock_.elapsed_s();
  const LiveSample live = s_.monitor->live_sample();
  r.gpu_util_pct = live.gpu_util_pct;
  r.device_memory = live.device_memory;
  r.host_rss = live.host_rss;
  if (s_.data.train_stats) add_loader_figures(s_.data.train_stats(), r);
  if (jsonl_) jsonl_->write(r);
  if (tensorboard_) add_scalars(*tensorboard_, r);
}

void RunLogs::add_loader_figures(const LoaderStats& stats, MetricsRecord& r) {
  if (stats.hybrid_cpu_share_final >= 0) r.hybrid_cpu_share = stats.hybrid_cpu_share_final;
  double busy_s = 0.0;
  for (double b : stats.worker_busy_seconds) busy_s += b;
  const auto workers = static_cast<double>(stats.worker_busy_seconds.size());
  if (workers > 0 && r.window_s > 0)
    r.loader_workers_busy_pct = 100.0 * (busy_s - workers_busy_seen_s_) / (r.window_s * workers);
  workers_busy_seen_s_ = busy_s;
}

}  // namespace liftoff::tools
