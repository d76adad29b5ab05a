// Fused softmax / log_softmax. inner == 1 (softmax along the last dim, the common case): rows up to 8192
// values stay in registers (row_tile.cuh: several rows per warp up to 512 values, a warp per row up to 1024,
// 2 to 8 warps beyond, 16-byte packs where the rows allow): one read, the row's max and sum of exp over the
// group, one write. Longer rows: G threads per row loop over it twice (a running (max, sum of exp) per
// thread, then the write). inner > 1: a thread per (outer, inner) column, lanes along inner (coalesced).
// Backward is fused the same way.
#include <algorithm>
#include <type_traits>

#include "ops/common/block_reduce.cuh"
#include "ops/common/device_math.h"
#include "ops/common/row_tile.cuh"
#include "ops/reduce/reducers.h"
#include "ops/softmax/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
template <class T, int V>
struct alignas(sizeof(T) * V) RowPack {
  T v[V];
};

// fn(r, value) for the elements of `row` this thread owns (lane, lane + G, ... in packs of V).
template <int G, int V, class T, class Fn>
__device__ __forceinline__ void for_row(const T* row, int64_t extent, int lane, Fn&& fn) {
  if constexpr (V > 1) {
    const auto* packs = reinterpret_cast<const RowPack<T, V>*>(row);
    for (int64_t k = lane; k < extent / V; k += G) {
      const RowPack<T, V> p = packs[k];
#pragma unroll
      for (int j = 0; j < V; ++j) fn(k * V + j, convert<acc_t<T>>(p.v[j]));
    }
  } else {
    for (int64_t r = lane; r < extent; r += G) fn(r, convert<acc_t<T>>(row[r]));
  }
}

template <class A>
struct SumOp {
  LIFTOFF_HD A identity() const { return A(0); }
  LIFTOFF_HD A combine(A a, A b) const { return a + b; }
};

template <int G, int V, class T>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t extent, bool log) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % G;
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x / G) + threadIdx.x / G;
  const bool active = row < rows;  // every thread stays for the block-wide combine
  const T* in = x + (active ? row : 0) * extent;
  const LogSumExpReducer<A> lse;
  MaxSum<A> s = lse.identity();
  if (active) for_row<G, V>(in, extent, lane, [&](int64_t r, A v) { s = lse.combine(s, lse.map(v, r)); });
  s = group_all_combine<G>(lse, s);
  if (!active) return;
  const A log_sum = math::log_of(s.s);
  T* out = y + row * extent;
  for_row<G, V>(in, extent, lane, [&](int64_t r, A v) {
    const A z = v - s.m;
    out[r] = convert<T>(log ? z - log_sum : math::exp_of(z) / s.s);
  });
}

template <int G, int V, class T>
__global__ void softmax_rows_backward_kernel(const T* y, const T* gy, T* gx, int64_t rows, int64_t extent,
                                             bool log) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % G;
  const int64_t row = blockIdx.x * static_cast<int64_t>(blockDim.x / G) + threadIdx.x / G;
  const bool active = row < rows;
  const int64_t base = (active ? row : 0) * extent;
  A dot = 0;  // sum(gy * y), or sum(gy) for log_softmax
  if (active) {
    for_row<G, V>(gy + base, extent, lane,
                  [&](int64_t r, A g) { dot += log ? g : g * convert<A>(y[base + r]); });
  }
  dot = group_all_combine<G>(SumOp<A>{}, dot);
  if (!active) return;
  for_row<G, V>(gy + base, extent, lane, [&](int64_t r, A g) {
    const A yv = convert<A>(y[base + r]);
    gx[base + r] = convert<T>(log ? g - math::exp_of(yv) * dot : yv * (g - dot));
  });
}

template <class T>
__global__ void softmax_columns_kernel(const T* x, T* y, int64_t outer, int64_t extent, int64_t inner,
                                       bool log) {
  using A = acc_t<T>;
  const LogSumExpReducer<A> lse;
  LIFTOFF_GRID_STRIDE_LOOP(c, outer * inner) {
    const int64_t base = (c / inner) * extent * inner + c % inner;
    MaxSum<A> s = lse.identity();
    for (int64_t r = 0; r < extent; ++r) s = lse.combine(s, lse.map(convert<A>(x[base + r * inner]), r));
    const A log_sum = math::log_of(s.s);
    for (int64_t r = 0; r < extent; ++r) {
      const A z = convert<A>(x[base + r * inner]) - s.m;
      y[base + r * inner] = convert<T>(log ? z - log_sum : math::exp_of(z) / s.s);
    }
  }
}

template <class T>
__global__ void softmax_columns_backward_kernel(const T* y, const T* gy, T* gx, int64_t outer, int64_t extent,
                                                int64_t inner, bool log) {
  using A = acc_t<T>;
  LIFTOFF_GRID_STRIDE_LOOP(c, outer * inner) {
    const int64_t base = (c / inner) * extent * inner + c % inner;
    A dot = 0;
    for (int64_t r = 0; r < extent; ++r) {
      const int64_t i = base + r * inner;
      dot += log ? convert<A>(gy[i]) : convert<A>(gy[i]) * convert<A>(y[i]);
    }
    for (int64_t r = 0; r < extent; ++r) {
      const int64_t i = base + r * inner;
      const A yv = convert<A>(y[i]);
      const A g = convert<A>(gy[i]);
      gx[i] = convert<T>(log ? g - math::exp_of(yv) * dot : yv * (g - dot));
    }
  }
}

// 16-bit storage: exp by the hardware approximation (__expf: relative error ~2^-21, far below the 2^-9 of
// the stored result) and a multiply by 1/sum instead of a division per value, so the register tiles stay
// memory-bound at twice the values per byte; f32 and f64 keep the accurate forms (bit-identical results).
template <class T>
constexpr bool kHalfStorage = sizeof(T) < sizeof(acc_t<T>);

template <class T, class A>
__device__ __forceinline__ A row_exp(A z) {
  if constexpr (kHalfStorage<T>) {
    return __expf(z);
  } else {
    return math::exp_of(z);
  }
}

__device__ __forceinline__ float max_value(float a, float b) {
  return fmaxf(a, b);
}
__device__ __forceinline__ double max_value(double a, double b) {
  return fmax(a, b);
}

// Rows held in registers (RowTile<G, E, V>): softmax or log_softmax of each row.
template <int G, int E, int V, class T>
__global__ void __launch_bounds__(kBlock)
    softmax_tile_kernel(const T* x, T* y, int64_t rows, int64_t extent, bool log) {
  using A = acc_t<T>;
  using Tile = RowTile<G, E, V>;
  __shared__ A scratch[kBlock / 32];
  const int lane = threadIdx.x % G;
  const int64_t row = blockIdx.x * static_cast<int64_t>(Tile::kGroupsPerBlock) + threadIdx.x / G;
  const bool active = row < rows;  // every thread stays for the group's reductions
  const int64_t offset = (active ? row : 0) * extent;
  A v[E];
  Tile::load(x + offset, active ? extent : 0, lane, v, -math::infinity<A>());
  A m = -math::infinity<A>();
#pragma unroll
  for (int e = 0; e < E; ++e) m = max_value(m, v[e]);  // a NaN makes the row NaN through the sum below
  m = group_all_reduce<G>(m, MaxNanOp{}, scratch);
  A sum = A(0);
  if (log) {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      v[e] -= m;
      sum += row_exp<T>(v[e]);  // past the row's end: exp(-inf) = 0
    }
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) {
      v[e] = row_exp<T>(v[e] - m);
      sum += v[e];
    }
  }
  sum = group_all_reduce<G>(sum, AddOp{}, scratch);
  if (!active) return;
  if (log) {
    const A log_sum = math::log_of(sum);
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] -= log_sum;
  } else if constexpr (kHalfStorage<T>) {
    const A inverse = A(1) / sum;
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] *= inverse;
  } else {
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] /= sum;
  }
  Tile::store(y + offset, extent, lane, v);
}

template <int G, int E, int V, class T>
__global__ void __launch_bounds__(kBlock)
    softmax_tile_backward_kernel(const T* y, const T* gy, T* gx, int64_t rows, int64_t extent, bool log) {
  using A = acc_t<T>;
  using Tile = RowTile<G, E, V>;
  __shared__ A scratch[kBlock / 32];
  const int lane = threadIdx.x % G;
  const int64_t row = blockIdx.x * static_cast<int64_t>(Tile::kGroupsPerBlock) + threadIdx.x / G;
  const bool active = row < rows;
  const int64_t offset = (active ? row : 0) * extent;
  const int64_t valid = active ? extent : 0;
  A yv[E], g[E];
  Tile::load(y + offset, valid, lane, yv, A(0));
  Tile::load(gy + offset, valid, lane, g, A(0));
  A dot = A(0);  // sum(gy * y), or sum(gy) for log_softmax
#pragma unroll
  for (int e = 0; e < E; ++e) dot += log ? g[e] : g[e] * yv[e];
  dot = group_all_reduce<G>(dot, AddOp{}, scratch);
  if (!active) return;
#pragma unroll
  for (int e = 0; e < E; ++e) g[e] = log ? g[e] - row_exp<T>(yv[e]) * dot : yv[e] * (g[e] - dot);
  Tile::store(gx + offset, extent, lane, g);
}

// Runs launch(G, E, V) with the register tile that holds rows of `extent`; false for longer rows.
template <class T, class Launch>
bool launch_tile(int64_t extent, std::initializer_list<const void*> pointers, Launch&& launch) {
  return dispatch_row_tile<T>(extent, [&](auto g, auto e) {
    dispatch_pack<T, decltype(e)::value>(extent, pointers, [&](auto v) { launch(g, e, v); });
  });
}

// Launches kernel<G, V> for rows longer than a register tile: a block per row, V = 16-byte packs when
// every row starts aligned.
template <class T, class Launch>
void launch_rows(int64_t rows, int64_t extent, bool aligned, Launch&& launch) {
  constexpr int V = 16 / sizeof(T);
  const bool vector = aligned && extent % V == 0;
  const unsigned blocks = static_cast<unsigned>(rows);
  vector ? launch(std::integral_constant<int, kBlock>{}, std::integral_constant<int, V>{}, blocks)
         : launch(std::integral_constant<int, kBlock>{}, std::integral_constant<int, 1>{}, blocks);
  LIFTOFF_LAUNCH_CHECK();
}

bool aligned16(const Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0;
}
}  // namespace

void softmax_forward(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, bool log,
                     const Tensor& y) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  if (x.numel() == 0) return;
  cudaStream_t stream = compute_stream(device);
  dispatch_device_float(x.dtype(), log ? "log_softmax" : "softmax", [&](auto tag) {
    using T = decltype(tag);
    const T* in = static_cast<const T*>(x.raw_data());
    T* out = static_cast<T*>(y.raw_data());
    const bool tiled = inner == 1 && launch_tile<T>(extent, {in, out}, [&](auto g, auto e, auto v) {
                         constexpr int G = decltype(g)::value;
                         softmax_tile_kernel<G, decltype(e)::value, decltype(v)::value, T>
                             <<<tile_blocks<G>(outer), kBlock, 0, stream>>>(in, out, outer, extent, log);
                         LIFTOFF_LAUNCH_CHECK();
                       });
    if (tiled) return;
    if (inner == 1) {
      launch_rows<T>(outer, extent, aligned16(x), [&](auto g, auto v, unsigned blocks) {
        softmax_rows_kernel<decltype(g)::value, decltype(v)::value, T>
            <<<blocks, kBlock, 0, stream>>>(in, out, outer, extent, log);
      });
    } else {
      softmax_columns_kernel<T>
          <<<grid_for(outer * inner), kBlock, 0, stream>>>(in, out, outer, extent, inner, log);
      LIFTOFF_LAUNCH_CHECK();
    }
  });
}

void softmax_backward(const Tensor& y, const Tensor& gy, int64_t outer, int64_t extent, int64_t inner,
                      bool log, const Tensor& gx) {
  const int device = y.device().index;
  DeviceGuard guard(device);
  if (y.numel() == 0) return;
  cudaStream_t stream = compute_stream(device);
  dispatch_device_float(y.dtype(), log ? "log_softmax backward" : "softmax backward", [&](auto tag) {
    using T = decltype(tag);
    const T* py = static_cast<const T*>(y.raw_data());
    const T* pg = static_cast<const T*>(gy.raw_data());
    T* out = static_cast<T*>(gx.raw_data());
    const bool tiled = inner == 1 && launch_tile<T>(extent, {py, pg, out}, [&](auto g, auto e, auto v) {
                         constexpr int G = decltype(g)::value;
                         softmax_tile_backward_kernel<G, decltype(e)::value, decltype(v)::value, T>
                             <<<tile_blocks<G>(outer), kBlock, 0, stream>>>(py, pg, out, outer, extent, log);
                         LIFTOFF_LAUNCH_CHECK();
                       });
    if (tiled) return;
    if (inner == 1) {
      launch_rows<T>(outer, extent, aligned16(gy), [&](auto g, auto v, unsigned blocks) {
        softmax_rows_backward_kernel<decltype(g)::value, decltype(v)::value, T>
            <<<blocks, kBlock, 0, stream>>>(py, pg, out, outer, extent, log);
      });
    } else {
      softmax_columns_backward_kernel<T>
          <<<grid_for(outer * inner), kBlock, 0, stream>>>(py, pg, out, outer, extent, inner, log);
      LIFTOFF_LAUNCH_CHECK();
    }
  });
}

}  // namespace liftoff::cuda
