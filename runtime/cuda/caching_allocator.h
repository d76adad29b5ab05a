// Caching device allocator: freed blocks return to a per-device, per-stream cache keyed by size class and
// are reused without cudaMalloc/cudaFree (which synchronize the device). On OOM the cache is released and the
// allocation retried once; then an OutOfMemoryError says what was asked, what is used and what to try.
//
// CUDA graphs: memory a captured graph uses must not be handed to anyone else while the graph may replay.
// While a private pool is active on a (device, stream), allocations there come from that pool, and blocks
// of the pool go back to it when freed (also after the capture); empty_cache() keeps them, and they count as
// allocated from their first allocation on (every replay writes them).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

namespace liftoff::cuda {

struct AllocatorStats {
  size_t allocated = 0;       // bytes handed out and not yet freed
  size_t reserved = 0;        // bytes obtained from cudaMalloc (allocated + cached)
  size_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  size_t peak_reserved = 0;
  uint64_t num_allocs = 0;        // allocate() calls
  uint64_t num_cuda_mallocs = 0;  // of which needed a cudaMalloc
  uint64_t num_ooms = 0;
};

class CachingAllocator {
 public:
  static CachingAllocator& get();

  // Memory on `device`, ordered on `stream` (the current compute stream when null). Freed back to the cache
  // when the last shared_ptr goes away.
  std::shared_ptr<void> allocate_shared(size_t nbytes, int device, cudaStream_t stream = nullptr);
  void* allocate(size_t nbytes, int device, cudaStream_t stream = nullptr);
  void free(void* ptr);

  // Returns every cached (unused) block of the shared pool to the driver (private pools keep theirs).
  void empty_cache();

  // A new private pool id (> 0), for one CUDA graph (or several replayed in a fixed order).
  int create_private_pool();
  // Routes allocations on (device, stream) to `pool` until end_private_pool; one pool per stream at a time.
  void begin_private_pool(int device, cudaStream_t stream, int pool);
  void end_private_pool(int device, cudaStream_t stream);
  // The private pool active on (device, stream); 0 when none (the shared pool).
  int active_private_pool(int device, cudaStream_t stream) const;
  // Gives a pool's memory back to the shared cache of its stream (stream order keeps a graph still running
  // there ahead of any new user); its blocks still held by tensors go there when freed. The pool must not be
  // active. Never throws.
  void dissolve_private_pool(int pool) noexcept;
  AllocatorStats stats(int device) const;
  void reset_peak(int device);
  // Tests: fill every new allocation with 0xFF bytes (NaN for floats) so unwritten outputs show up.
  void set_poison(bool poison) { poison_ = poison; }
  // Rounded size actually reserved for a request (size classes).
  static size_t size_class(size_t nbytes);

 private:
  CachingAllocator() = default;
  struct Block {
    size_t size;
    int device;
    cudaStream_t stream;
    int pool;  // 0: shared
  };
  struct PoolKey {
    int device;
    cudaStream_t stream;
    size_t size;
    int pool;
    bool operator<(const PoolKey& o) const {
      if (pool != o.pool) return pool < o.pool;
      if (device != o.device) return device < o.device;
      if (stream != o.stream) return stream < o.stream;
      return size < o.size;
    }
  };
  void release_cached_locked();
  AllocatorStats& stats_locked(int device);

  bool poison_ = false;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> live_;
  std::map<PoolKey, std::vector<void*>> cache_;
  std::map<std::pair<int, cudaStream_t>, int> active_pool_;  // (device, stream) -> private pool
  int next_pool_ = 1;
  std::set<int> dissolved_pools_;
  mutable std::unordered_map<int, AllocatorStats> stats_;
};

}  // namespace liftoff::cuda
