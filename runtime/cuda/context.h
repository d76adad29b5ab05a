// Per-device CUDA state: the compute, copy (H2D) and communication streams, and the cuBLAS/cuDNN handles
// bound to the compute stream. Created lazily on first use of a device.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <string>

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

cudaStream_t compute_stream(int device);
cudaStream_t copy_stream(int device);
cudaStream_t comm_stream(int device);
cublasHandle_t cublas_handle(int device);
cudnnHandle_t cudnn_handle(int device);
// Scratch memory for cuBLAS/cuDNN workspaces, grown on demand, owned by the device's context.
void* workspace(int device, size_t nbytes);
// Called when a CUDA graph is captured on the device: from then on a workspace that grows keeps its old
// buffer alive (the graph's nodes name it) instead of returning it to the allocator.
void keep_workspaces_for_graphs(int device);

// Blocks the host until all work queued on the device's streams is done.
void synchronize(int device);

}  // namespace liftoff::cuda
