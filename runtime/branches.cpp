#include "runtime/branches.h"

#include <atomic>
#include <deque>
#include <exception>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/error.h"
#include "runtime/stream.h"

#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#endif

namespace liftoff {

struct ConcurrentBranches::Impl {
  Device device = Device::cpu();
  bool forked = false;  // lanes are streams of a CUDA device (false: CPU, or one lane)
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

// The one CUDA-only corner: the caching allocator's private pools exist for CUDA graph capture (lanes forked
// inside a capture allocate from the capture's pool, so the graph owns their memory), and free device
// memory is the driver's figure. Neither has a CPU meaning.
#if LIFTOFF_WITH_CUDA
cudaStream_t cuda_stream(const Stream& s) {
  return static_cast<cudaStream_t>(s.native());
}
int capture_pool(const Stream& main) {
  return cuda::CachingAllocator::get().active_private_pool(main.device().index, cuda_stream(main));
}
void begin_pool(const Stream& lane, int pool) {
  cuda::CachingAllocator::get().begin_private_pool(lane.device().index, cuda_stream(lane), pool);
}
void end_pool(const Stream& lane) {
  cuda::CachingAllocator::get().end_private_pool(lane.device().index, cuda_stream(lane));
}
int lanes_prepared(Device device) {
  return cuda::prepared_lanes(device.index);
}
BranchMemory device_memory(Device device) {
  BranchMemory m;
  cuda::DeviceGuard guard(device.index);
  size_t free_bytes = 0, total_bytes = 0;
  LIFTOFF_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  m.free_bytes = static_cast<int64_t>(free_bytes);
  m.peak_allocated = static_cast<int64_t>(cuda::CachingAllocator::get().stats(device.index).peak_allocated);
  return m;
}
#else
int capture_pool(const Stream&) {
  return 0;
}
void begin_pool(const Stream&, int) {}
void end_pool(const Stream&) {}
int lanes_prepared(Device) {
  return 1;
}
BranchMemory device_memory(Device) {
  return {};
}
#endif

// Events ordering the lanes (no timing), per device, kept for the process like the lanes themselves so that
// the branches of every step reuse them. Index 0..lanes-1: fork and join, then one per recorded shared-state
// access. A deque: growing it keeps references to earlier events valid.
Event& lane_event(Device device, size_t index) {
  static std::mutex mutex;
  static auto* pools = new std::unordered_map<int, std::deque<Event>>();  // leaked, like the CUDA contexts
  std::lock_guard<std::mutex> lock(mutex);
  std::deque<Event>& pool = (*pools)[device.index];
  while (pool.size() <= index) pool.emplace_back(device);
  return pool[index];
}

void fork_lanes(ConcurrentBranches::Impl& b) {
  const Stream main = Stream::lane(b.device, 0);
  Event& forked = lane_event(b.device, 0);
  forked.record(main);
  b.pool = capture_pool(main);
  for (int k = 1; k < b.lanes; ++k) {
    const Stream lane = Stream::lane(b.device, k);
    lane.wait(forked);
    if (b.pool > 0) begin_pool(lane, b.pool);
  }
  b.next_event = static_cast<size_t>(b.lanes);
}

// Never throws: also the unwinding path. Joins every lane it can and returns the first error.
std::exception_ptr join_lanes(ConcurrentBranches::Impl& b) noexcept {
  std::exception_ptr first;
  const auto attempt = [&](auto&& fn) {
    try {
      fn();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  };
  attempt([&] { set_active_lane(b.device, 0); });
  for (int k = 1; k < b.lanes; ++k) {
    attempt([&] {
      const Stream lane = Stream::lane(b.device, k);
      Event& done = lane_event(b.device, static_cast<size_t>(k));
      done.record(lane);
      Stream::lane(b.device, 0).wait(done);
    });
    if (b.pool > 0) attempt([&] { end_pool(Stream::lane(b.device, k)); });
  }
  return first;
}
}  // namespace

ConcurrentBranches::ConcurrentBranches(Device device, int lanes) : impl_(std::make_unique<Impl>()) {
  LIFTOFF_CHECK(lanes >= 1 && lanes <= 16, ValueError, "ConcurrentBranches: ", lanes,
                " lanes asked; 1..16 are possible");
  LIFTOFF_CHECK(t_active == nullptr, ValueError,
                "ConcurrentBranches: this thread already runs concurrent branches (they do not nest)");
  impl_->lanes = lanes;
  if (device.is_cuda() && lanes > 1) {
    impl_->device = device;
    impl_->forked = true;
    prepare_lanes(device, lanes);
    fork_lanes(*impl_);
  } else {
    impl_->lanes = 1;
  }
  t_active = impl_.get();
}

ConcurrentBranches::~ConcurrentBranches() {
  if (!impl_->joined && impl_->forked) join_lanes(*impl_);
  if (t_active == impl_.get()) t_active = nullptr;
}

void ConcurrentBranches::enter(int index) {
  LIFTOFF_CHECK(index >= 0, ValueError, "ConcurrentBranches: branch ", index, " (branches count from 0)");
  LIFTOFF_CHECK(!impl_->joined, ValueError, "ConcurrentBranches: enter after join");
  impl_->current = index % impl_->lanes;
  if (impl_->forked) set_active_lane(impl_->device, impl_->current);
}

void ConcurrentBranches::leave() {
  impl_->current = 0;
  if (impl_->forked) set_active_lane(impl_->device, 0);
}

void ConcurrentBranches::join() {
  if (impl_->joined) return;
  impl_->joined = true;
  impl_->current = 0;
  if (t_active == impl_.get()) t_active = nullptr;
  if (!impl_->forked) return;
  if (std::exception_ptr error = join_lanes(*impl_)) std::rethrow_exception(error);
}

int ConcurrentBranches::lanes() const {
  return impl_->lanes;
}

void prepare_concurrent_lanes(Device device, int lanes) {
  if (device.is_cuda() && lanes > 1) prepare_lanes(device, lanes);
}

BranchMemory branch_memory(Device device) {
  return device.is_cuda() ? device_memory(device) : BranchMemory{};
}

void order_shared_state(const void* key) {
  ConcurrentBranches::Impl* b = t_active;
  if (b == nullptr || !b->forked) return;
  const auto it = b->last_access.find(key);
  if (it == b->last_access.end() || it->second.first == b->current) return;  // same stream: in order
  Stream::lane(b->device, b->current).wait(lane_event(b->device, it->second.second));
}

void record_shared_state(const void* key) {
  ConcurrentBranches::Impl* b = t_active;
  if (b == nullptr || !b->forked) return;
  const size_t index = b->next_event++;
  lane_event(b->device, index).record(Stream::lane(b->device, b->current));
  b->last_access[key] = {b->current, index};
}

namespace detail {
namespace {
thread_local BackwardSideLane* t_side_lane = nullptr;
std::atomic<int64_t> g_side_lane_runs{0};

// The side lane's fork and join events, per device, made once (like lane_event's).
Event& side_lane_event(Device device, bool join) {
  static std::mutex mutex;
  static auto* events = new std::unordered_map<int, std::pair<Event, Event>>();  // leaked, as lane_event's
  std::lock_guard<std::mutex> lock(mutex);
  auto it = events->find(device.index);
  if (it == events->end())
    it = events->emplace(device.index, std::make_pair(Event(device), Event(device))).first;
  return join ? it->second.second : it->second.first;
}

bool side_lane_wanted(Device device) {
  const std::string mode = config::get_string(config::Knob::wgrad_lane).value_or("auto");
  if (mode == "off" || !device.is_cuda() || t_active != nullptr || t_side_lane != nullptr) return false;
  if (graph_capture_active()) return graph_capture_device() == device.index && lanes_prepared(device) >= 2;
  if (mode != "on") return false;
  prepare_lanes(device, 2);  // eager: made on first use
  return true;
}
}  // namespace

BackwardSideLane::BackwardSideLane(Device device, bool allowed) : device_(device) {
  active_ = allowed && side_lane_wanted(device);
  if (active_) t_side_lane = this;
}

BackwardSideLane::~BackwardSideLane() {
  if (t_side_lane == this) t_side_lane = nullptr;
  try {
    join(true);
  } catch (...) {  // unwinding already; the first error is the one that counts
  }
}

std::vector<Tensor> BackwardSideLane::run(std::vector<Tensor> reads,
                                          const std::function<std::vector<Tensor>()>& work) {
  LIFTOFF_CHECK(active_, ValueError, "internal: BackwardSideLane::run on an inactive lane");
  const Stream main = Stream::lane(device_, 0);
  const Stream lane = Stream::lane(device_, 1);
  Event& fork = side_lane_event(device_, false);
  fork.record(main);
  lane.wait(fork);
  if (!pool_begun_) {
    pool_ = capture_pool(main);
    if (pool_ > 0) begin_pool(lane, pool_);  // the lane's temporaries come from the graph's pool
    pool_begun_ = true;
  }
  forked_ = true;
  g_side_lane_runs.fetch_add(1, std::memory_order_relaxed);
  std::vector<Tensor> outputs;
  set_active_lane(device_, 1);
  try {
    outputs = work();
  } catch (...) {
    set_active_lane(device_, 0);
    throw;
  }
  set_active_lane(device_, 0);
  for (Tensor& t : reads) {
    if (!t.defined()) continue;
    held_bytes_ += t.nbytes();
    held_.push_back(std::move(t));
  }
  for (const Tensor& t : outputs) {
    if (!t.defined()) continue;
    pending_.push_back(&t.impl());
    held_.push_back(t);
  }
  return outputs;
}

bool BackwardSideLane::pending(const Tensor& t) const {
  if (!t.defined() || pending_.empty()) return false;
  for (const void* p : pending_) {
    if (p == &t.impl()) return true;
  }
  return false;
}

void BackwardSideLane::join(bool last) {
  if (forked_) {
    Event& joined = side_lane_event(device_, true);
    joined.record(Stream::lane(device_, 1));
    Stream::lane(device_, 0).wait(joined);
    forked_ = false;
  }
  held_.clear();
  pending_.clear();
  held_bytes_ = 0;
  if (last && pool_begun_) {
    if (pool_ > 0) end_pool(Stream::lane(device_, 1));
    pool_begun_ = false;
  }
}

BackwardSideLane* active_side_lane() {
  return t_side_lane;
}

int64_t side_lane_runs() {
  return g_side_lane_runs.load(std::memory_order_relaxed);
}
}  // namespace detail

void prepare_side_lane(Device device) noexcept {
  try {
    if (!device.is_cuda() || config::get_string(config::Knob::wgrad_lane).value_or("auto") == "off") return;
    prepare_lanes(device, 2);
  } catch (...) {  // the lane stays unprepared, so off
  }
}

}  // namespace liftoff
