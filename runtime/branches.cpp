#include "runtime/branches.h"

#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/error.h"

#if LIFTOFF_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#endif

namespace liftoff {

struct ConcurrentBranches::Impl {
  int device = -1;  // -1: CPU (no streams)
  int lanes = 1;
  int current = 0;  // the lane compute work goes to
  bool joined = false;
  int pool = 0;  // the capture's private pool, shared by the lanes
  // Shared state: the lane that last recorded an access to a key, and the event it recorded.
  std::unordered_map<const void*, std::pair<int, size_t>> last_access;
  size_t next_event = 0;
};

namespace {
thread_local ConcurrentBranches::Impl* t_active = nullptr;
}  // namespace

#if LIFTOFF_WITH_CUDA
namespace {
// Event indices: 0..lanes-1 fork and join, then one per recorded shared-state access.
void fork_lanes(ConcurrentBranches::Impl& b) {
  const cudaStream_t main = cuda::lane_stream(b.device, 0);
  const cudaEvent_t forked = cuda::lane_event(b.device, 0);
  cuda::DeviceGuard guard(b.device);
  LIFTOFF_CUDA_CHECK(cudaEventRecord(forked, main));
  b.pool = cuda::CachingAllocator::get().active_private_pool(b.device, main);
  for (int k = 1; k < b.lanes; ++k) {
    const cudaStream_t lane = cuda::lane_stream(b.device, k);
    LIFTOFF_CUDA_CHECK(cudaStreamWaitEvent(lane, forked, 0));
    if (b.pool > 0) cuda::CachingAllocator::get().begin_private_pool(b.device, lane, b.pool);
  }
  b.next_event = static_cast<size_t>(b.lanes);
}

// Never throws: also the unwinding path. Returns the first error.
cudaError_t join_lanes(ConcurrentBranches::Impl& b) noexcept {
  cudaError_t first = cudaSuccess;
  auto keep = [&](cudaError_t err) {
    if (err != cudaSuccess && first == cudaSuccess) first = err;
  };
  try {
    cuda::set_active_lane(b.device, 0);
    const cudaStream_t main = cuda::lane_stream(b.device, 0);
    cuda::DeviceGuard guard(b.device);
    for (int k = 1; k < b.lanes; ++k) {
      const cudaStream_t lane = cuda::lane_stream(b.device, k);
      const cudaEvent_t done = cuda::lane_event(b.device, static_cast<size_t>(k));
      keep(cudaEventRecord(done, lane));
      keep(cudaStreamWaitEvent(main, done, 0));
      if (b.pool > 0) cuda::CachingAllocator::get().end_private_pool(b.device, lane);
    }
  } catch (const Error&) {
    keep(cudaErrorUnknown);
  }
  return first;
}
}  // namespace
#endif

ConcurrentBranches::ConcurrentBranches(Device device, int lanes) : impl_(std::make_unique<Impl>()) {
  LIFTOFF_CHECK(lanes >= 1 && lanes <= 16, ValueError, "ConcurrentBranches: ", lanes,
                " lanes asked; 1..16 are possible");
  LIFTOFF_CHECK(t_active == nullptr, ValueError,
                "ConcurrentBranches: this thread already runs concurrent branches (they do not nest)");
  impl_->lanes = lanes;
  if (device.is_cuda() && lanes > 1) {
#if LIFTOFF_WITH_CUDA
    impl_->device = device.index;
    cuda::prepare_lanes(device.index, lanes);
    fork_lanes(*impl_);
#endif
  } else {
    impl_->lanes = 1;
  }
  t_active = impl_.get();
}

ConcurrentBranches::~ConcurrentBranches() {
  if (!impl_->joined) {
#if LIFTOFF_WITH_CUDA
    if (impl_->device >= 0) join_lanes(*impl_);
#endif
  }
  if (t_active == impl_.get()) t_active = nullptr;
}

void ConcurrentBranches::enter(int index) {
  LIFTOFF_CHECK(index >= 0, ValueError, "ConcurrentBranches: branch ", index, " (branches count from 0)");
  LIFTOFF_CHECK(!impl_->joined, ValueError, "ConcurrentBranches: enter after join");
  impl_->current = index % impl_->lanes;
#if LIFTOFF_WITH_CUDA
  if (impl_->device >= 0) cuda::set_active_lane(impl_->device, impl_->current);
#endif
}

void ConcurrentBranches::leave() {
  impl_->current = 0;
#if LIFTOFF_WITH_CUDA
  if (impl_->device >= 0) cuda::set_active_lane(impl_->device, 0);
#endif
}

void ConcurrentBranches::join() {
  if (impl_->joined) return;
  impl_->joined = true;
  impl_->current = 0;
  if (t_active == impl_.get()) t_active = nullptr;
#if LIFTOFF_WITH_CUDA
  if (impl_->device >= 0) LIFTOFF_CUDA_CHECK(join_lanes(*impl_));
#endif
}

int ConcurrentBranches::lanes() const {
  return impl_->lanes;
}

void prepare_concurrent_lanes(Device device, int lanes) {
#if LIFTOFF_WITH_CUDA
  if (device.is_cuda() && lanes > 1) cuda::prepare_lanes(device.index, lanes);
#else
  (void)device;
  (void)lanes;
#endif
}

BranchMemory branch_memory(Device device) {
  BranchMemory m;
#if LIFTOFF_WITH_CUDA
  if (!device.is_cuda()) return m;
  cuda::DeviceGuard guard(device.index);
  size_t free_bytes = 0, total_bytes = 0;
  LIFTOFF_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  m.free_bytes = static_cast<int64_t>(free_bytes);
  m.peak_allocated = static_cast<int64_t>(cuda::CachingAllocator::get().stats(device.index).peak_allocated);
#else
  (void)device;
#endif
  return m;
}

void order_shared_state(const void* key) {
  ConcurrentBranches::Impl* b = t_active;
  if (b == nullptr || b->device < 0) return;
#if LIFTOFF_WITH_CUDA
  const auto it = b->last_access.find(key);
  if (it == b->last_access.end() || it->second.first == b->current) return;  // same stream: in order
  cuda::DeviceGuard guard(b->device);
  LIFTOFF_CUDA_CHECK(cudaStreamWaitEvent(cuda::lane_stream(b->device, b->current),
                                         cuda::lane_event(b->device, it->second.second), 0));
#endif
}

void record_shared_state(const void* key) {
  ConcurrentBranches::Impl* b = t_active;
  if (b == nullptr || b->device < 0) return;
#if LIFTOFF_WITH_CUDA
  const size_t index = b->next_event++;
  cuda::DeviceGuard guard(b->device);
  LIFTOFF_CUDA_CHECK(
      cudaEventRecord(cuda::lane_event(b->device, index), cuda::lane_stream(b->device, b->current)));
  b->last_access[key] = {b->current, index};
#endif
}

}  // namespace liftoff
