// Cached pinned (page-locked) host memory for H2D staging. cudaHostAlloc/cudaFreeHost are slow and
// cudaFreeHost synchronizes the device, so freed blocks go back to a cache keyed by size class and are
// reused. Blocks come as shared_ptr<void>, ready for Storage::wrap(ptr, nbytes, Device::cpu(), owner).
//
// The allocator does not track device work: a block handed back while an async copy still reads it would be
// reused too early. Owners keep a block alive until the copy's event completed (the DataLoader does).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace liftoff::cuda {

struct PinnedStats {
  size_t allocated = 0;          // bytes (size classes) handed out and not yet returned
  size_t reserved = 0;           // bytes obtained from cudaHostAlloc (allocated + cached)
  size_t peak_allocated = 0;     // high-water mark of `allocated` since the last reset
  uint64_t num_allocs = 0;       // allocate calls
  uint64_t num_host_allocs = 0;  // of which needed a cudaHostAlloc
};

class PinnedAllocator {
 public:
  static PinnedAllocator& get();

  // Pinned host memory of at least nbytes (portable: usable with every device), returned to the cache when
  // the last shared_ptr goes away. Throws OutOfMemoryError after one retry with the cache emptied.
  std::shared_ptr<void> allocate_shared(size_t nbytes);
  // Frees every cached (unused) block with cudaFreeHost.
  void empty_cache();
  PinnedStats stats() const;
  void reset_peak();
  // Rounded size reserved for a request: powers of two below 1 MiB (at least 512 bytes), then whole MiB.
  static size_t size_class(size_t nbytes);

 private:
  PinnedAllocator() = default;
  void* allocate(size_t nbytes);
  void free(void* ptr);
  void release_cached_locked();

  mutable std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;      // pointer -> size class
  std::map<size_t, std::vector<void*>> cache_;  // size class -> free blocks
  PinnedStats stats_;
};

}  // namespace liftoff::cuda
