// DecodeLoader's private parts, shared by decode_loader.cpp (host side) and decode_loader_cuda.cpp (the
// decode lanes and the device hand-out). Not a public header.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "data/decode/decode_loader.h"
#include "data/decode/hybrid_route.h"
#if LIFTOFF_WITH_CUDA
#include "data/decode/nvjpeg_decoder.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/event.h"
#endif

namespace liftoff {

namespace decode_detail {

// Host staging memory of one batch that several workers write at once: each reservation is a stable region
// in a chunk (chunks never move; they are kept for the slot's next batches). The regions of a batch, in
// reservation order, form one layout (`at`: the region's offset in it) that the lane copies to the device
// chunk by chunk. Pinned on a CUDA target (the copies and nvJPEG read it asynchronously).
class StagingPool {
 public:
  using Allocate = std::function<std::shared_ptr<void>(size_t)>;
  struct Region {
    uint8_t* data = nullptr;
    size_t at = 0;
  };
  struct Chunk {
    std::shared_ptr<void> block;
    size_t capacity = 0, used = 0;
    size_t start = 0;  // offset of its first byte in the batch's layout
    uint8_t* data() const { return static_cast<uint8_t*>(block.get()); }
  };

  void set_allocator(Allocate allocate) { allocate_ = std::move(allocate); }
  // For a new batch; the chunks stay allocated.
  void reset();
  // A region of n bytes; thread-safe.
  Region reserve(size_t n);
  size_t total() const;  // bytes laid out so far
  // The used chunks of the batch in layout order (call once the workers are done).
  std::vector<const Chunk*> used_chunks() const;

 private:
  static constexpr size_t kChunkBytes = size_t{8} << 20;
  mutable std::mutex mutex_;
  Allocate allocate_;
  std::vector<Chunk> chunks_;
  size_t current_ = 0, total_ = 0;
};

}  // namespace decode_detail

struct DecodeLoader::Item {
  int64_t index = 0, label = 0;
  bool kept = false;  // read and checked (false: skipped or failed)
  bool gpu = false;   // nvJPEG decodes it from the staged file bytes
  bool hardware = false;
  GpuRoute route = GpuRoute::cpu;  // where the GPU path would send it
  bool by_share = false;           // hybrid: nvJPEG could decode it, the CPU share took it
  int64_t read_ns = 0;             // worker time reading, checking, decoding (cpu) and staging it
  const uint8_t* data = nullptr;   // its staged file bytes (gpu) or decoded pixels (host)
  size_t at = 0, size = 0;         // its region in the bytes (gpu) or pixels (host) layout
  CropDesc desc;                   // offset: set when the batch's device layout is known
  std::exception_ptr error;        // the error policy's: rethrown for the first failed position
};

struct DecodeLoader::Slot : RingSlot {
  std::vector<int64_t> indices;  // the batch's samples, in order
  std::vector<Item> items;       // per position while filling; the kept ones once filled
  // Under the ring's mutex: the workers' cursor over positions, how many are filled, how many workers hold
  // one (or finish the batch), and whether the staging may be written (the device finished reading the
  // previous batch of this slot). Dropped (old generation) only when no worker holds a position.
  int64_t next_position = 0, done = 0, busy = 0;
  bool open = false;
  // hybrid: the batch's CPU share and expected share of GPU-hybrid files (set at the claim), its route
  // split, and what the workers measured (summed by the last worker).
  double cpu_share = 0.0, expensive_fraction = 0.0;
  double routable_fraction = 1.0;  // of a batch's files, those nvJPEG could decode (seen so far)
  HybridRouteBudget route_budget;
  HybridBatchSample sample;
  // This batch's route counts, added to the loader's when next() hands the batch out (a batch of an epoch
  // begun early that is never handed out is not counted).
  DecodeCounts routes;
  int64_t released_ns = 0;  // steady clock: when next() handed out its previous batch (the slot free again)
  int64_t opened_ns = 0;    // steady clock: when the workers could begin it (released, and by the device)
  int64_t filled_ns = 0;    // steady clock: when the workers finished it
  decode_detail::StagingPool bytes, pixels;
  Tensor input, labels;  // CPU target: the finished batch
#if LIFTOFF_WITH_CUDA
  std::shared_ptr<void> meta;  // pinned: labels (i64), then the descriptors
  size_t meta_capacity = 0;
  std::shared_ptr<void> arena, device_meta;  // device, ordered on the slot's lane stream
  size_t arena_capacity = 0, device_meta_capacity = 0;
  bool device_busy = false;  // queued device work may still read the staging: wait for `decoded` first
  bool decode_timing = false, crop_timing = false, wait_timing = false;
  std::unique_ptr<cuda::Event> decode_start, decoded, crop_start, crop_end, consumed;
  // On the compute stream around its wait for `decoded`: how long the device waited for this batch.
  std::unique_ptr<cuda::Event> wait_start, wait_end;
#endif
};

// A decode lane: a thread issuing the batches b with b % lanes == its number, on its own stream, with its
// own nvJPEG decoder (the states and the GPU-hybrid stream nvJPEG needs per thread).
struct DecodeLoader::Lane {
  int number = 0;
  int64_t next_batch = 0;  // the next batch it issues (under the ring's mutex)
#if LIFTOFF_WITH_CUDA
  int device = 0;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::NvjpegDecoder> nvjpeg;
#endif
};

}  // namespace liftoff
