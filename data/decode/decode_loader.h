// DecodeLoader: the ImageNet-style BatchSource for image folders of any image sizes. `workers` threads read
// the files of a batch and check them on the host (data/decode/image_decode.h: size bound, JPEG structure
// walk, header, dimension limits) before any decoder sees the bytes, then, per file:
//  - gpu decode: JPEG bytes go to a pinned buffer; a decode thread hands the batch to nvJPEG (batched, the
//    hardware engine for baseline files, GPU-hybrid for the rest: data/decode/nvjpeg_decoder.h) on its own
//    stream, straight into a device arena. What nvJPEG cannot decode as stb_image does (CMYK, PNG, BMP), or
//    refuses, is decoded on the CPU and copied; each route is counted (decode_counts()).
//  - cpu decode: the workers decode (libjpeg-turbo at reduced DCT scale where the crop is much larger than
//    the output, or stb_image) into a pinned buffer, copied to the device arena by the decode thread.
// next() then makes the compute stream wait for the batch and runs ONE kernel (data/decode/crop_cuda.h):
// random resized crop + flip (training) or resize + centre crop (evaluation), bilinear, normalise, cast to
// input_dtype, channels-last. Parameters come from Philox(seed, epoch, sample index) (data/decode/crop.h).
// On a CPU device the workers run the CPU twin instead and next() hands out f32 NCHW tensors.
//
// Order, sharding, skipping and errors as the DataLoader's (data/loader.h): batches come in sampler order;
// with BadSamplePolicy::skip a file that cannot be read, checked or decoded is left out of its batch and
// remembered (counted once, not read again); otherwise next() throws the IOError naming it.
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
#include "data/decode/crop.h"
#include "data/decode/decode_options.h"
#include "data/decode/image_decode.h"
#include "data/image_folder.h"
#include "data/loader.h"

namespace liftoff {

struct DecodeLoaderOptions {
  int64_t batch = 64;
  bool shuffle = true;
  bool drop_last = false;
  int workers = 2;
  int prefetch = 2;
  DecodeMode decode = DecodeMode::auto_;
  NvjpegBackend nvjpeg_backend = NvjpegBackend::auto_;
  CpuJpegDecoder cpu_decoder = CpuJpegDecoder::auto_;
  bool dct_scaling = true;  // cpu decode: decode JPEGs at reduced scale when the crop allows it
  bool train = true;        // random resized crop + flip; false: resize + centre crop
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
};

class DecodeLoader : public BatchSource {
 public:
  // Throws ValueError/DeviceError for bad options, BackendError for --decode gpu without nvJPEG.
  DecodeLoader(std::shared_ptr<const ImageFolder> folder, DecodeLoaderOptions options);
  ~DecodeLoader() override;
  DecodeLoader(const DecodeLoader&) = delete;
  DecodeLoader& operator=(const DecodeLoader&) = delete;

  void start_epoch(int64_t epoch) override;
  bool next(Batch& out) override;
  int64_t batches_per_epoch() const override;
  int64_t tail_batch_size() const override { return options_.drop_last ? 0 : shard_size_ % options_.batch; }

  DecodeMode decode_mode() const { return mode_; }  // resolved (never auto_)
  // "gpu: nvJPEG hardware backend (+ gpu-hybrid ...), libnvjpeg.so.13 (...)" or "cpu: libjpeg-turbo, DCT
  // scaling" (and why auto fell back to the CPU).
  const std::string& describe() const { return description_; }
  const std::vector<int64_t>& order() const { return order_; }
  // The DataLoader's counters (h2d_ms: decode-stream time; augment_ms: the crop kernel).
  LoaderStats stats() const;
  DecodeCounts decode_counts() const;
  std::vector<std::string> skipped_files() const;

 private:
  struct Slot;
  struct Item;
  void init_device();
  void worker_loop(int worker);
  void decode_loop();
  void fill(Slot& slot, const std::vector<int64_t>& indices, int64_t epoch);
  bool read_item(int64_t index, int64_t epoch, Item& item, std::vector<uint8_t>& data);
  void decode_on_device(Slot& slot);
  void issue_decode(Slot& slot);
  void finish_cpu_batch(Slot& slot, const std::vector<std::vector<uint8_t>>& blobs);
  void resolve_timings(Slot& slot) const;
  void hand_out_cuda(Slot& slot, Batch& out);
  bool skip_bad(int64_t index, const std::string& path);
  bool is_bad(int64_t index) const;
  void release_slot_locked(Slot& slot);

  std::shared_ptr<const ImageFolder> folder_;
  DecodeLoaderOptions options_;
  DecodeMode mode_ = DecodeMode::cpu;
  CpuJpegDecoder cpu_decoder_ = CpuJpegDecoder::stb;
  std::string description_;
  int64_t shard_size_ = 0;
  std::vector<float> mean_, stddev_;

  std::vector<int64_t> order_;
  int64_t epoch_ = -1, batches_ = 0, step_ = 0;
  mutable std::mutex mutex_;
  std::condition_variable work_cv_, decode_cv_, ready_cv_;
  bool stop_ = false;
  uint64_t generation_ = 0;
  int64_t next_claim_ = 0, next_decode_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::thread> threads_;
  std::thread decode_thread_;
  struct Device_;
  std::unique_ptr<Device_> device_;  // CUDA state (decoder, stream), null on a CPU target

  mutable std::mutex bad_mutex_;
  std::unordered_set<int64_t> bad_;
  std::vector<std::string> bad_files_;
  mutable LoaderStats stats_;
  mutable DecodeCounts counts_;
  std::unique_ptr<std::atomic<int64_t>[]> worker_busy_ns_;
};

}  // namespace liftoff
