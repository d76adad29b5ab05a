#include "runtime/cuda/caching_allocator.h"

#include <algorithm>

#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/error.h"

namespace liftoff::cuda {

namespace {
constexpr size_t kSmallLimit = 1 << 20;  // requests up to 1 MiB are rounded to 512 bytes
constexpr size_t kSmallRound = 512;

std::string mib(size_t bytes) {
  return str_cat(bytes / (1024 * 1024), " MiB");
}
}  // namespace

CachingAllocator& CachingAllocator::get() {
  // Leaked on purpose: blocks may be freed by static destructors after main returns.
  static auto* instance = new CachingAllocator();
  return *instance;
}

size_t CachingAllocator::size_class(size_t nbytes) {
  if (nbytes == 0) return kSmallRound;
  if (nbytes <= kSmallLimit) return (nbytes + kSmallRound - 1) / kSmallRound * kSmallRound;
  // Four classes per power of two bounds the waste at 25% while keeping reuse likely.
  size_t power = kSmallLimit;
  while (power * 2 < nbytes) power *= 2;
  const size_t step = power / 4;
  return (nbytes + step - 1) / step * step;
}

AllocatorStats& CachingAllocator::stats_locked(int device) {
  return stats_[device];
}

void* CachingAllocator::allocate(size_t nbytes, int device, cudaStream_t stream) {
  if (stream == nullptr) stream = compute_stream(device);
  const size_t size = size_class(nbytes);
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats& st = stats_locked(device);
  ++st.num_allocs;
  void* ptr = nullptr;
  const auto active = active_pool_.find({device, stream});
  const int pool = active == active_pool_.end() ? 0 : active->second;
  auto it = cache_.find(PoolKey{device, stream, size, pool});
  bool counted = false;  // a private-pool block stays counted as allocated while cached (see free())
  if (it != cache_.end() && !it->second.empty()) {
    counted = pool != 0;
    ptr = it->second.back();
    it->second.pop_back();
  } else {
    DeviceGuard guard(device);
    cudaError_t err = cudaMalloc(&ptr, size);
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      release_cached_locked();
      err = cudaMalloc(&ptr, size);
    }
    if (err == cudaErrorMemoryAllocation) {
      cudaGetLastError();
      ++st.num_ooms;
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      throw OutOfMemoryError(str_cat(
          "CUDA out of memory on cuda:", device, ": tried to allocate ", mib(size), "; ", mib(st.allocated),
          " in use by Liftoff, ", mib(free_bytes), " free of ", mib(total_bytes),
          " on the device. Try a smaller --batch (with --accum to keep the effective batch), or --amp bf16"));
    }
    LIFTOFF_CUDA_CHECK(err);
    ++st.num_cuda_mallocs;
    st.reserved += size;
    st.peak_reserved = std::max(st.peak_reserved, st.reserved);
  }
  if (poison_) LIFTOFF_CUDA_CHECK(cudaMemsetAsync(ptr, 0xFF, size, stream));
  live_[ptr] = Block{size, device, stream, pool};
  if (!counted) st.allocated += size;
  st.peak_allocated = std::max(st.peak_allocated, st.allocated);
  return ptr;
}

std::shared_ptr<void> CachingAllocator::allocate_shared(size_t nbytes, int device, cudaStream_t stream) {
  void* ptr = allocate(nbytes, device, stream);
  return std::shared_ptr<void>(ptr, [this](void* p) { free(p); });
}

void CachingAllocator::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end()) return;
  const Block block = it->second;
  live_.erase(it);
  // A graph's private blocks are written by every replay even while no tensor holds them: they stay
  // "allocated" (in use, unavailable to others), so peaks measured over replays are true. A dissolved pool's
  // blocks are ordinary ones again.
  const bool dissolved = block.pool != 0 && dissolved_pools_.count(block.pool) > 0;
  const int pool = dissolved ? 0 : block.pool;
  if (pool == 0) stats_locked(block.device).allocated -= block.size;
  // Work queued on block.stream that still reads this memory runs before any later use on that stream.
  cache_[PoolKey{block.device, block.stream, block.size, pool}].push_back(ptr);
}

void CachingAllocator::dissolve_private_pool(int pool) noexcept {
  if (pool <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  dissolved_pools_.insert(pool);
  for (auto it = cache_.begin(); it != cache_.end();) {
    if (it->first.pool != pool) {
      ++it;
      continue;
    }
    PoolKey shared = it->first;
    shared.pool = 0;
    std::vector<void*>& into = cache_[shared];
    for (void* p : it->second) {
      into.push_back(p);
      stats_locked(shared.device).allocated -= shared.size;  // counted while it belonged to the graph
    }
    it = cache_.erase(it);
  }
}

int CachingAllocator::create_private_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_pool_++;
}

void CachingAllocator::begin_private_pool(int device, cudaStream_t stream, int pool) {
  LIFTOFF_CHECK(pool > 0, ValueError, "CachingAllocator: private pool ids are > 0, got ", pool);
  std::lock_guard<std::mutex> lock(mutex_);
  const bool inserted = active_pool_.emplace(std::make_pair(device, stream), pool).second;
  LIFTOFF_CHECK(inserted, ValueError, "CachingAllocator: cuda:", device,
                " already has a private pool active on this stream (one graph capture at a time)");
}

void CachingAllocator::end_private_pool(int device, cudaStream_t stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  active_pool_.erase({device, stream});
}

int CachingAllocator::active_private_pool(int device, cudaStream_t stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = active_pool_.find({device, stream});
  return it == active_pool_.end() ? 0 : it->second;
}

void CachingAllocator::release_cached_locked() {
  for (auto& [key, ptrs] : cache_) {
    if (ptrs.empty() || key.pool != 0) continue;  // a graph may still replay on private-pool blocks
    DeviceGuard guard(key.device);
    cudaDeviceSynchronize();  // cached blocks may still be read by queued kernels
    for (void* p : ptrs) {
      cudaFree(p);
      stats_locked(key.device).reserved -= key.size;
    }
    ptrs.clear();
  }
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

AllocatorStats CachingAllocator::stats(int device) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = stats_.find(device);
  return it == stats_.end() ? AllocatorStats{} : it->second;
}

void CachingAllocator::reset_peak(int device) {
  std::lock_guard<std::mutex> lock(mutex_);
  AllocatorStats& st = stats_locked(device);
  st.peak_allocated = st.allocated;
  st.peak_reserved = st.reserved;
}

}  // namespace liftoff::cuda
