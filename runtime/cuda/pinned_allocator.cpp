#include "runtime/cuda/pinned_allocator.h"

#include <cuda_runtime.h>

#include <algorithm>

#include "runtime/cuda/check.h"
#include "runtime/error.h"

namespace liftoff::cuda {

PinnedAllocator& PinnedAllocator::get() {
  // Leaked on purpose: blocks may be returned by static destructors after a function-local static would be
  // gone.
  static auto* allocator = new PinnedAllocator();
  return *allocator;
}

size_t PinnedAllocator::size_class(size_t nbytes) {
  constexpr size_t kMiB = size_t{1} << 20;
  if (nbytes >= kMiB) return (nbytes + kMiB - 1) / kMiB * kMiB;
  size_t size = 512;
  while (size < nbytes) size <<= 1;
  return size;
}

void* PinnedAllocator::allocate(size_t nbytes) {
  const size_t size = size_class(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.num_allocs;
  void* ptr = nullptr;
  auto it = cache_.find(size);
  if (it != cache_.end() && !it->second.empty()) {
    ptr = it->second.back();
    it->second.pop_back();
  } else {
    cudaError_t status = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cached_locked();
      status = cudaHostAlloc(&ptr, size, cudaHostAllocPortable);
      if (status == cudaErrorMemoryAllocation) {
        cudaGetLastError();
        throw OutOfMemoryError(str_cat("out of pinned host memory: could not allocate ", size, " bytes (",
                                       stats_.allocated,
                                       " bytes of pinned memory in use); try a smaller --batch, ",
                                       "a smaller --prefetch or --no-pin-memory"));
      }
    }
    LIFTOFF_CUDA_CHECK(status);
    ++stats_.num_host_allocs;
    stats_.reserved += size;
  }
  live_[ptr] = size;
  stats_.allocated += size;
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return ptr;
}

void PinnedAllocator::free(void* ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;  // not ours; cannot happen through allocate_shared
  stats_.allocated -= it->second;
  cache_[it->second].push_back(ptr);
  live_.erase(it);
}

std::shared_ptr<void> PinnedAllocator::allocate_shared(size_t nbytes) {
  void* ptr = allocate(nbytes);
  return std::shared_ptr<void>(ptr, [this](void* p) { free(p); });
}

void PinnedAllocator::release_cached_locked() {
  for (auto& [size, blocks] : cache_) {
    for (void* p : blocks) {
      cudaFreeHost(p);  // unchecked: freeing cache must not throw halfway through
      stats_.reserved -= size;
    }
    blocks.clear();
  }
  cache_.clear();
}

void PinnedAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

PinnedStats PinnedAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void PinnedAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated = stats_.allocated;
}

}  // namespace liftoff::cuda
