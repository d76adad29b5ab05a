#include "runtime/storage.h"

#include <cstdlib>
#include <new>

#include "runtime/error.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/caching_allocator.h"
#endif

namespace liftoff {

namespace {
constexpr size_t kCpuAlignment = 64;

std::shared_ptr<void> allocate_cpu(size_t nbytes) {
  const size_t rounded = (nbytes + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
  void* ptr = std::aligned_alloc(kCpuAlignment, rounded == 0 ? kCpuAlignment : rounded);
  if (ptr == nullptr) {
    throw OutOfMemoryError(str_cat("out of host memory: could not allocate ", nbytes,
                                   " bytes; try a smaller --batch or fewer --workers"));
  }
  return std::shared_ptr<void>(ptr, [](void* p) { std::free(p); });
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
  throw DeviceError("cannot allocate on " + device.str() +
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
