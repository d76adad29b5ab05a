// The CPU + GPU hybrid of DecodeLoader (--decode auto on a CUDA device): per batch, a share of the JPEGs
// nvJPEG could decode goes to the CPU workers (libjpeg-turbo into the pinned pixel pool) and the rest to
// nvJPEG. CPU decoding costs the training GPU nothing, GPU decoding shares the GPU with the model (measured
// on the H200 with ResNet-50: 6,415 images/s decoding on the CPU, 5,604 on the GPU), so the CPU takes as
// much as the workers can decode without making the step wait, and the GPU the rest.
//
// HybridShareController decides the share from measured numbers, fed once per batch by next():
//  - the workers' seconds per image: reading and decoding a file on the CPU (c_cpu), reading and staging
//    one for nvJPEG (c_gpu);
//  - the rate next() hands out images (r, images/s: 1 / the smoothed seconds between images, robust to the
//    bursts in which next() is called);
//  - whether next() waited for the workers (they finished the batch after next() asked for it).
// The workers keep up while r * (forced * c_cpu + routable * (s * c_cpu + (1 - s) * c_gpu)) <= load * W
// (W workers, `load` below 1 for headroom); the target share s is the largest that holds, clamped to [0, 1].
// A wait for the workers lowers `load` (the model overestimated them: other threads share the cores) and
// takes a step down at once; `load` recovers slowly. A wait while the workers are not busy (measured: under
// 0.9 x the target load; else as the model has them: under half of it) is back-pressure (the slot still in
// use on the device) or a late decode lane, and is ignored. Stability: smoothed inputs, a dead band around
// the current share (hysteresis) and a bounded step per batch; the extremes are reached exactly. O(1) per
// batch. Measured busy time rules where it exists: workers measured below 0.9 x the target load, or measured
// over fewer than 16 hand-outs (a start-up burst), never lose files to the GPU; a wait counts only when the
// batch's slot had been free for them since before the previous hand-out and for a steady hand-out interval
// (waited_for_workers).
//
// HybridRouteBudget splits one batch: of round(share * n) CPU places (all n when fewer than kMinGpuCall
// would be left to nvJPEG in a large batch), the JPEGs expensive on the GPU
// (GpuRoute::nvjpeg: progressive and other GPU-hybrid files) are served first, the hardware-engine ones get
// the places not reserved for the expensive files expected in the batch, in the order they are read
// (positions, as the workers take them in order).
#pragma once
#include <atomic>
#include <cstdint>

#include "data/decode/image_decode.h"

namespace liftoff {

struct HybridShareConfig {
  // Before anything was measured: all on the CPU, which costs the training GPU nothing; the share moves to
  // the GPU only once the workers are the bottleneck. (From 0.5 on an H100, ResNet-50 bf16 from 12,000 JPEGs
  // with 4 workers ran at 4,965.8 images/s, share 0.38 on average and the workers 18% busy, against 5,487.7
  // with --decode cpu.)
  double initial_share = 1.0;
  int workers = 1;
  double target_load = 0.8;          // the workers' busy share the controller aims at
  double min_load = 0.3;             // lowest `load` after repeated waits for the workers
  double smoothing = 0.25;           // weight of a new batch in the smoothed costs
  double rate_smoothing = 1.0 / 16;  // weight of a new batch in the smoothed time between images
  double dead_band = 0.05;           // a target this close to the share leaves the share as it is
  double max_step = 0.1;             // largest change of the share per batch
  int warmup_batches = 2;            // the first batches (start-up: empty ring, cold caches) are not measured
};

// One batch's measurements (what the workers spent on it, and how next() received it).
struct HybridBatchSample {
  int64_t cpu_images = 0;         // decoded by the workers (the share's and those only the CPU decodes)
  double cpu_seconds = 0.0;       // worker seconds reading + decoding them
  int64_t gpu_images = 0;         // staged for nvJPEG
  double gpu_seconds = 0.0;       // worker seconds reading + checking + staging them
  int64_t forced_cpu = 0;         // of cpu_images: files only the CPU decodes (PNG, CMYK), not the share's
  double interval_seconds = 0.0;  // since next() handed out the previous batch
  bool waited_for_workers = false;
  // All workers' busy seconds in that interval, as measured (< 0: not measured; the model's estimate serves).
  double worker_busy_seconds = -1.0;
};

class HybridShareController {
 public:
  explicit HybridShareController(HybridShareConfig config = {});
  // The CPU share of the next batches, in [0, 1].
  double share() const { return share_; }
  // The share the last update aimed at (before the dead band and step bound).
  double target() const { return target_; }
  double load() const { return load_; }
  // The smoothed seconds between images handed out (< 0: not measured yet).
  double seconds_per_image() const { return interval_; }
  int64_t updates() const { return updates_; }
  void update(const HybridBatchSample& sample);

 private:
  double solve() const;  // the largest share the workers sustain at `load_`
  // The workers' busy fraction the model predicts at this share (1 while costs or rate are unknown).
  double utilisation(double share) const;
  // Waits for the workers count only when they are at least this share of the target load busy: measured
  // (a busy worker pool is what a wait for the workers looks like; on an H100, ResNet-50 from JPEGs, next()
  // waited on 82% of the step with the workers 33% busy, back-pressure of a device 98 ms behind), else as the
  // model has them.
  static constexpr double kWaitMinMeasured = 0.9;
  static constexpr double kWaitMinUtilisation = 0.5;
  // A gap between hand-outs counts at most this many times the smoothed one.
  static constexpr double kMaxIntervalJump = 4.0;

  HybridShareConfig config_;
  double share_, target_, load_;
  double cpu_cost_ = -1.0, gpu_cost_ = -1.0;  // smoothed seconds per image; < 0: not measured yet
  double forced_fraction_ = 0.0;
  double interval_ = -1.0;  // smoothed seconds between images handed out (1 / rate); < 0: not measured yet
  // Measured, per batch and smoothed with one weight so that their ratios are over one window: the workers'
  // busy seconds, the wall seconds between hand-outs (a pause clipped at kMaxWallJump x the mean, the busy
  // seconds scaled alike), the worker seconds the batches' images cost and their count; < 0: not measured.
  double busy_seconds_ = -1.0, wall_seconds_ = -1.0, work_seconds_ = -1.0, images_ = -1.0;
  static constexpr double kMaxWallJump = 16.0;  // bursts of up to 16 batches stay whole
  double measured_busy() const;                 // < 0: not measured
  // Measured samples before the busy share decides (the window's length at rate_smoothing 1/16).
  static constexpr int64_t kMinMeasuredSamples = 16;
  int64_t measured_samples_ = 0;
  // Seconds per image the model divides by: where the busy share is measured, the one at which the window's
  // own cost per image gives that busy share (independent of the current share: the window's costs and busy
  // time are of the same batches); else the smoothed interval.
  double model_interval() const;
  int64_t seen_ = 0, updates_ = 0;
};

// When next() asked for a batch, and what its slot went through (steady-clock ns).
struct HybridWaitTimes {
  int64_t batch = 0;      // in its epoch
  int64_t ring_size = 0;  // an epoch's first ring-full of batches wait for the start-up
  int64_t asked_ns = 0;   // next() asked for it
  int64_t opened_ns = 0;  // the workers could begin it: next() had released its slot, the device its staging
  int64_t filled_ns = 0;  // the workers finished it
  int64_t previous_handout_ns = -1;  // next() handed out the batch before (-1: none this epoch)
  int64_t steady_interval_ns = 0;    // a batch's time between hand-outs in steady state (0: not known)
};

// Whether a wait of next() was the workers' fault: they finished the batch after next() asked, though its
// slot had been free for them since before the previous hand-out and for at least one steady hand-out
// interval. A slot the device released later (back-pressure: the loader cannot start a batch whose staging
// the device still reads), an epoch's start-up, or the burst after it (the refilled ring handed out in
// milliseconds, the workers given a few milliseconds for the next batch) is not theirs: on an H100
// (ResNet-50, 4 workers ~35% busy) counting such waits sent a third of the files to nvJPEG, next to the
// model.
bool waited_for_workers(const HybridWaitTimes& times);

class HybridRouteBudget {
 public:
  // In batches of 2 x this many files or more, the GPU's part is 0 or at least this many.
  static constexpr int64_t kMinGpuCall = 32;
  // For a batch with n files nvJPEG could decode (expected) at `share`, expecting expensive_fraction of them
  // on nvJPEG's GPU-hybrid engine.
  void reset(int64_t n, double share, double expensive_fraction);
  // Whether the file goes to the CPU (GpuRoute::cpu always; not counted). Thread-safe.
  bool take_cpu(GpuRoute route);
  int64_t quota() const { return quota_; }
  int64_t taken() const { return taken_.load(); }

 private:
  static bool take(std::atomic<int64_t>& counter, int64_t limit);
  int64_t quota_ = 0, cheap_quota_ = 0;
  bool all_cpu_ = false;  // the GPU's part would be under kMinGpuCall files: every file to the CPU
  std::atomic<int64_t> taken_{0}, cheap_taken_{0};
};

}  // namespace liftoff
