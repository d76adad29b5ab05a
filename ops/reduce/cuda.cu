#include <algorithm>
#include <type_traits>

#include "ops/common/block_reduce.cuh"
#include "ops/common/elementwise.cuh"
#include "ops/reduce/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
// ---- reductions over one (possibly merged) dimension of x [outer, extent, inner] -------------------------
// inner == 1 ("rows"): G threads per row (a warp, or the whole block for long rows), 16-byte loads where the
// rows are aligned. inner > 1 ("columns"): a 32 x 4 block per 32 * C adjacent columns, lanes along inner
// (coalesced; C columns per thread read as one pack when the columns allow), the 4 rows of threads striding
// the extent, each with 4 rows' loads in flight. amax/amin without indices use a value-only reducer. Either
// may split the extent over gridDim.y blocks that write partial states, merged in order by
// reduce_partials_kernel. All orders depend only on the shape.
constexpr int kColumnsX = 32;
constexpr int kColumnsY = 4;
constexpr int kColumnThreads = kColumnsX * kColumnsY;
constexpr int kTargetBlocks = 1024;     // enough blocks to fill the GPU; fixed so results do not depend on it
constexpr int kColumnRowsInFlight = 4;  // loads a column thread issues before combining them
constexpr int kPartialsInFlight = 4;    // partial states a lane of reduce_partials_kernel loads at once

// Reducers whose map is the value itself (sum/mean, amax/amin): their column kernel fits 8 blocks of 128
// threads an SM (64 registers, no spills), so the kTargetBlocks blocks of a large column reduction run as
// one wave on an H200's 132 SMs (at 48 registers, 5 blocks of 256 an SM made it 1.55 waves); the others
// (pow, exp, Welford, indices) take the registers they need.
template <class R>
struct LightReducer : std::false_type {};
template <class A>
struct LightReducer<SumReducer<A>> : std::true_type {};
template <class A, bool kMax>
struct LightReducer<ValueExtremeReducer<A, kMax>> : std::true_type {};

template <class T, class R>
struct ReduceJob {
  const T* x;
  int64_t outer, extent, inner;
  int64_t chunk;  // extent elements per split
  int splits;
  R reducer;
  T* values;                   // may be null
  int64_t* indices;            // may be null
  typename R::State* partial;  // [outer * inner, splits] when splits > 1
};

template <class T, class R>
__device__ __forceinline__ void write_state(const ReduceJob<T, R>& job, int64_t column, int split,
                                            typename R::State s) {
  if (job.splits > 1) {
    job.partial[column * job.splits + split] = s;
    return;
  }
  if (job.values != nullptr) job.values[column] = convert<T>(job.reducer.value(s));
  if (job.indices != nullptr) job.indices[column] = job.reducer.index(s);
}

// G threads per row (32: a warp, 8 rows per block; kBlock: one row per block); V elements per load.
template <int G, int V, class T, class R>
__global__ void reduce_rows_kernel(ReduceJob<T, R> job) {
  using A = acc_t<T>;
  const int lane = threadIdx.x % G;
  const int64_t row = blockIdx.x * static_cast<int64_t>(kBlock / G) + threadIdx.x / G;
  const int split = blockIdx.y;
  typename R::State s = job.reducer.identity();
  if (row < job.outer) {
    const T* p = job.x + row * job.extent;
    const int64_t begin = split * job.chunk;
    const int64_t end = min(job.extent, begin + job.chunk);
    if constexpr (V > 1) {
      // Aligned packs: begin, end (unless the row's end) and the row start are multiples of V.
      const auto* packs = reinterpret_cast<const detail::Pack<T, V>*>(p);
      for (int64_t k = begin / V + lane; k < end / V; k += G) {
        const detail::Pack<T, V> pack = packs[k];
#pragma unroll
        for (int j = 0; j < V; ++j)
          s = job.reducer.combine(s, job.reducer.map(convert<A>(pack.v[j]), k * V + j));
      }
    } else {
      for (int64_t r = begin + lane; r < end; r += G)
        s = job.reducer.combine(s, job.reducer.map(convert<A>(p[r]), r));
    }
  }
  s = group_combine<G>(job.reducer, s);
  if (lane == 0 && row < job.outer) write_state(job, row, split, s);
}

// C adjacent columns per thread (one C-element pack per row: 16-byte loads for 16-bit inputs), C = 1 when
// the columns are not packed.
template <int C, class T, class R>
__global__ void __launch_bounds__(kColumnThreads, LightReducer<R>::value ? 8 : 1)
    reduce_columns_kernel(ReduceJob<T, R> job) {
  using A = acc_t<T>;
  using S = typename R::State;
  constexpr int64_t kTile = kColumnsX * C;
  __shared__ S states[kColumnsY][kTile];
  const int64_t tiles = (job.inner + kTile - 1) / kTile;
  const int64_t o = blockIdx.x / tiles;
  const int64_t i = (blockIdx.x % tiles) * kTile + threadIdx.x * C;  // C > 1: inner % C == 0
  const int split = blockIdx.y;
  S s[C];
#pragma unroll
  for (int c = 0; c < C; ++c) s[c] = job.reducer.identity();
  if (i < job.inner) {
    const T* p = job.x + o * job.extent * job.inner + i;
    const int64_t begin = split * job.chunk;
    const int64_t end = min(job.extent, begin + job.chunk);
    // kColumnRowsInFlight rows loaded before any is combined (a single 16-byte load per thread in flight
    // left a one-wave grid latency bound), combined in the order of one row at a time.
    for (int64_t r0 = begin + threadIdx.y; r0 < end; r0 += kColumnsY * kColumnRowsInFlight) {
      detail::Pack<T, C> packs[kColumnRowsInFlight];
#pragma unroll
      for (int u = 0; u < kColumnRowsInFlight; ++u) {
        const int64_t r = r0 + u * kColumnsY;
        if (r < end) packs[u] = *reinterpret_cast<const detail::Pack<T, C>*>(p + r * job.inner);
      }
#pragma unroll
      for (int u = 0; u < kColumnRowsInFlight; ++u) {
        const int64_t r = r0 + u * kColumnsY;
        if (r >= end) break;
#pragma unroll
        for (int c = 0; c < C; ++c)
          s[c] = job.reducer.combine(s[c], job.reducer.map(convert<A>(packs[u].v[c]), r));
      }
    }
  }
#pragma unroll
  for (int c = 0; c < C; ++c) states[threadIdx.y][threadIdx.x * C + c] = s[c];
  __syncthreads();
  if (threadIdx.y == 0 && i < job.inner) {
#pragma unroll
    for (int c = 0; c < C; ++c) {
      for (int k = 1; k < kColumnsY; ++k) s[c] = job.reducer.combine(s[c], states[k][threadIdx.x * C + c]);
      write_state(job, o * job.inner + i + c, split, s[c]);
    }
  }
}

// Columns per thread: a 16-byte pack of x, at most 32 bytes of reducer state per thread and column pack.
template <class T, class S>
constexpr int columns_per_thread() {
  constexpr int by_load = static_cast<int>(16 / sizeof(T));
  constexpr int by_state = static_cast<int>(32 / sizeof(S)) > 0 ? static_cast<int>(32 / sizeof(S)) : 1;
  return by_load < by_state ? by_load : by_state;
}

// A warp per output merges its `splits` partial states in order.
template <class T, class R>
__global__ void reduce_partials_kernel(ReduceJob<T, R> job) {
  const int64_t column = blockIdx.x * static_cast<int64_t>(kBlock / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  typename R::State s = job.reducer.identity();
  if (column < job.outer * job.inner) {
    const typename R::State* p = job.partial + column * job.splits;
    for (int k0 = lane; k0 < job.splits; k0 += 32 * kPartialsInFlight) {
      typename R::State loaded[kPartialsInFlight];
#pragma unroll
      for (int u = 0; u < kPartialsInFlight; ++u) {
        if (k0 + 32 * u < job.splits) loaded[u] = p[k0 + 32 * u];
      }
#pragma unroll
      for (int u = 0; u < kPartialsInFlight; ++u) {
        if (k0 + 32 * u < job.splits) s = job.reducer.combine(s, loaded[u]);
      }
    }
  }
  s = warp_combine(job.reducer, s);
  if (lane == 0 && column < job.outer * job.inner) {
    job.splits = 1;
    write_state(job, column, 0, s);
  }
}

// Splits of the extent so that about kTargetBlocks blocks run, each reducing at least min_chunk elements;
// the chunk is a multiple of `multiple`.
void plan_splits(int64_t blocks, int64_t extent, int64_t min_chunk, int64_t multiple, int64_t* chunk,
                 int* splits) {
  int64_t s = 1;
  if (blocks < kTargetBlocks) s = std::min((kTargetBlocks + blocks - 1) / blocks, extent / min_chunk);
  s = std::max<int64_t>(1, std::min<int64_t>(s, 65535));
  int64_t c = (extent + s - 1) / s;
  c = (c + multiple - 1) / multiple * multiple;
  *chunk = std::max<int64_t>(c, 1);
  *splits = static_cast<int>(std::max<int64_t>(1, (extent + *chunk - 1) / *chunk));
}

template <class T, class R>
void launch_reduce(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, const R& reducer,
                   const Tensor& values, const Tensor& indices, cudaStream_t stream) {
  using S = typename R::State;
  ReduceJob<T, R> job{static_cast<const T*>(x.raw_data()),
                      outer,
                      extent,
                      inner,
                      extent,
                      1,
                      reducer,
                      values.defined() ? static_cast<T*>(values.raw_data()) : nullptr,
                      indices.defined() ? static_cast<int64_t*>(indices.raw_data()) : nullptr,
                      nullptr};
  constexpr int V = 16 / sizeof(T);
  Tensor partial;
  auto allocate_partial = [&] {
    if (job.splits == 1) return;
    partial =
        Tensor::empty({static_cast<int64_t>(outer * inner * job.splits * sizeof(S))}, DType::u8, x.device());
    job.partial = static_cast<S*>(partial.raw_data());
  };
  if (inner == 1) {
    const bool long_rows = extent > 4096;
    const int64_t rows_per_block = kBlock / 32;
    const int64_t blocks = long_rows ? outer : (outer + rows_per_block - 1) / rows_per_block;
    const bool vector = extent % V == 0 && reinterpret_cast<uintptr_t>(job.x) % 16 == 0;
    plan_splits(blocks, extent, long_rows ? 16 * kBlock : 1 << 20, vector ? V : 1, &job.chunk, &job.splits);
    allocate_partial();
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(job.splits));
    if (long_rows && vector) {
      reduce_rows_kernel<kBlock, V, T, R><<<grid, kBlock, 0, stream>>>(job);
    } else if (long_rows) {
      reduce_rows_kernel<kBlock, 1, T, R><<<grid, kBlock, 0, stream>>>(job);
    } else if (vector) {
      reduce_rows_kernel<32, V, T, R><<<grid, kBlock, 0, stream>>>(job);
    } else {
      reduce_rows_kernel<32, 1, T, R><<<grid, kBlock, 0, stream>>>(job);
    }
  } else {
    constexpr int C = columns_per_thread<T, S>();
    const bool packed = C > 1 && inner % C == 0 && reinterpret_cast<uintptr_t>(job.x) % (C * sizeof(T)) == 0;
    const int64_t width = kColumnsX * (packed ? C : 1);
    const int64_t blocks = outer * ((inner + width - 1) / width);
    plan_splits(blocks, extent, 16 * kColumnsY, 1, &job.chunk, &job.splits);
    allocate_partial();
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(job.splits));
    if (packed) {
      reduce_columns_kernel<C, T, R><<<grid, dim3(kColumnsX, kColumnsY), 0, stream>>>(job);
    } else {
      reduce_columns_kernel<1, T, R><<<grid, dim3(kColumnsX, kColumnsY), 0, stream>>>(job);
    }
  }
  LIFTOFF_LAUNCH_CHECK();
  if (job.splits > 1) {
    const int64_t outputs = outer * inner;
    reduce_partials_kernel<T, R>
        <<<static_cast<unsigned>((outputs + kBlock / 32 - 1) / (kBlock / 32)), kBlock, 0, stream>>>(job);
    LIFTOFF_LAUNCH_CHECK();
  }
}

template <class T>
__global__ void index_backward_kernel(const T* gy, const int64_t* indices, int64_t extent, int64_t inner,
                                      T* gx, int64_t n) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const int64_t column = (i / (extent * inner)) * inner + i % inner;
    const int64_t r = (i / inner) % extent;
    gx[i] = indices[column] == r ? gy[column] : convert<T>(0.0f);
  }
}
}  // namespace

void reduce_forward(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, const ReduceParams& params,
                    const Tensor& values, const Tensor& indices) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  if (outer * inner == 0) return;
  dispatch_device_float(x.dtype(), "reduce", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    auto launch = [&](const auto& reducer) {
      launch_reduce<T>(x, outer, extent, inner, reducer, values, indices, compute_stream(device));
    };
    const bool extreme = params.kind == ReduceKind::max || params.kind == ReduceKind::min;
    if (extreme && !indices.defined()) {
      params.kind == ReduceKind::max ? launch(ValueExtremeReducer<A, true>{})
                                     : launch(ValueExtremeReducer<A, false>{});
    } else {
      visit_reducer<A>(params, launch);
    }
  });
}

void index_backward(const Tensor& gy, const Tensor& indices, int64_t outer, int64_t extent, int64_t inner,
                    const Tensor& gx) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  const int64_t n = outer * extent * inner;
  if (n == 0) return;
  dispatch_device_float(gy.dtype(), "max/min backward", [&](auto tag) {
    using T = decltype(tag);
    index_backward_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(gy.raw_data()), static_cast<const int64_t*>(indices.raw_data()), extent, inner,
        static_cast<T*>(gx.raw_data()), n);
    LIFTOFF_LAUNCH_CHECK();
  });
}

void reduce_grad(ReduceGradKind kind, double param, const ElementwisePlan& plan, const Tensor& x,
                 const Tensor& gy, const Tensor& stat, const Tensor& gx) {
  dispatch_device_float(x.dtype(), "reduce backward", [&](auto tag) {
    using T = decltype(tag);
    visit_reduce_grad<acc_t<T>>(kind, param, [&](const auto& f) {
      launch_elementwise(x.device().index, plan, static_cast<T*>(gx.raw_data()), f, tensor_input<T>(x),
                         gy.defined() ? tensor_input<T>(gy) : constant_input<T>(1.0), tensor_input<T>(stat));
    });
  });
}

}  // namespace liftoff::cuda
