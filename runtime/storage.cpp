#include "runtime/storage.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/config.h"
#include "runtime/error.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/caching_allocator.h"
#endif

namespace liftoff {

namespace {
constexpr size_t kCpuAlignment = 64;

// CPU caching allocator: blocks of at least kMinCached bytes are kept on free lists keyed by their size
// (rounded up to 4 KiB) instead of going back to the C library, so the same activation shapes of the next
// step reuse them without fresh pages (page faults + kernel zeroing) from mmap. Bounded: at most
// LIFTOFF_CPU_CACHE_MB (default 1024) MiB sit idle; a block that would go past it is freed. Thread-safe (one
// mutex; blocks may be freed on any thread). LIFTOFF_CPU_ALLOC_STATS=1 prints the counters at exit.
constexpr size_t kMinCached = size_t{64} << 10;
constexpr size_t kPage = size_t{4} << 10;

class CpuCache {
 public:
  static CpuCache& get() {
    static CpuCache* cache = new CpuCache();  // never destroyed: tensors may be freed during exit
    return *cache;
  }

  void* allocate(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = free_.find(bytes);
      if (it != free_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        idle_bytes_ -= bytes;
        ++hits_;
        return p;
      }
      ++misses_;
    }
    void* p = std::aligned_alloc(kCpuAlignment, bytes);
    if (p == nullptr) {
      release_all();  // give the idle blocks back and try once more
      p = std::aligned_alloc(kCpuAlignment, bytes);
    }
    return p;
  }

  void release(void* p, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (idle_bytes_ + bytes <= limit_) {
        free_[bytes].push_back(p);
        idle_bytes_ += bytes;
        peak_idle_bytes_ = std::max(peak_idle_bytes_, idle_bytes_);
        return;
      }
      ++dropped_;
    }
    std::free(p);
  }

 private:
  CpuCache() {
    limit_ = static_cast<size_t>(*config::get_int(config::Knob::cpu_cache_mb)) << 20;
    if (*config::get_bool(config::Knob::cpu_alloc_stats)) std::atexit([] { get().print_stats(); });
  }

  void release_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [bytes, blocks] : free_) {
      for (void* b : blocks) std::free(b);
      blocks.clear();
    }
    idle_bytes_ = 0;
  }

  void print_stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::fprintf(
        stderr,
        "liftoff cpu allocator: %llu cached allocations reused, %llu from the system, %llu freed past "
        "the %zu MiB bound; idle now %.1f MiB, peak idle %.1f MiB\n",
        static_cast<unsigned long long>(hits_), static_cast<unsigned long long>(misses_),
        static_cast<unsigned long long>(dropped_), limit_ >> 20, static_cast<double>(idle_bytes_) / 1048576.0,
        static_cast<double>(peak_idle_bytes_) / 1048576.0);
  }

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> free_;
  size_t limit_ = 0;
  size_t idle_bytes_ = 0, peak_idle_bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0, dropped_ = 0;
};

std::shared_ptr<void> allocate_cpu(size_t nbytes) {
  const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  const size_t bytes = rounded == 0 ? kCpuAlignment : rounded;
  if (bytes >= kMinCached) {
    const size_t paged = (bytes + kPage - 1) / kPage * kPage;
    void* ptr = CpuCache::get().allocate(paged);
    if (ptr != nullptr)
      return std::shared_ptr<void>(ptr, [paged](void* p) { CpuCache::get().release(p, paged); });
  } else if (void* ptr = std::aligned_alloc(kCpuAlignment, bytes)) {
    return std::shared_ptr<void>(ptr, [](void* p) { std::free(p); });
  }
  throw OutOfMemoryError(str_cat("out of host memory: could not allocate ", nbytes,
                                 " bytes; try a smaller --batch or fewer --workers"));
}
}  // namespace

Storage Storage::allocate(size_t nbytes, Device device) {
  Storage storage;
  storage.nbytes_ = nbytes;
  storage.device_ = device;
  if (device.is_cpu()) {
    storage.data_ = allocate_cpu(nbytes);
    return storage;
  }
#if LIFTOFF_WITH_CUDA
  storage.data_ = cuda::CachingAllocator::get().allocate_shared(nbytes, device.index);
  return storage;
#else
  throw DeviceError(
      "cannot allocate on " + device.str() +
      ": this Liftoff was built without CUDA; rebuild with -DLIFTOFF_CUDA=ON or use --device cpu");
#endif
}

Storage Storage::wrap(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner) {
  Storage storage;
  storage.data_ = std::shared_ptr<void>(std::move(owner), data);
  storage.nbytes_ = nbytes;
  storage.device_ = device;
  return storage;
}

}  // namespace liftoff
