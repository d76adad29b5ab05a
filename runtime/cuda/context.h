// Per-device CUDA state: the compute, copy (H2D) and communication streams, and the cuBLAS/cuDNN handles
// bound to the compute stream. Created lazily on first use of a device.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <memory>
#include <string>
#include <type_traits>
#include <typeindex>
#include <typeinfo>

namespace liftoff::cuda {

int device_count();  // 0 when no driver or no device (never throws)

// Makes `device` current for the guard's lifetime.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The stream the calling thread queues compute work on: the device's compute stream, or the lane a
// ConcurrentBranches scope made active (runtime/branches.h).
cudaStream_t compute_stream(int device);
cudaStream_t copy_stream(int device);
cudaStream_t comm_stream(int device);
cublasHandle_t cublas_handle(int device);
// The handle for large GEMMs (matmul's kLargeGemmFlops and up): the same stream, with a workspace of
// LIFTOFF_CUBLAS_WORKSPACE_MB (default 128) of its own, which lets cuBLAS pick split-K kernels. H200, bf16
// bmm 16x1024x4096x1024 forward+backward: 0.646 ms on the default pool, 0.583-0.611 with 128 MiB (PyTorch
// 0.625); not for small GEMMs (ResNet-18's classifier: 0.6% slower a step with a 32 MiB workspace). Made at
// first use; the default handle while that would fall inside a graph capture, or with the knob at 0.
cublasHandle_t cublas_large_gemm_handle(int device);
// That handle's workspace on the calling thread's lane (made with the handle), for other large-GEMM work on
// the same stream; null (bytes 0) when the handle has none.
void* cublas_large_gemm_workspace(int device, size_t* bytes);
cudnnHandle_t cudnn_handle(int device);
// Scratch memory for cuBLAS/cuDNN workspaces, grown on demand, owned by the device's context.
void* workspace(int device, size_t nbytes);
// Called when a CUDA graph is captured on the device: from then on a workspace that grows keeps its old
// buffer alive (the graph's nodes name it) instead of returning it to the allocator.
void keep_workspaces_for_graphs(int device);

// Lanes: side streams for work that runs concurrently with the compute stream (lane 0), e.g. the
// micro-batches of a captured step. Lane k >= 1 has its own stream, cuBLAS handle and workspace; cuDNN's
// handle is rebound to the active lane's stream. prepare_lanes makes lanes 1..count-1 (streams, handles,
// workspaces as large as lane 0's), which must happen outside a graph capture. set_active_lane routes the
// calling thread's compute_stream/handles/workspace of `device` to a lane (0: the device's own).
void prepare_lanes(int device, int count);
int prepared_lanes(int device);  // lanes usable, lane 0 included
cudaStream_t lane_stream(int device, int lane);
void set_active_lane(int device, int lane);
int active_lane(int device);
// Arrival counters for kernels whose last block per slot finishes a reduction (kArrivalCounters u32 slots,
// zero between launches: the last block resets its slot). One set per lane, as launches on one stream never
// overlap; lane k >= 1 gets its set in prepare_lanes, lane 0 on first use.
constexpr int kArrivalCounters = 65535;
unsigned* arrival_counters(int device);

// Per-device state of a higher layer (e.g. ops/conv2d's cuDNN plan cache), held by the device's context so
// that runtime/ never names its type: one object per type and device, made on first use, destroyed with the
// context (before its streams and handles). Thread-safe; `make` runs under the context's extension lock, so
// an extension's constructor must not ask for another extension.
class DeviceExtension {
 public:
  virtual ~DeviceExtension() = default;
};
DeviceExtension& device_extension(int device, std::type_index type,
                                  std::unique_ptr<DeviceExtension> (*make)());
template <class T>
T& device_extension(int device) {
  static_assert(std::is_base_of_v<DeviceExtension, T>, "device_extension<T>: T must derive DeviceExtension");
  return static_cast<T&>(
      device_extension(device, std::type_index(typeid(T)),
                       []() -> std::unique_ptr<DeviceExtension> { return std::make_unique<T>(); }));
}

// Blocks the host until all work queued on the device's streams is done.
void synchronize(int device);

}  // namespace liftoff::cuda
