#include <cstdio>

#include "ops/common/strided.h"
#include "ops/index/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"
#include "runtime/determinism.h"

namespace liftoff::cuda {

namespace {
// An index outside [0, bound) cannot be reported to the host without a sync: print it and trap.
__device__ __forceinline__ void check_index(int64_t k, int64_t bound) {
  if (k < 0 || k >= bound) {
    printf("liftoff: index %lld out of range [0, %lld) in gather/index_select/scatter_add\n",
           static_cast<long long>(k), static_cast<long long>(bound));
    __trap();
  }
}

// Offsets of element `linear` of the index's shape in target, index and source, the dim coordinate left out
// of target (and returned in coord).
struct Offsets {
  int64_t target, index, source, coord;
};
__device__ __forceinline__ Offsets offsets_except(const Strided& is, const Strided& target,
                                                  const Strided& source, int dim, int64_t linear) {
  Offsets o{0, 0, 0, 0};
  for (int d = is.dims - 1; d >= 0; --d) {
    const int64_t c = linear % is.shape[d];
    linear /= is.shape[d];
    o.index += c * is.strides[d];
    o.source += c * source.strides[d];
    if (d == dim) {
      o.coord = c;
    } else {
      o.target += c * target.strides[d];
    }
  }
  return o;
}

template <class T>
__global__ void gather_kernel(const T* x, Strided xs, const int64_t* index, Strided is, int dim, T* out,
                              int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const Offsets o = offsets_except(is, xs, is, dim, i);
    const int64_t k = index[o.index];
    check_index(k, xs.shape[dim]);
    out[i] = x[o.target + k * xs.strides[dim]];
  }
}

template <class T>
__device__ __forceinline__ void atomic_add(T* address, T value) {
  if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(address), static_cast<unsigned long long>(value));
  } else {
    atomicAdd(address, value);
  }
}

// One thread per index element, atomics into out (f32, f64, i32, i64).
template <class T>
__global__ void scatter_add_atomic_kernel(T* out, Strided os, const int64_t* index, Strided is, const T* src,
                                          Strided ss, int dim, int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const Offsets o = offsets_except(is, os, ss, dim, i);
    const int64_t k = index[o.index];
    check_index(k, os.shape[dim]);
    atomic_add(out + o.target + k * os.strides[dim], src[o.source]);
  }
}

__global__ void check_index_kernel(const int64_t* index, Strided is, int64_t bound, int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    check_index(index[strided_offset(is, i)], bound);
  }
}

// One thread per element of out (contiguous): it adds, in index order, the sources whose index points at it.
template <class T>
__global__ void scatter_add_owner_kernel(T* out, Strided os, const int64_t* index, Strided is, const T* src,
                                         Strided ss, int dim, int64_t n) {
  using A = acc_t<T>;
  LIFTOFF_GRID_STRIDE_LOOP(q, n) {
    int64_t linear = q, index_base = 0, source_base = 0, target = 0;
    bool covered = true;
    for (int d = os.dims - 1; d >= 0; --d) {
      const int64_t c = linear % os.shape[d];
      linear /= os.shape[d];
      if (d == dim) {
        target = c;
        continue;
      }
      covered = covered && c < is.shape[d];
      index_base += c * is.strides[d];
      source_base += c * ss.strides[d];
    }
    if (!covered) continue;
    A acc = convert<A>(out[q]);
    for (int64_t j = 0; j < is.shape[dim]; ++j) {
      if (index[index_base + j * is.strides[dim]] == target)
        acc += convert<A>(src[source_base + j * ss.strides[dim]]);
    }
    out[q] = convert<T>(acc);
  }
}
}  // namespace

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  const int device = out.device().index;
  DeviceGuard guard(device);
  const int64_t n = out.numel();
  const Strided xs = strided_of(x, "gather");
  const Strided is = strided_of(index, "gather");
  dispatch_device_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gather_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(x.raw_data()), xs, index.data<int64_t>(), is, static_cast<int>(dim),
        static_cast<T*>(out.raw_data()), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const int device = out.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const Strided os = strided_of(out, "scatter_add");
  const Strided is = strided_of(index, "scatter_add");
  const Strided ss = strided_of(src, "scatter_add");
  const int64_t* idx = index.data<int64_t>();
  const int d = static_cast<int>(dim);
  dispatch_device_all(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* o = static_cast<T*>(out.raw_data());
    const T* s = static_cast<const T*>(src.raw_data());
    constexpr bool integer_atomic = std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t>;
    constexpr bool float_atomic = std::is_same_v<T, float> || std::is_same_v<T, double>;
    if constexpr (integer_atomic || float_atomic) {
      if (integer_atomic || !deterministic_algorithms()) {
        scatter_add_atomic_kernel<T>
            <<<grid_for(index.numel()), kBlock, 0, stream>>>(o, os, idx, is, s, ss, d, index.numel());
        LIFTOFF_LAUNCH_CHECK();
        return;
      }
    }
    check_index_kernel<<<grid_for(index.numel()), kBlock, 0, stream>>>(idx, is, os.shape[d], index.numel());
    LIFTOFF_LAUNCH_CHECK();
    scatter_add_owner_kernel<T>
        <<<grid_for(out.numel()), kBlock, 0, stream>>>(o, os, idx, is, s, ss, d, out.numel());
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
