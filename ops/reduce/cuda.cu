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
// rows are aligned. inner > 1 ("columns"): a block of 128 threads per tile of adjacent columns, L lanes along
// inner (C columns per lane read as one pack when the columns allow; L * C columns are 128 bytes of a row, a
// whole cache line) and 128 / L rows of lanes striding the extent, each lane with 4 rows' loads in flight.
// amax/amin without indices use a value-only reducer. Either may split the extent over gridDim.y blocks that
// write partial states; a column tile's last block to finish merges its splits in order (arrival counters,
// runtime/cuda/context.h) unless there are too many, then reduce_partials_kernel merges them. All orders
// depend only on the shape.
constexpr int kColumnThreads = 128;
constexpr int kTargetBlocks = 1024;     // enough blocks to fill the GPU; fixed so results do not depend on it
constexpr int kColumnRowsInFlight = 4;  // loads a column thread issues before combining them
constexpr int kPartialsInFlight = 4;    // partial states a lane of reduce_partials_kernel loads at once
constexpr int kMergeSplitsPerThread = 4;  // a tile's last block merges at most this many splits a thread

// Lanes of a column block along a row: C values of T each, 128 bytes of a row together (at most 32).
template <int C, class T>
constexpr int column_lanes() {
  constexpr int kLanes = static_cast<int>(128 / (C * sizeof(T)));
  return kLanes > 32 ? 32 : (kLanes < 1 ? 1 : kLanes);
}

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
  T* values;         // may be null
  int64_t* indices;  // may be null
  // splits > 1: partial state (column, split) at column * column_stride + split * split_stride
  typename R::State* partial;
  int64_t column_stride, split_stride;
  unsigned* arrivals;  // columns: a counter per tile (blockIdx.x) when its last block merges; else null
};

template <class T, class R>
__device__ __forceinline__ void write_value(const ReduceJob<T, R>& job, int64_t column, typename R::State s) {
  if (job.values != nullptr) job.values[column] = convert<T>(job.reducer.value(s));
  if (job.indices != nullptr) job.indices[column] = job.reducer.index(s);
}

template <class T, class R>
__device__ __forceinline__ void write_state(const ReduceJob<T, R>& job, int64_t column, int split,
                                            typename R::State s) {
  if (job.splits > 1) {
    job.partial[column * job.column_stride + split * job.split_stride] = s;
    return;
  }
  write_value(job, column, s);
}

// A state written by another block of this grid, read from L2 (past this SM's L1).
template <class S>
__device__ __forceinline__ S load_from_l2(const S* p) {
  if constexpr (std::is_arithmetic_v<S>) {
    return __ldcg(p);
  } else {
    static_assert(sizeof(S) % 4 == 0 && alignof(S) >= 4, "states are made of 32-bit words");
    constexpr int kWords = static_cast<int>(sizeof(S) / 4);
    unsigned words[kWords];
#pragma unroll
    for (int w = 0; w < kWords; ++w) words[w] = __ldcg(reinterpret_cast<const unsigned*>(p) + w);
    S s;
    memcpy(&s, words, sizeof(S));
    return s;
  }
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

// Combines the C states of each lane over the block's rows of lanes (a tree in a fixed order, through
// `states`, kColumnThreads * C of them); the row-0 lanes get the block's states. Every thread must call it.
template <int L, int C, class R, class S>
__device__ __forceinline__ void combine_lane_rows(const R& reducer, S (&s)[C], S* states) {
  constexpr int kRows = kColumnThreads / L;
  const int lane = threadIdx.x % L, y = threadIdx.x / L;
  S* mine = states + (y * L + lane) * C;
#pragma unroll
  for (int c = 0; c < C; ++c) mine[c] = s[c];
  __syncthreads();
#pragma unroll
  for (int half = kRows / 2; half > 0; half /= 2) {
    if (y < half) {
#pragma unroll
      for (int c = 0; c < C; ++c) mine[c] = s[c] = reducer.combine(s[c], mine[half * L * C + c]);
    }
    __syncthreads();
  }
}

// True in every thread of the one block of this tile (blockIdx.x) that arrives last; it resets the tile's
// counter for the next launch. Call after each writer thread's __threadfence.
__device__ __forceinline__ bool last_block_of_tile(unsigned* arrivals) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned arrived = atomicAdd(arrivals + blockIdx.x, 1u) + 1u;
    last = arrived == gridDim.y;
    if (last) arrivals[blockIdx.x] = 0u;
  }
  __syncthreads();
  if (last) __threadfence();  // the other blocks' partials are read after their count
  return last;
}

// The tile's last block: lane row y combines, for its C columns, splits y, y + rows, ... (rows of partial
// states, read from L2) in order into s; at most 64 bytes of states in flight a thread (more spilled at the
// light reducers' 64 registers).
template <int L, int C, class T, class R>
__device__ __forceinline__ void merge_tile_splits(const ReduceJob<T, R>& job, int64_t column, int y,
                                                  typename R::State (&s)[C]) {
  using S = typename R::State;
  constexpr int kRows = kColumnThreads / L;
  constexpr int kByBytes = 64 / (C * sizeof(S)) > 0 ? static_cast<int>(64 / (C * sizeof(S))) : 1;
  constexpr int kInFlight = kByBytes < kMergeSplitsPerThread ? kByBytes : kMergeSplitsPerThread;
#pragma unroll
  for (int c = 0; c < C; ++c) s[c] = job.reducer.identity();
  for (int k0 = y; k0 < job.splits; k0 += kRows * kInFlight) {
    S loaded[kInFlight][C];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int k = k0 + u * kRows;
#pragma unroll
      for (int c = 0; c < C; ++c) {
        if (k < job.splits) loaded[u][c] = load_from_l2(job.partial + k * job.split_stride + column + c);
      }
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      if (k0 + u * kRows >= job.splits) break;
#pragma unroll
      for (int c = 0; c < C; ++c) s[c] = job.reducer.combine(s[c], loaded[u][c]);
    }
  }
}

// C adjacent columns per lane (one C-element pack per row: 16-byte loads), C = 1 when the columns are not
// packed; L lanes (column_lanes) along the tile.
template <int C, class T, class R>
__global__ void __launch_bounds__(kColumnThreads, LightReducer<R>::value ? 8 : 1)
    reduce_columns_kernel(ReduceJob<T, R> job) {
  using A = acc_t<T>;
  using S = typename R::State;
  constexpr int L = column_lanes<C, T>();
  constexpr int kRows = kColumnThreads / L;
  constexpr int64_t kTile = L * C;
  __shared__ S states[kColumnThreads * C];
  const int lane = threadIdx.x % L, y = threadIdx.x / L;
  const int64_t tiles = (job.inner + kTile - 1) / kTile;
  const int64_t o = blockIdx.x / tiles;
  const int64_t i = (blockIdx.x % tiles) * kTile + lane * C;  // C > 1: inner % C == 0
  const int64_t column = o * job.inner + i;
  const int split = blockIdx.y;
  S s[C];
#pragma unroll
  for (int c = 0; c < C; ++c) s[c] = job.reducer.identity();
  if (i < job.inner) {
    const T* p = job.x + o * job.extent * job.inner + i;
    const int64_t begin = split * job.chunk;
    const int64_t end = min(job.extent, begin + job.chunk);
    // kColumnRowsInFlight rows loaded before any is combined (a single 16-byte load per thread in flight
    // left a one-wave grid latency bound), combined in the order of one row at a time; the rows left over
    // one at a time (no per-load bounds checks in the main loop: it fits the light reducers' 64 registers).
    const int64_t stride = kRows * job.inner;
    auto load = [&](int64_t r) { return *reinterpret_cast<const detail::Pack<T, C>*>(p + r * job.inner); };
    auto add = [&](const detail::Pack<T, C>& pack, int64_t r) {
#pragma unroll
      for (int c = 0; c < C; ++c) s[c] = job.reducer.combine(s[c], job.reducer.map(convert<A>(pack.v[c]), r));
    };
    int64_t r = begin + y;
    for (; r + (kColumnRowsInFlight - 1) * kRows < end; r += kColumnRowsInFlight * kRows) {
      const T* q = p + r * job.inner;
      detail::Pack<T, C> packs[kColumnRowsInFlight];
#pragma unroll
      for (int u = 0; u < kColumnRowsInFlight; ++u)
        packs[u] = *reinterpret_cast<const detail::Pack<T, C>*>(q + u * stride);
#pragma unroll
      for (int u = 0; u < kColumnRowsInFlight; ++u) add(packs[u], r + u * kRows);
    }
    for (; r < end; r += kRows) add(load(r), r);
  }
  combine_lane_rows<L>(job.reducer, s, states);
  if (y == 0 && i < job.inner) {
#pragma unroll
    for (int c = 0; c < C; ++c) write_state(job, column + c, split, s[c]);
    if (job.arrivals != nullptr) __threadfence();  // this block's partials are visible before its count
  }
  // The tile's last block merges the splits of its columns, then combines the rows of lanes as above.
  if (job.arrivals == nullptr || !last_block_of_tile(job.arrivals)) return;
  if (i < job.inner) merge_tile_splits<L>(job, column, y, s);
  combine_lane_rows<L>(job.reducer, s, states);
  if (y == 0 && i < job.inner) {
#pragma unroll
    for (int c = 0; c < C; ++c) write_value(job, column + c, s[c]);
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
    const typename R::State* p = job.partial + column * job.column_stride;
    for (int k0 = lane; k0 < job.splits; k0 += 32 * kPartialsInFlight) {
      typename R::State loaded[kPartialsInFlight];
#pragma unroll
      for (int u = 0; u < kPartialsInFlight; ++u) {
        if (k0 + 32 * u < job.splits) loaded[u] = p[(k0 + 32 * u) * job.split_stride];
      }
#pragma unroll
      for (int u = 0; u < kPartialsInFlight; ++u) {
        if (k0 + 32 * u < job.splits) s = job.reducer.combine(s, loaded[u]);
      }
    }
  }
  s = warp_combine(job.reducer, s);
  if (lane == 0 && column < job.outer * job.inner) write_value(job, column, s);
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
                      nullptr,
                      0,
                      0,
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
    job.column_stride = job.splits;  // [row][split]: a warp of reduce_partials_kernel reads a row's splits
    job.split_stride = 1;
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
    auto launch_columns = [&](auto columns) {
      constexpr int kC = decltype(columns)::value;
      constexpr int kLanes = column_lanes<kC, T>();
      constexpr int kRows = kColumnThreads / kLanes;
      const int64_t width = int64_t{kLanes} * kC;
      const int64_t blocks = outer * ((inner + width - 1) / width);
      plan_splits(blocks, extent, 16 * kRows, 1, &job.chunk, &job.splits);
      allocate_partial();
      // [split][column]: a block writes a contiguous row of partials, the merge reads whole rows.
      job.column_stride = 1;
      job.split_stride = outer * inner;
      // Splits imply fewer than kTargetBlocks tiles, each with its own counter.
      static_assert(kTargetBlocks <= kArrivalCounters, "a counter per tile");
      if (job.splits > 1 && job.splits <= kRows * kMergeSplitsPerThread)
        job.arrivals = arrival_counters(x.device().index);
      const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(job.splits));
      reduce_columns_kernel<kC, T, R><<<grid, kColumnThreads, 0, stream>>>(job);
    };
    if (packed) {
      launch_columns(std::integral_constant<int, C>{});
    } else {
      launch_columns(std::integral_constant<int, 1>{});
    }
  }
  LIFTOFF_LAUNCH_CHECK();
  if (job.splits > 1 && job.arrivals == nullptr) {
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
