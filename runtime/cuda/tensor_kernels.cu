#include <cstring>

#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"
#include "runtime/capture.h"
#include "runtime/tensor_kernels.h"

namespace liftoff::kernels::cuda {

using liftoff::cuda::compute_stream;
using liftoff::cuda::convert;
using liftoff::cuda::DeviceGuard;
using liftoff::cuda::dispatch_device_all;
using liftoff::cuda::grid_for;
using liftoff::cuda::kBlock;

namespace {
constexpr int kMaxDims = 8;
struct StridedLayout {
  int dims;
  int64_t shape[kMaxDims];
  int64_t strides[kMaxDims];
};

StridedLayout layout_of(const Tensor& t) {
  LIFTOFF_CHECK(t.dim() <= kMaxDims, ShapeError, "CUDA copy supports up to ", kMaxDims,
                " dimensions, got shape ", shape_str(t.shape()));
  StridedLayout l{};
  l.dims = static_cast<int>(t.dim());
  for (int d = 0; d < l.dims; ++d) {
    l.shape[d] = t.shape()[d];
    l.strides[d] = t.strides()[d];
  }
  return l;
}

__device__ __forceinline__ int64_t strided_offset(const StridedLayout& l, int64_t linear) {
  int64_t off = 0;
  for (int d = l.dims - 1; d >= 0; --d) {
    off += (linear % l.shape[d]) * l.strides[d];
    linear /= l.shape[d];
  }
  return off;
}

template <class S, class D>
__global__ void copy_kernel(const S* src, StridedLayout src_layout, bool src_contiguous, D* dst,
                            StridedLayout dst_layout, bool dst_contiguous, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t s = src_contiguous ? i : strided_offset(src_layout, i);
    const int64_t d = dst_contiguous ? i : strided_offset(dst_layout, i);
    dst[d] = convert<D>(src[s]);
  }
}

template <class T>
__global__ void fill_kernel(T* dst, StridedLayout layout, bool contiguous, T value, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[contiguous ? i : strided_offset(layout, i)] = value;
  }
}

template <class T>
__global__ void accumulate_kernel(T* dst, const T* src, int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    // 16-bit floats add in f32; everything else (f32, f64 and integer counters) adds exactly in its own type.
    if constexpr (liftoff::cuda::IsHalfType<T>::value) {
      dst[i] = convert<T>(convert<float>(dst[i]) + convert<float>(src[i]));
    } else {
      dst[i] = dst[i] + src[i];
    }
  }
}

// Same-device copy with cast and strides, on the device's compute stream.
void device_copy(const Tensor& src, const Tensor& dst) {
  const int device = dst.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const int64_t n = src.numel();
  if (n == 0) return;
  // Both dense in the same layout (contiguous, or both channels-last): element i of one storage is element i
  // of the other, so the copy is linear.
  const bool linear =
      (src.is_contiguous() && dst.is_contiguous()) || (src.is_channels_last() && dst.is_channels_last());
  if (src.dtype() == dst.dtype() && linear) {
    LIFTOFF_CUDA_CHECK(
        cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  dispatch_device_all(src.dtype(), [&](auto src_tag) {
    using S = decltype(src_tag);
    dispatch_device_all(dst.dtype(), [&](auto dst_tag) {
      using D = decltype(dst_tag);
      copy_kernel<S, D><<<grid_for(n), kBlock, 0, stream>>>(
          static_cast<const S*>(src.raw_data()), layout_of(src), linear || src.is_contiguous(),
          static_cast<D*>(dst.raw_data()), layout_of(dst), linear || dst.is_contiguous(), n);
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}
}  // namespace

void copy(const Tensor& src, const Tensor& dst) {
  const Device sd = src.device();
  const Device dd = dst.device();
  if (sd.is_cuda() && dd.is_cuda() && sd == dd) return device_copy(src, dst);
  check_not_capturing("A copy between host and device (e.g. item(), to(cpu), a host tensor as op input)");
  if (sd.is_cpu()) {
    // Host -> device: pack on the host in the source dtype, upload, then cast/scatter on the device.
    const Tensor packed = src.contiguous();
    const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
    Tensor staging = direct ? dst : Tensor::empty(src.shape(), src.dtype(), dd);
    DeviceGuard guard(dd.index);
    cudaStream_t stream = compute_stream(dd.index);
    LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(staging.raw_data(), packed.raw_data(), packed.nbytes(),
                                       cudaMemcpyHostToDevice, stream));
    // The host buffer may be pageable and freed by the caller right after we return.
    LIFTOFF_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!direct) device_copy(staging, dst);
    return;
  }
  if (dd.is_cpu()) {
    // Device -> host: pack on the device in the source dtype, download, then cast on the host.
    Tensor packed = src.is_contiguous() ? src : src.clone();
    const bool direct = dst.is_contiguous() && dst.dtype() == src.dtype();
    Tensor host = direct ? dst : Tensor::empty(src.shape(), src.dtype(), Device::cpu());
    DeviceGuard guard(sd.index);
    cudaStream_t stream = compute_stream(sd.index);
    LIFTOFF_CUDA_CHECK(
        cudaMemcpyAsync(host.raw_data(), packed.raw_data(), packed.nbytes(), cudaMemcpyDeviceToHost, stream));
    LIFTOFF_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!direct) liftoff::kernels::cpu::copy(host, dst);
    return;
  }
  // Device -> other device: pack on the source, peer copy, then cast on the destination.
  Tensor packed = src.is_contiguous() ? src : src.clone();
  Tensor staging = Tensor::empty(src.shape(), src.dtype(), dd);
  liftoff::cuda::synchronize(sd.index);
  {
    DeviceGuard guard(dd.index);
    LIFTOFF_CUDA_CHECK(cudaMemcpyPeerAsync(staging.raw_data(), dd.index, packed.raw_data(), sd.index,
                                           packed.nbytes(), compute_stream(dd.index)));
  }
  device_copy(staging, dst);
}

void fill(const Tensor& dst, double value) {
  const int device = dst.device().index;
  DeviceGuard guard(device);
  const int64_t n = dst.numel();
  if (n == 0) return;
  dispatch_device_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    fill_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<T*>(dst.raw_data()), layout_of(dst), dst.is_contiguous(), convert<T>(value), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void accumulate(const Tensor& dst, const Tensor& src) {
  const int device = dst.device().index;
  DeviceGuard guard(device);
  const int64_t n = dst.numel();
  if (n == 0) return;
  dispatch_device_all(dst.dtype(), [&](auto tag) {
    using T = decltype(tag);
    accumulate_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<T*>(dst.raw_data()), static_cast<const T*>(src.raw_data()), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::kernels::cuda
