#include "runtime/cuda/context.h"

#include <memory>
#include <mutex>
#include <vector>

#include "runtime/cuda/caching_allocator.h"
#include "runtime/cuda/check.h"
#include "runtime/error.h"
#include "runtime/graph.h"

namespace liftoff::cuda {

namespace {
struct DeviceContext {
  cudaStream_t compute = nullptr;
  cudaStream_t copy = nullptr;
  cudaStream_t comm = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  // Once a graph has been captured on the device, a superseded workspace may still be named by its nodes:
  // it is kept (never reused) instead of freed.
  bool graphs_captured = false;
  std::vector<void*> retired_workspaces;
};

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
    LIFTOFF_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->compute, cudaStreamNonBlocking));
    LIFTOFF_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->copy, cudaStreamNonBlocking));
    LIFTOFF_CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->comm, cudaStreamNonBlocking));
    LIFTOFF_CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    LIFTOFF_CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->compute));
    LIFTOFF_CUDNN_CHECK(cudnnCreate(&ctx->cudnn));
    LIFTOFF_CUDNN_CHECK(cudnnSetStream(ctx->cudnn, ctx->compute));
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

cudaStream_t compute_stream(int device) {
  return context(device).compute;
}
cudaStream_t copy_stream(int device) {
  return context(device).copy;
}
cudaStream_t comm_stream(int device) {
  return context(device).comm;
}
cublasHandle_t cublas_handle(int device) {
  return context(device).cublas;
}
cudnnHandle_t cudnn_handle(int device) {
  return context(device).cudnn;
}

void* workspace(int device, size_t nbytes) {
  DeviceContext& ctx = context(device);
  if (nbytes > ctx.workspace_bytes) {
    // Growing would free the old buffer while captured kernels still name it.
    check_not_capturing("Growing the cuBLAS/cuDNN workspace");
    // Grow geometrically; the old buffer goes back to the cache in stream order, unless a captured graph
    // may use it.
    const size_t grown = std::max(nbytes, ctx.workspace_bytes * 2);
    if (ctx.workspace && ctx.graphs_captured) {
      ctx.retired_workspaces.push_back(ctx.workspace);
    } else if (ctx.workspace) {
      CachingAllocator::get().free(ctx.workspace);
    }
    ctx.workspace = CachingAllocator::get().allocate(grown, device, ctx.compute);
    ctx.workspace_bytes = grown;
  }
  return ctx.workspace;
}

void keep_workspaces_for_graphs(int device) {
  context(device).graphs_captured = true;
}

void synchronize(int device) {
  DeviceGuard guard(device);
  LIFTOFF_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace liftoff::cuda
