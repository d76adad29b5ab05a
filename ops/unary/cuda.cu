#include <type_traits>
#include <utility>

#include "ops/unary/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {

// N consecutive elements moved as one (16-byte) load or store.
template <class T, int N>
struct alignas(sizeof(T) * N) Pack {
  T v[N];
};

template <class T, int K>
struct Inputs {
  const T* p[K];
};

// forward: y = f(x); backward: gx = gy * f'(saved). Both in the compute type A (f32 for 16-bit storage).
template <class F>
struct Forward {
  F f;
  template <class A>
  __device__ __forceinline__ A operator()(A x) const {
    return f(x);
  }
};
template <class F>
struct Backward {
  F f;
  template <class A>
  __device__ __forceinline__ A operator()(A saved, A grad_y) const {
    return grad_y * f.grad(saved);
  }
};

template <class T, class Fn, class... V>
__device__ __forceinline__ T apply(const Fn& fn, V... values) {
  return convert<T>(fn(convert<acc_t<T>>(values)...));
}

template <int N, class T, int K, class Fn, int... I>
__device__ __forceinline__ void map_pack(const Fn& fn, int64_t v, T* out, const Inputs<T, K>& in,
                                         std::integer_sequence<int, I...>) {
  const Pack<T, N> packs[K] = {reinterpret_cast<const Pack<T, N>*>(in.p[I])[v]...};
  Pack<T, N> result;
#pragma unroll
  for (int e = 0; e < N; ++e) result.v[e] = apply<T>(fn, packs[I].v[e]...);
  reinterpret_cast<Pack<T, N>*>(out)[v] = result;
}

template <class T, int K, class Fn, int... I>
__device__ __forceinline__ void map_one(const Fn& fn, int64_t i, T* out, const Inputs<T, K>& in,
                                        std::integer_sequence<int, I...>) {
  out[i] = apply<T>(fn, in.p[I][i]...);
}

// out[i] = fn(in[0][i], ..., in[K-1][i]) over n dense elements: grid-stride over packs of N elements (N = 1
// when a pointer is not 16-byte aligned), then the n % N tail, one element per thread.
template <int N, class T, int K, class Fn>
__global__ void map_kernel(Fn fn, int64_t n, T* out, Inputs<T, K> in) {
  const auto seq = std::make_integer_sequence<int, K>{};
  const int64_t packs = n / N;
  LIFTOFF_GRID_STRIDE_LOOP(v, packs) {
    map_pack<N>(fn, v, out, in, seq);
  }
  if constexpr (N > 1) {
    const int64_t i = packs * N + blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
    if (i < n) map_one(fn, i, out, in, seq);
  }
}

// The functor a storage type computes with: 16-bit gelu takes the branch-free erfc form (functors.h).
template <class T, class F>
auto storage_functor(F f) {
  if constexpr (sizeof(T) == 2 && std::is_same_v<F, unary::Gelu>) {
    return unary::GeluHalf{};
  } else {
    return f;
  }
}

bool aligned16(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

template <class T, int K, class Fn>
void launch_map(const Fn& fn, int device, int64_t n, T* out, const Inputs<T, K>& in) {
  if (n == 0) return;
  constexpr int kVec = 16 / sizeof(T);
  bool vectorize = aligned16(out) && n >= kVec;
  for (int j = 0; j < K; ++j) vectorize = vectorize && aligned16(in.p[j]);
  cudaStream_t stream = compute_stream(device);
  if (vectorize) {
    map_kernel<kVec><<<grid_for(n / kVec), kBlock, 0, stream>>>(fn, n, out, in);
  } else {
    map_kernel<1><<<grid_for(n), kBlock, 0, stream>>>(fn, n, out, in);
  }
  LIFTOFF_LAUNCH_CHECK();
}

}  // namespace

void unary_forward(unary::UnaryOp op, const unary::UnaryParams& params, const Tensor& x, const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  dispatch_device_float(x.dtype(), "unary op", [&](auto tag) {
    using T = decltype(tag);
    const Inputs<T, 1> in{{static_cast<const T*>(x.raw_data())}};
    unary::visit_unary(op, params, [&](auto f) {
      const auto g = storage_functor<T>(f);
      launch_map(Forward<decltype(g)>{g}, device, x.numel(), static_cast<T*>(y.raw_data()), in);
    });
  });
}

void unary_backward(unary::UnaryOp op, const unary::UnaryParams& params, const Tensor& saved,
                    const Tensor& grad_y, const Tensor& grad_x) {
  const int device = grad_y.device().index;
  DeviceGuard guard(device);
  dispatch_device_float(grad_y.dtype(), "unary op backward", [&](auto tag) {
    using T = decltype(tag);
    const Inputs<T, 2> in{
        {static_cast<const T*>(saved.raw_data()), static_cast<const T*>(grad_y.raw_data())}};
    unary::visit_unary(op, params, [&](auto f) {
      const auto g = storage_functor<T>(f);
      launch_map(Backward<decltype(g)>{g}, device, grad_y.numel(), static_cast<T*>(grad_x.raw_data()), in);
    });
  });
}

}  // namespace liftoff::cuda
