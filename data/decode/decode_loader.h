// DecodeLoader: the ImageNet-style BatchSource for image folders of any image sizes. `workers` threads read
// the files and check them on the host (data/decode/image_decode.h: size bound, JPEG structure walk, header,
// dimension limits) before any decoder sees the bytes. Workers share the files of the oldest batches (a batch
// is not one worker's job), so the first batch of an epoch is ready after its files' share of the work. Per
// file:
//  - gpu decode: the worker stages the JPEG bytes in the slot's pinned pool; `decode_lanes` decode lanes
//  (each
//    a thread with its own nvJPEG decoder states and streams) issue whole batches round-robin: batch b goes
//    to lane b % lanes, so several batches decode at once and the host phases of nvJPEG (parsing, Huffman
//    decoding of the CPU-assisted engines) run on several threads. nvJPEG takes baseline files on the
//    hardware engine (in calls of `hardware_batch` images) and the rest on GPU-hybrid, on two streams of the
//    lane (data/decode/nvjpeg_decoder.h), straight into the slot's device arena. What nvJPEG cannot decode as
//    stb_image does (CMYK, PNG, BMP), or refuses, is decoded on the CPU and copied; each route is counted.
//  - cpu decode: the workers decode (libjpeg-turbo at reduced DCT scale where the crop is much larger than
//    the output, or stb_image) into the slot's pinned pool, copied to the device arena by its lane.
//  - hybrid (--decode auto on a CUDA device): per batch a share of the JPEGs nvJPEG could take is decoded
//    as cpu decode does, the rest as gpu decode does, in one batch; the share follows what the workers
//    sustain without making the step wait (data/decode/hybrid_route.h), updated by next() in O(1).
//    With `deterministic` auto takes one fixed route instead (the decoders differ in the last levels).
// next() then makes the compute stream wait for the batch's event (never the host) and runs ONE kernel
// (data/decode/crop_cuda.h): random resized crop + flip (training) or resize + centre crop (evaluation),
// bilinear, normalise, cast to input_dtype, channels-last; it overlaps the lanes decoding the next batches.
// Parameters come from Philox(seed, epoch, sample index) (data/decode/crop.h), whatever the timing.
// On a CPU device the workers run the CPU twin instead and next() hands out f32 NCHW tensors.
//
// Order, sharding, skipping and errors as the DataLoader's (data/loader.h; the same BatchRing): batches come
// in sampler order; with BadSamplePolicy::skip a file that cannot be read, checked or decoded is left out of
// its batch and remembered (counted once, not read again); otherwise next() throws the IOError naming the
// first bad file of the batch.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "data/batch_iterator.h"
#include "data/batch_ring.h"
#include "data/decode/crop.h"
#include "data/decode/decode_options.h"
#include "data/decode/image_decode.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "data/next_epoch_prefetch.h"

namespace liftoff {

namespace cuda {
struct JpegDecodeJob;
}
class HybridRouteBudget;
class HybridShareController;

struct DecodeLoaderOptions {
  int64_t batch = 64;
  bool shuffle = true;
  int64_t epochs =
      -1;  // the run's epoch count when known: as LoaderOptions::epochs (no early start after it)
  bool drop_last = false;
  int workers = 2;
  int prefetch = 2;  // batches in flight (rounded up to a multiple of decode_lanes on a CUDA target)
  // CUDA target: batches issued to the GPU at once, one thread + nvJPEG states each. On the H200, 224 px
  // crops of photographs, 1 / 2 / 4 lanes decoded 11,341 / 19,977 / 26,687 images/s alone (docs/perf.md);
  // next to a training ResNet-50 a batch took 157 ms on its lane, so 4 lanes left 12% of headroom over the
  // model's 44 ms step and the step waited for input 11% of the time. 6 leaves about 2x.
  int decode_lanes = 6;
  // gpu decode: images per call of the hardware decoder (0: all of a batch's at once; -1: its engines x
  // cores, as nvJPEG reports them), and the share of the hardware-decodable images it gets (the rest go to
  // the GPU-hybrid engine, which then decodes at the same time on its own stream).
  int hardware_batch = 0;
  double hardware_share = 1.0;
  DecodeMode decode = DecodeMode::auto_;
  NvjpegBackend nvjpeg_backend = NvjpegBackend::auto_;
  CpuJpegDecoder cpu_decoder = CpuJpegDecoder::auto_;
  bool dct_scaling = true;  // cpu decode: decode JPEGs at reduced scale when the crop allows it
  // hybrid: a fixed CPU share in [0, 1] of the JPEGs nvJPEG could decode; < 0: adaptive.
  double cpu_share = -1.0;
  // Reproducible pixels: auto takes one fixed route instead of the hybrid: the CPU with 2 or more workers
  // (libjpeg-turbo gives the same pixels on every machine), else nvJPEG (--deterministic).
  bool deterministic = false;
  bool train = true;  // random resized crop + flip; false: resize + centre crop
  ResizedCropConfig crop;
  int64_t channels = 3;             // output channels: 3 (RGB) or 1 (luma)
  std::vector<float> mean, stddev;  // empty: ImageNet's for 3 channels, 0.5 / 0.25 for 1
  DType input_dtype = DType::f32;   // CUDA: f32, bf16 or f16 (the autocast dtype); CPU: f32
  bool channels_last = true;        // CUDA output layout
  BadSamplePolicy on_bad_sample = BadSamplePolicy::error;
  ImageLimits limits;
  uint64_t seed = 0;
  Device device = Device::cpu();
  int rank = 0, world_size = 1;
  bool even_shards = true;
};

struct DecodeCounts {
  int64_t hardware = 0;       // nvJPEG's primary engine (hardware backend where present)
  int64_t gpu_hybrid = 0;     // nvJPEG's GPU-hybrid engine
  int64_t cpu = 0;            // decoded by the CPU: cpu mode, or files nvJPEG does not take (PNG, CMYK)
  int64_t cpu_fallback = 0;   // JPEGs nvJPEG refused, decoded by the CPU instead
  int64_t batch_retries = 0;  // nvJPEG batches retried image by image
  int64_t skipped = 0;        // distinct bad files left out
  double decode_ms = 0.0;     // decode-stream time (copies + nvJPEG) of the batches timed so far
  int64_t decode_timed = 0;
  // hybrid: files nvJPEG could decode (the share's base), those of them the share gave the CPU (also in
  // `cpu`), and the share at the end (< 0: not a hybrid loader).
  int64_t hybrid_routable = 0;
  int64_t hybrid_cpu = 0;
  double hybrid_share = -1.0;
  // Adds another batch's route counts (the integer counts; timings and the share stay).
  void add_routes(const DecodeCounts& o) {
    hardware += o.hardware;
    gpu_hybrid += o.gpu_hybrid;
    cpu += o.cpu;
    cpu_fallback += o.cpu_fallback;
    batch_retries += o.batch_retries;
    hybrid_routable += o.hybrid_routable;
    hybrid_cpu += o.hybrid_cpu;
  }
  double hybrid_mean_share() const {
    return hybrid_routable > 0 ? static_cast<double>(hybrid_cpu) / static_cast<double>(hybrid_routable)
                               : -1.0;
  }
};

class DecodeLoader : public BatchSource {
 public:
  // Throws ValueError/DeviceError for bad options, BackendError for --decode gpu without nvJPEG.
  DecodeLoader(std::shared_ptr<const ImageFolder> folder, DecodeLoaderOptions options);
  ~DecodeLoader() override;
  DecodeLoader(const DecodeLoader&) = delete;
  DecodeLoader& operator=(const DecodeLoader&) = delete;

  void start_epoch(int64_t epoch) override;  // a no-op when that epoch began early (next_epoch_prefetch.h)
  bool next(Batch& out) override;
  int64_t batches_per_epoch() const override;
  int64_t tail_batch_size() const override { return options_.drop_last ? 0 : shard_size_ % options_.batch; }

  DecodeMode decode_mode() const { return mode_; }  // resolved (never auto_)
  // "gpu: nvJPEG hardware backend (+ gpu-hybrid ...), libnvjpeg.so.13 (...)" or "cpu: libjpeg-turbo, DCT
  // scaling" (and why auto fell back to the CPU).
  const std::string& describe() const { return description_; }
  const std::vector<int64_t>& order() const { return prefetch_.order(order_); }
  // The DataLoader's counters (h2d_ms: decode-stream time; augment_ms: the crop kernel).
  LoaderStats stats() const;
  DecodeCounts decode_counts() const;
  std::vector<std::string> skipped_files() const;

 private:
  struct Slot;
  struct Item;
  struct Lane;
  using Ring = BatchRing<Slot>;
  void validate_options() const;
  void init_device();
  void begin_epoch(int64_t epoch);
  void worker_loop(int worker);
  Slot* next_work_locked(int64_t* position);
  bool stale(const Slot& slot) const;  // under the ring's lock: its generation is over
  int64_t open_batch(Slot& slot);      // returns the nanoseconds it waited for the device
  void fill_item(Slot& slot, int64_t position);
  void finish_batch(Slot& slot);
  bool read_item(int64_t index, int64_t epoch, Item& item, HybridRouteBudget* budget);
  void resolve_mode();
  std::string cpu_description() const;
  void begin_hybrid_batch(Slot& slot);             // under the ring's lock, when a batch is claimed
  void feed_hybrid(Slot& slot, int64_t asked_ns);  // under the ring's lock, when next() hands it out
  double hybrid_share_locked() const;              // the current CPU share; < 0: not a hybrid
  void finish_cpu_batch(Slot& slot);
  void lane_loop(int lane);
  void decode_on_device(Slot& slot, Lane& lane);
  void issue_decode(Slot& slot, Lane& lane);
  int64_t rescue_refused(Slot& slot, Lane& lane, const std::vector<cuda::JpegDecodeJob>& jobs,
                         const std::vector<size_t>& job_item);
  void resolve_timings(Slot& slot) const;
  void hand_out_cuda(Slot& slot, Batch& out);
  bool skip_bad(int64_t index, const std::string& reason);  // records it in the folder; returns false
  bool is_bad(int64_t index) const;

  std::shared_ptr<const ImageFolder> folder_;
  DecodeLoaderOptions options_;
  DecodeMode mode_ = DecodeMode::cpu;
  CpuJpegDecoder cpu_decoder_ = CpuJpegDecoder::stb;
  std::string description_;
  std::string mode_note_;  // why auto took a fixed route (deterministic)
  int64_t shard_size_ = 0;
  std::vector<float> mean_, stddev_;

  std::vector<int64_t> order_;
  int64_t epoch_ = -1;
  NextEpochPrefetch prefetch_;  // a shuffling loader begins the next epoch when this one's last batch is out
  StallWatch stall_watch_;      // a batch waited for too long: the ring's and the workers'/lanes' state
  std::string stall_details_locked() const;
  std::unique_ptr<Ring> ring_;  // its mutex also guards stats_ and counts_
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<Lane>> lanes_;  // CUDA target: the decode lanes; empty on a CPU target
  std::vector<std::thread> lane_threads_;

  mutable LoaderStats stats_;
  mutable DecodeCounts counts_;
  // hybrid (under the ring's lock): the share's controller, what the routes saw so far, the last hand-out.
  std::unique_ptr<HybridShareController> hybrid_;
  int64_t routable_seen_ = 0, expensive_seen_ = 0, files_seen_ = 0;
  int64_t last_handout_ns_ = -1;    // steady clock, this epoch; < 0: none yet
  int64_t busy_at_handout_ns_ = 0;  // the workers' busy time summed, at that hand-out
  std::unique_ptr<std::atomic<int64_t>[]> worker_busy_ns_;
  std::atomic<int64_t> worker_slot_wait_ns_{0};  // all workers: waits for the device to release a slot
};

}  // namespace liftoff
