// DecodeLoader's private parts, shared by decode_loader.cpp (host side) and decode_loader_cuda.cpp (the
// decode thread and the device hand-out). Not a public header.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "data/decode/decode_loader.h"
#if LIFTOFF_WITH_CUDA
#include "data/decode/nvjpeg_decoder.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/event.h"
#include "runtime/cuda/pinned_allocator.h"
#endif

namespace liftoff {

#if LIFTOFF_WITH_CUDA
namespace decode_detail {
// Pinned host memory that grows; its contents are not kept when it does.
struct PinnedBuffer {
  std::shared_ptr<void> block;
  size_t capacity = 0;
  uint8_t* ensure(size_t n) {
    if (n > capacity) {
      block.reset();
      capacity = std::max(n, capacity + capacity / 2);
      block = cuda::PinnedAllocator::get().allocate_shared(capacity);
    }
    return data();
  }
  uint8_t* data() const { return static_cast<uint8_t*>(block.get()); }
};

// Device memory ordered on one stream that grows (the old block goes back to that stream's cache).
struct DeviceBuffer {
  std::shared_ptr<void> block;
  size_t capacity = 0;
  uint8_t* ensure(size_t n, int device, cudaStream_t stream) {
    if (n > capacity || block == nullptr) {
      block.reset();
      capacity = std::max({n, capacity + capacity / 2, size_t{256}});
      block = cuda::CachingAllocator::get().allocate_shared(capacity, device, stream);
    }
    return data();
  }
  uint8_t* data() const { return static_cast<uint8_t*>(block.get()); }
};
}  // namespace decode_detail
#endif

struct DecodeLoader::Item {
  int64_t index = 0, label = 0;
  bool gpu = false;  // nvJPEG decodes it from the slot's file bytes
  bool hardware = false;
  size_t at = 0, size = 0;  // its file bytes (gpu) or decoded pixels (host) in the slot's staging buffer
  CropDesc desc;            // offset: set when the batch's pixels are laid out
};

struct DecodeLoader::Slot {
  enum class State { free, filling, filled, decoding, ready };
  State state = State::free;
  int64_t batch = -1;
  uint64_t generation = 0;
  int64_t epoch = 0;
  std::exception_ptr error;
  std::vector<Item> items;
  size_t file_bytes = 0, pixel_bytes = 0;  // staged this time
  Tensor input, labels;                    // CPU target: the finished batch
#if LIFTOFF_WITH_CUDA
  decode_detail::PinnedBuffer bytes, pixels, meta;  // meta: labels (i64), then the descriptors
  decode_detail::DeviceBuffer arena, device_meta;
  bool device_busy = false;  // queued device work may still read bytes/pixels/meta: wait for `decoded`
  bool decode_timing = false, crop_timing = false;
  std::unique_ptr<cuda::Event> decode_start, decoded, crop_start, crop_end, consumed;
#endif
};

struct DecodeLoader::Device_ {
#if LIFTOFF_WITH_CUDA
  int device = 0;
  cudaStream_t stream = nullptr;
  std::unique_ptr<cuda::NvjpegDecoder> nvjpeg;
#endif
};

}  // namespace liftoff
