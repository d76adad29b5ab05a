// DataLoader: the prefetching BatchSource. A sampler fixes each epoch's order (shuffled from the seed exactly
// like InOrderBatches, or sequential); `workers` threads read, decode and collate uint8 batches into a ring
// of `prefetch` host buffers (pinned on CUDA unless turned off); next() hands batches out in sampler order
// whatever the worker timing.
//
// CUDA target: next() copies the slot's buffers to the device on the copy stream, records an event, makes
// the compute stream wait for it and, in AugmentMode::gpu (or none), runs the augmentation kernel on the
// compute stream. The host never waits for the device in next(); a pinned buffer is refilled only after its
// copy event completed, and that wait (cudaEventSynchronize on that event only) happens on the worker that
// refills it, not on the training thread. On the GPU path Batch::images_u8 stays undefined (the device copy
// lives in a recycled staging buffer); input and labels are fresh device tensors, ready on the compute
// stream.
//
// CPU target: workers also run the augmentation (data/augment.h) and each batch gets fresh host tensors, so a
// batch the caller keeps is never overwritten; images_u8 is set.
//
// The ring of slots and its ordering are data/batch_ring.h's BatchRing (shared with DecodeLoader).
//
// Errors in a worker (a corrupt image, ...) are carried to the consumer and rethrown from next() for the
// batch they belong to. The destructor stops and joins the workers, also mid-epoch.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "data/augment_launch.h"
#include "data/augment_params.h"
#include "data/batch_iterator.h"
#include "data/batch_ring.h"
#include "data/dataset.h"
#include "data/image_folder.h"
#include "data/next_epoch_prefetch.h"

namespace liftoff {

// auto_: gpu on a CUDA target, cpu otherwise. gpu: u8 batches go to the device and the kernel augments
// there. cpu: workers augment on the host and f32 input is copied. none: normalise only (evaluation), on the
// device for CUDA targets, by the workers otherwise.
enum class AugmentMode { auto_, gpu, cpu, none };
// Parses "auto", "gpu", "cpu", "none" (--augment); throws ValueError otherwise.
AugmentMode parse_augment_mode(const std::string& text);
const char* augment_mode_name(AugmentMode mode);

struct LoaderOptions {
  int64_t batch = 64;
  bool shuffle = true;  // per-epoch permutation from (seed, epoch), identical to InOrderBatches'
  // The run's epoch count when known (-1: not known). A shuffling loader begins the next epoch as soon as the
  // last batch of this one is handed out (data/next_epoch_prefetch.h), except after epoch epochs - 1.
  int64_t epochs = -1;
  bool drop_last = false;  // drop the last batch when it is smaller than `batch`
  int workers = 2;         // threads that read, decode and collate (>= 1)
  int prefetch = 2;        // ring depth: batches in flight ahead of the consumer (>= 1)
  bool pin_memory = true;  // CUDA targets: page-locked host buffers (off: pageable, for comparison)
  AugmentMode augment = AugmentMode::auto_;
  AugmentConfig augment_config;
  DType input_dtype = DType::f32;  // gpu/none on CUDA: f32, bf16 or f16; otherwise f32
  uint64_t seed = 0;
  Device device = Device::cpu();
  // Distributed sampler: this process reads shard `rank` of `world_size` of the same per-epoch order (the
  // permutation is identical on every rank: same seed and epoch). Rank r takes positions r, r + W, r + 2W,
  // ...
  int rank = 0;
  int world_size = 1;
  // With world_size > 1. true: the order is padded by repeating its start (PyTorch's DistributedSampler) so
  // every rank gets ceil(N / W) samples and the same number of batches (training ranks stay in step). false:
  // exact, possibly uneven shards, each sample on exactly one rank (sharded evaluation).
  bool even_shards = true;
};

// For the utilization report. Host times from steady_clock; device times from CUDA events read only once
// they have completed (queried, never waited for), so the latest few batches may not be counted yet.
struct LoaderStats {
  int64_t batches = 0;  // handed out by next()
  int64_t images = 0;
  double wait_seconds = 0.0;                // time next() blocked waiting for a worker to finish the batch
  std::vector<double> worker_busy_seconds;  // per worker: reading, decoding, collating (+ CPU augmentation)
  double cpu_augment_seconds = 0.0;         // part of the busy time spent in CPU augmentation/normalisation
  int64_t h2d_bytes = 0;                    // issued host-to-device copies
  // Training-thread time next() spent issuing the copies: microseconds from pinned memory, the copy itself
  // from pageable memory (--no-pin-memory: the driver stages it through its own buffer before returning).
  double h2d_issue_seconds = 0.0;
  double h2d_ms = 0.0;          // copy-stream time of the copies timed so far
  int64_t h2d_timed = 0;        // batches whose copy time is in h2d_ms
  double augment_ms = 0.0;      // compute-stream time of the augmentation kernel
  int64_t augment_timed = 0;    // batches whose kernel time is in augment_ms
  int64_t skipped_samples = 0;  // distinct bad files skipped (image folders, skip policy)
  // The decode pipeline's CPU + GPU hybrid (--decode auto on CUDA): the share of the JPEGs nvJPEG could
  // decode that the CPU decoded, over the run and at the end (< 0: not a hybrid).
  double hybrid_cpu_share_mean = -1.0, hybrid_cpu_share_final = -1.0;
  // Compute-stream time spent waiting for the batches' GPU decode (events around the wait), and how many
  // batches it covers (decode loaders on CUDA).
  double device_wait_ms = 0.0;
  int64_t device_wait_timed = 0;
  // Decode loaders on CUDA: the workers' time blocked before refilling a slot whose staging queued device
  // work still read (back-pressure), summed over the workers.
  double worker_slot_wait_seconds = 0.0;
  int64_t ring_slots = 0;  // decode loaders: the ring's slots (--prefetch rounded up to the decode lanes)
};

// What a loader did between two of its stats() snapshots: the sums (batches, waits, busy and device times)
// as differences, the rest (skips, the hybrid's shares, the ring) as of `now`. The report's loader figures
// cover the measured steps this way, not the warm-up, whose start-up pause (cuDNN's searches, the graph's
// capture) leaves the workers idle with a full ring and would dilute their busy share.
LoaderStats loader_stats_since(const LoaderStats& now, const LoaderStats& before);

class DataLoader : public BatchSource {
 public:
  // In-memory data set: workers gather rows (held by value; tensor handles, no copy of the pixels).
  DataLoader(ImageDataset dataset, LoaderOptions options);
  // Image folder: workers decode files lazily.
  DataLoader(std::shared_ptr<const ImageFolder> folder, LoaderOptions options);
  ~DataLoader() override;
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  void start_epoch(int64_t epoch) override;  // a no-op when that epoch began early (next_epoch_prefetch.h)
  bool next(Batch& out) override;
  // With a skip policy a batch can lose samples, and a batch that loses all of them is left out: then
  // next() returns fewer batches than this.
  int64_t batches_per_epoch() const override;
  int64_t tail_batch_size() const override { return options_.drop_last ? 0 : shard_size_ % options_.batch; }

  // The sample order of the current epoch (this rank's shard when world_size > 1).
  const std::vector<int64_t>& order() const { return prefetch_.order(order_); }
  const LoaderOptions& options() const { return options_; }
  // Samples this rank reads per epoch (size() when not sharded).
  int64_t shard_size() const { return shard_size_; }
  AugmentMode augment_mode() const { return mode_; }  // resolved (never auto_)
  int64_t size() const { return size_; }
  // Copies the counters; resolves CUDA timings that have completed (no sync).
  LoaderStats stats() const;
  void reset_stats();

 private:
  struct Slot;
  void init();
  void init_device_buffers();  // CUDA target: pinned host buffers, device staging, events per slot
  void begin_epoch(int64_t epoch);
  void worker_loop(int worker);
  void fill(Slot& slot, const std::vector<int64_t>& indices, int64_t epoch, int worker);
  void resolve_timings(Slot& slot) const;
  void hand_out_cuda(Slot& slot, Batch& out);
  cuda::AugmentLaunch augment_launch(const Slot& slot, const int64_t* staged_meta, const Tensor& input) const;
  void hand_out_cpu(Slot& slot, Batch& out);

  ImageDataset memory_;                        // in-memory source, or
  std::shared_ptr<const ImageFolder> folder_;  // the lazy one
  LoaderOptions options_;
  AugmentMode mode_ = AugmentMode::cpu;
  int64_t shard_size_ = 0;  // samples per epoch on this rank
  int64_t size_ = 0, channels_ = 0, height_ = 0, width_ = 0, num_classes_ = 0;
  std::vector<float> mean_, stddev_;

  std::vector<int64_t> order_;
  int64_t epoch_ = -1;
  NextEpochPrefetch prefetch_;  // a shuffling loader begins the next epoch when this one's last batch is out
  StallWatch stall_watch_ = stall_watch_from_settings();  // a batch waited for too long: the ring's state
  std::unique_ptr<BatchRing<Slot>> ring_;                 // its mutex also guards stats_
  std::vector<std::thread> threads_;

  // Stats: host counters under the ring's mutex (or atomics for the workers); device timings resolved late.
  mutable LoaderStats stats_;
  std::unique_ptr<std::atomic<int64_t>[]> worker_busy_ns_;
  std::atomic<int64_t> cpu_augment_ns_{0};
};

}  // namespace liftoff
