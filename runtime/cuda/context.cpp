#include "runtime/cuda/context.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <typeindex>
#include <vector>

#include "runtime/capture.h"
#include "runtime/config.h"
#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/check.h"
#include "runtime/error.h"

namespace liftoff::cuda {

namespace {
constexpr int kMaxLanes = 16;

// One stream's compute resources: lane 0 is the device's compute stream, lanes 1.. run concurrent branches.
struct Lane {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cublasHandle_t cublas_large = nullptr;  // large GEMMs: with a workspace of its own, made at first use
  void* large_workspace = nullptr;        // that workspace (also the large-GEMM search's, ops/matmul)
  size_t large_workspace_bytes = 0;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  unsigned* counters = nullptr;  // arrival_counters(); kept for the run
};

struct DeviceContext {
  cudaStream_t copy = nullptr;
  cudaStream_t comm = nullptr;
  cudnnHandle_t cudnn = nullptr;
  // Fixed storage: other threads read lane 0 while the training thread prepares more.
  std::array<Lane, kMaxLanes> lanes{};
  std::atomic<int> lane_count{1};
  // Once a graph has been captured on the device, a superseded workspace may still be named by its nodes:
  // it is kept (never reused) instead of freed.
  bool graphs_captured = false;
  std::vector<void*> retired_workspaces;
  // device_extension(): declared last, so destroyed first (an extension may hold cuDNN/cuBLAS state).
  std::mutex extensions_mutex;
  std::map<std::type_index, std::unique_ptr<DeviceExtension>> extensions;
};

// The lane the calling thread queues on (set_active_lane); one device at a time.
thread_local int t_lane_device = -1;
thread_local int t_lane = 0;

// A cuBLAS handle on `stream`; with `workspace_bytes` > 0 it gets that workspace of its own (a plain
// cudaMalloc, never freed: handles live for the process and captured graphs may name the buffer).
cublasHandle_t make_cublas(cudaStream_t stream, size_t workspace_bytes, void** workspace = nullptr) {
  cublasHandle_t handle = nullptr;
  LIFTOFF_CUBLAS_CHECK(cublasCreate(&handle));
  LIFTOFF_CUBLAS_CHECK(cublasSetStream(handle, stream));  // resets any workspace: set it after
  if (workspace_bytes > 0) {
    void* buffer = nullptr;
    LIFTOFF_CUDA_CHECK(cudaMalloc(&buffer, workspace_bytes));
    LIFTOFF_CUBLAS_CHECK(cublasSetWorkspace(handle, buffer, workspace_bytes));
    if (workspace != nullptr) *workspace = buffer;
  }
  return handle;
}

size_t large_gemm_workspace_bytes() {
  return static_cast<size_t>(config::get_int(config::Knob::cublas_workspace_mb).value_or(128)) << 20;
}

std::mutex& contexts_mutex() {
  static std::mutex m;
  return m;
}

// Leaked on purpose: handles must outlive static destructors that may free tensors.
std::vector<std::unique_ptr<DeviceContext>>& contexts() {
  static auto* v = new std::vector<std::unique_ptr<DeviceContext>>();
  return *v;
}

DeviceContext& context(int device) {
  std::lock_guard<std::mutex> lock(contexts_mutex());
  auto& all = contexts();
  const int count = device_count();
  LIFTOFF_CHECK(device >= 0 && device < count, DeviceError, "cuda:", device,
                " does not exist: this machine has ", count, " CUDA device(s); pick --device cuda:0..",
                count - 1);
  if (all.size() < static_cast<size_t>(count)) all.resize(static_cast<size_t>(count));
  auto& slot = all[static_cast<size_t>(device)];
  if (!slot) {
    DeviceGuard guard(device);
    auto ctx = std::make_unique<DeviceContext>();
    // Non-blocking streams: no implicit sync with the legacy default stream, and capturable as CUDA graphs.
    Lane& main = ctx->lanes[0];
    LIFTOFF_CUDA_CHECK(cudaStreamCreateWithFlags(&main.stream, cudaStreamNonBlocking));
    LIFTOFF_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->copy, cudaStreamNonBlocking));
    LIFTOFF_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->comm, cudaStreamNonBlocking));
    main.cublas = make_cublas(main.stream, 0);
    LIFTOFF_CUDNN_CHECK(cudnnCreate(&ctx->cudnn));
    LIFTOFF_CUDNN_CHECK(cudnnSetStream(ctx->cudnn, main.stream));
    slot = std::move(ctx);
  }
  return *slot;
}
}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

DeviceGuard::DeviceGuard(int device) {
  LIFTOFF_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) LIFTOFF_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_ && previous_ >= 0) cudaSetDevice(previous_);
}

namespace {
Lane& current_lane(DeviceContext& ctx, int device) {
  return ctx.lanes[static_cast<size_t>(t_lane_device == device ? t_lane : 0)];
}

// A lane's workspace of `bytes`: the old buffer goes back to the cache in stream order, unless a captured
// graph may name it (then it is kept, never reused).
void replace_workspace(DeviceContext& ctx, Lane& lane, int device, size_t bytes) {
  if (lane.workspace && ctx.graphs_captured) {
    ctx.retired_workspaces.push_back(lane.workspace);
  } else if (lane.workspace) {
    CachingAllocator::get().free(lane.workspace);
  }
  lane.workspace = CachingAllocator::get().allocate(bytes, device, lane.stream);
  lane.workspace_bytes = bytes;
}

void make_counters(Lane& lane, int device) {
  if (lane.counters != nullptr) return;
  const size_t bytes = sizeof(unsigned) * kArrivalCounters;
  DeviceGuard guard(device);
  void* p = CachingAllocator::get().allocate(bytes, device, lane.stream);
  LIFTOFF_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, lane.stream));
  lane.counters = static_cast<unsigned*>(p);
}
}  // namespace

unsigned* arrival_counters(int device) {
  DeviceContext& ctx = context(device);
  Lane& lane = current_lane(ctx, device);
  // Lane 0's are made on first use, normally an eager step (made inside a capture, the zeroing is a node).
  make_counters(lane, device);
  return lane.counters;
}

cudaStream_t compute_stream(int device) {
  DeviceContext& ctx = context(device);
  return current_lane(ctx, device).stream;
}
cudaStream_t copy_stream(int device) {
  return context(device).copy;
}
cudaStream_t comm_stream(int device) {
  return context(device).comm;
}
cublasHandle_t cublas_handle(int device) {
  DeviceContext& ctx = context(device);
  return current_lane(ctx, device).cublas;
}

cublasHandle_t cublas_large_gemm_handle(int device) {
  DeviceContext& ctx = context(device);
  Lane& lane = current_lane(ctx, device);
  if (lane.cublas_large != nullptr) return lane.cublas_large;
  const size_t bytes = large_gemm_workspace_bytes();
  // Handle creation and cudaMalloc cannot be captured: a shape first met inside a capture keeps the default.
  if (bytes == 0 || graph_capture_active()) return lane.cublas;
  DeviceGuard guard(device);
  lane.cublas_large = make_cublas(lane.stream, bytes, &lane.large_workspace);
  lane.large_workspace_bytes = bytes;
  return lane.cublas_large;
}

void* cublas_large_gemm_workspace(int device, size_t* bytes) {
  cublas_large_gemm_handle(device);
  const Lane& lane = current_lane(context(device), device);
  *bytes = lane.cublas_large != nullptr ? lane.large_workspace_bytes : 0;
  return lane.cublas_large != nullptr ? lane.large_workspace : nullptr;
}
cudnnHandle_t cudnn_handle(int device) {
  return context(device).cudnn;  // set_active_lane keeps it on the active lane's stream
}

void* workspace(int device, size_t nbytes) {
  DeviceContext& ctx = context(device);
  Lane& lane = current_lane(ctx, device);
  if (nbytes > lane.workspace_bytes) {
    // Growing would free the old buffer while captured kernels still name it.
    check_not_capturing("Growing the cuBLAS/cuDNN workspace");
    // Grow geometrically.
    replace_workspace(ctx, lane, device, std::max(nbytes, lane.workspace_bytes * 2));
  }
  return lane.workspace;
}

void prepare_lanes(int device, int count) {
  LIFTOFF_CHECK(count >= 1 && count <= kMaxLanes, ValueError, "prepare_lanes: ", count,
                " lanes asked on cuda:", device, "; 1..", kMaxLanes, " are possible");
  DeviceContext& ctx = context(device);
  const size_t want = ctx.lanes[0].workspace_bytes;
  for (int i = 1; i < count; ++i) {
    Lane& lane = ctx.lanes[static_cast<size_t>(i)];
    if (lane.stream == nullptr || lane.workspace_bytes < want) {
      // Stream and handle creation, and a new workspace, cannot be captured.
      check_not_capturing("Preparing concurrent streams");
    }
    DeviceGuard guard(device);
    if (lane.stream == nullptr) {
      LIFTOFF_CUDA_CHECK(cudaStreamCreateWithFlags(&lane.stream, cudaStreamNonBlocking));
      lane.cublas = make_cublas(lane.stream, 0);
    }
    make_counters(lane, device);
    if (lane.workspace_bytes < want) replace_workspace(ctx, lane, device, want);
  }
  if (count > ctx.lane_count.load()) ctx.lane_count.store(count);
}

int prepared_lanes(int device) {
  return context(device).lane_count.load();
}

cudaStream_t lane_stream(int device, int lane) {
  DeviceContext& ctx = context(device);
  LIFTOFF_CHECK(lane >= 0 && lane < ctx.lane_count.load(), ValueError, "cuda:", device, " has ",
                ctx.lane_count.load(), " prepared lane(s); lane ", lane, " asked (call prepare_lanes first)");
  return ctx.lanes[static_cast<size_t>(lane)].stream;
}

void set_active_lane(int device, int lane) {
  const cudaStream_t stream = lane_stream(device, lane);
  LIFTOFF_CHECK(lane == 0 || t_lane_device < 0 || t_lane_device == device || t_lane == 0, ValueError,
                "set_active_lane: cuda:", t_lane_device, " already has lane ", t_lane,
                " active on this thread (one device's lanes at a time)");
  LIFTOFF_CUDNN_CHECK(cudnnSetStream(context(device).cudnn, stream));
  t_lane_device = lane == 0 ? -1 : device;
  t_lane = lane;
}

int active_lane(int device) {
  return t_lane_device == device ? t_lane : 0;
}

DeviceExtension& device_extension(int device, std::type_index type,
                                  std::unique_ptr<DeviceExtension> (*make)()) {
  DeviceContext& ctx = context(device);
  std::lock_guard<std::mutex> lock(ctx.extensions_mutex);
  std::unique_ptr<DeviceExtension>& slot = ctx.extensions[type];
  if (!slot) slot = make();
  return *slot;
}

void keep_workspaces_for_graphs(int device) {
  context(device).graphs_captured = true;
}

void synchronize(int device) {
  DeviceGuard guard(device);
  LIFTOFF_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace liftoff::cuda
