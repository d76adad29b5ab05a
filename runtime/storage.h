// Storage: a reference-counted block of memory on one device. Tensors are views into a storage.
#pragma once
#include <cstddef>
#include <memory>

#include "runtime/deferred.h"
#include "runtime/device.h"

namespace liftoff {

class Storage {
 public:
  Storage() = default;
  // Allocates nbytes on device: CPU memory is 64-byte aligned; CUDA memory comes from the caching allocator.
  static Storage allocate(size_t nbytes, Device device);
  // Wraps memory owned elsewhere; `owner` keeps it alive (e.g. a pinned host buffer of the loader).
  static Storage wrap(void* data, size_t nbytes, Device device, std::shared_ptr<void> owner);

  // The memory; a deferred write into it (runtime/deferred.h) is issued first.
  void* data() const {
    if (deferred_ && deferred_->pending()) deferred_->run();
    return data_.get();
  }
  // The contents come from `write`, issued on the first data() of this storage or any copy made from now on.
  void defer(std::shared_ptr<DeferredWrite> write) { deferred_ = std::move(write); }
  // The deferred write, or null (pending or not: check pending()).
  DeferredWrite* deferred() const { return deferred_.get(); }

  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  bool defined() const { return data_ != nullptr || nbytes_ == 0; }
  // How many handles share this memory (tensors and views); 1 means the caller's handle is the only one.
  long use_count() const { return data_.use_count(); }

 private:
  std::shared_ptr<void> data_;
  std::shared_ptr<DeferredWrite> deferred_;
  size_t nbytes_ = 0;
  Device device_;
};

}  // namespace liftoff
