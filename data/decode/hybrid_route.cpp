#include "data/decode/hybrid_route.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace liftoff {

namespace {

double smooth(double old_value, double sample, double weight) {
  return old_value < 0 ? sample : old_value + weight * (sample - old_value);
}

}  // namespace

HybridShareController::HybridShareController(HybridShareConfig config)
    : config_(config),
      share_(std::clamp(config.initial_share, 0.0, 1.0)),
      target_(share_),
      load_(config.target_load) {
  LIFTOFF_CHECK(config.workers >= 1 && config.target_load > 0 && config.min_load > 0 &&
                    config.min_load <= config.target_load && config.smoothing > 0 && config.smoothing <= 1 &&
                    config.rate_smoothing > 0 && config.rate_smoothing <= 1 && config.dead_band >= 0 &&
                    config.max_step > 0,
                ValueError, "HybridShareController: bad configuration (workers ", config.workers, ", load ",
                config.target_load, ", min load ", config.min_load, ")");
}

double HybridShareController::solve() const {
  const double interval = model_interval();
  // Unknown costs or rate: keep the share (nothing says otherwise yet).
  if (cpu_cost_ < 0 || interval <= 0) return share_;
  const double gpu_cost = gpu_cost_ < 0 ? 0.0 : gpu_cost_;
  const double routable = 1.0 - forced_fraction_;
  if (routable <= 0) return share_;
  // Worker seconds per second available for the routable files, per routable image.
  const double budget = (load_ * config_.workers * interval - forced_fraction_ * cpu_cost_) / routable;
  const double extra = cpu_cost_ - gpu_cost;  // what moving one image to the CPU adds
  if (extra <= 0) return 1.0;
  return std::clamp((budget - gpu_cost) / extra, 0.0, 1.0);
}

double HybridShareController::utilisation(double share) const {
  const double interval = model_interval();
  if (cpu_cost_ < 0 || interval <= 0) return 1.0;  // unknown: take a wait at its word
  const double gpu_cost = gpu_cost_ < 0 ? 0.0 : gpu_cost_;
  const double routable = 1.0 - forced_fraction_;
  const double per_image =
      forced_fraction_ * cpu_cost_ + routable * (share * cpu_cost_ + (1.0 - share) * gpu_cost);
  return per_image / (interval * config_.workers);
}

double HybridShareController::measured_busy() const {
  if (busy_seconds_ < 0 || wall_seconds_ <= 0) return -1.0;
  return busy_seconds_ / (wall_seconds_ * config_.workers);
}

double HybridShareController::model_interval() const {
  const double busy = measured_busy();
  if (busy <= 0 || work_seconds_ <= 0 || images_ <= 0) return interval_;
  return (work_seconds_ / images_) / (busy * config_.workers);
}

void HybridShareController::update(const HybridBatchSample& s) {
  if (++seen_ <= config_.warmup_batches) return;
  const double w = config_.smoothing;
  const int64_t images = s.cpu_images + s.gpu_images;
  if (s.cpu_images > 0) cpu_cost_ = smooth(cpu_cost_, s.cpu_seconds / s.cpu_images, w);
  if (s.gpu_images > 0) gpu_cost_ = smooth(gpu_cost_, s.gpu_seconds / s.gpu_images, w);
  if (images > 0) {
    forced_fraction_ += w * (static_cast<double>(s.forced_cpu) / images - forced_fraction_);
    // Seconds per image, not images per second: next() is called in bursts (a ring refilling after the
    // device released its slots hands out batches a millisecond apart, then waits a step), and a mean of
    // per-batch rates is dominated by the bursts (on the H200 it put ResNet-50's ~6,700 images/s near
    // 100,000 and drove the share to 0). Slowly smoothed for the same reason.
    // A pause of the consumer (a checkpoint save, a capture) is clipped: one long gap must not make the
    // workers look idle for dozens of batches.
    if (s.interval_seconds > 0) {
      double sample = s.interval_seconds / static_cast<double>(images);
      if (interval_ > 0) sample = std::min(sample, kMaxIntervalJump * interval_);
      interval_ = smooth(interval_, sample, config_.rate_smoothing);
    }
    if (s.worker_busy_seconds >= 0 && s.interval_seconds > 0) {
      double wall = s.interval_seconds, busy = s.worker_busy_seconds;
      if (wall_seconds_ > 0 && wall > kMaxWallJump * wall_seconds_) {
        busy *= kMaxWallJump * wall_seconds_ / wall;  // a pause: its busy share kept, its length clipped
        wall = kMaxWallJump * wall_seconds_;
      }
      const double r = config_.rate_smoothing;
      busy_seconds_ = smooth(busy_seconds_, busy, r);
      wall_seconds_ = smooth(wall_seconds_, wall, r);
      work_seconds_ = smooth(work_seconds_, s.cpu_seconds + s.gpu_seconds, r);
      images_ = smooth(images_, static_cast<double>(images), r);
      ++measured_samples_;
    }
  }
  ++updates_;
  // A wait while the workers are far from busy is not theirs: the slot was still in use on the device
  // (back-pressure: the workers could not start the batch) or a decode lane was late. Measured on the H200:
  // ResNet-50 with 4 workers 10% busy saw such waits, and stepping down on them drove the share to 0; on an
  // H100 the model's estimate still took them (18% busy measured): the measured share decides where known.
  const double busy = measured_busy();
  // Until the window spans its smoothing's length, the busy time is of a few hand-outs, and those are a burst
  // (the ring's start-up: 1 ms apart, the workers flat out): it says nothing of the workers' load.
  const bool settling = busy >= 0 && measured_samples_ < kMinMeasuredSamples;
  const bool workers_busy = settling    ? false
                            : busy >= 0 ? busy >= kWaitMinMeasured * config_.target_load
                                        : utilisation(share_) >= kWaitMinUtilisation * config_.target_load;
  if (s.waited_for_workers && workers_busy) {
    // The workers were late: trust them less, and step down now rather than after the smoothing.
    load_ = std::max(config_.min_load, load_ * 0.9);
    target_ = solve();
    share_ = std::max(0.0, share_ - config_.max_step);
    return;
  }
  load_ = std::min(config_.target_load, load_ * 1.01);
  target_ = solve();
  // Workers measured well below the load aimed at (or not measured long enough) have room: no image goes to
  // the GPU that the CPU could decode. On an H100 the share still fell to 0.39 with the workers 32% busy.
  if (busy >= 0 && !workers_busy) target_ = std::max(target_, share_);
  const double gap = target_ - share_;
  // Hysteresis: small gaps leave the share, except to reach an extreme (pure CPU or pure GPU) exactly.
  const bool extreme = target_ <= 0.0 || target_ >= 1.0;
  if (std::abs(gap) <= config_.dead_band && !extreme) return;
  share_ = std::clamp(share_ + std::clamp(gap, -config_.max_step, config_.max_step), 0.0, 1.0);
}

void HybridRouteBudget::reset(int64_t n, double share, double expensive_fraction) {
  quota_ = static_cast<int64_t>(std::llround(std::clamp(share, 0.0, 1.0) * static_cast<double>(n)));
  // A handful of files is not worth an nvJPEG call next to the model (its fixed costs per call, and per new
  // call size): in batches of 2 x kMinGpuCall files or more, a smaller GPU part goes to the CPU too.
  // Then no limit at all: the batch's count is an estimate, and places kept for expensive files that do not
  // come would otherwise still leave files to nvJPEG. The controller aims the workers at target_load (0.8):
  // a share it sets above 1 - kMinGpuCall / n, all on the CPU, loads them at most 0.8 / (1 - 32 / 256), about
  // 91% at batch 256, inside what they sustain, so it does not come back down for this rule's sake.
  all_cpu_ = n >= 2 * kMinGpuCall && n - quota_ < kMinGpuCall;
  if (all_cpu_) quota_ = n;
  const int64_t reserved = std::min<int64_t>(
      quota_, std::llround(std::clamp(expensive_fraction, 0.0, 1.0) * static_cast<double>(n)));
  cheap_quota_ = quota_ - reserved;
  taken_.store(0);
  cheap_taken_.store(0);
}

bool waited_for_workers(const HybridWaitTimes& t) {
  if (t.batch < t.ring_size || t.filled_ns <= t.asked_ns) return false;
  // Released after the previous hand-out: the device held the slot (back-pressure), not the workers.
  return t.previous_handout_ns >= 0 && t.opened_ns <= t.previous_handout_ns &&
         t.asked_ns - t.opened_ns >= t.steady_interval_ns;
}

bool HybridRouteBudget::take(std::atomic<int64_t>& counter, int64_t limit) {
  int64_t now = counter.load();
  while (now < limit) {
    if (counter.compare_exchange_weak(now, now + 1)) return true;
  }
  return false;
}

bool HybridRouteBudget::take_cpu(GpuRoute route) {
  if (all_cpu_) {
    if (route != GpuRoute::cpu) taken_.fetch_add(1);
    return true;
  }
  switch (route) {
    case GpuRoute::cpu:
      return true;
    case GpuRoute::nvjpeg:
      return take(taken_, quota_);
    case GpuRoute::hardware:
      if (!take(cheap_taken_, cheap_quota_)) return false;
      if (take(taken_, quota_)) return true;
      cheap_taken_.fetch_sub(1);
      return false;
  }
  return false;
}

}  // namespace liftoff
