// A row held in registers: G threads of a block (1 to 256) share one row of `extent` contiguous values, each
// thread holding E of them, read and written as packs of V (16 bytes when the row allows). Pack k of thread t
// is pack (k * G + t) of the row, so a group's loads are coalesced. Used by the row kernels of softmax and
// layer norm: one global read and one write per value, statistics from registers.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

template <class T, int V>
struct alignas(sizeof(T) * V) TilePack {
  T v[V];
};

// Rows of up to G * E values; with V > 1 the row length is a multiple of V and every row start is aligned
// to V * sizeof(T).
template <int G, int E, int V>
struct RowTile {
  static_assert(E % V == 0, "a thread holds whole packs");
  static constexpr int kPacks = E / V;
  static constexpr int kGroupsPerBlock = kBlock / G;
  static_assert(kBlock % G == 0, "groups tile the block");

  // The column of value e held by thread `lane` of the group.
  __device__ __forceinline__ static int64_t column(int lane, int e) {
    return (static_cast<int64_t>(e / V) * G + lane) * V + e % V;
  }

  // The packs of one row a thread holds, as stored (a load in flight costs no conversion registers).
  template <class T>
  struct Raw {
    TilePack<T, V> p[kPacks];
  };

  // Issues the loads of this thread's packs of `row` (packs past the row's end are left unset).
  template <class T>
  __device__ __forceinline__ static void fetch(const T* row, int64_t extent, int lane, Raw<T>& raw) {
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int64_t first = (static_cast<int64_t>(k) * G + lane) * V;
      if (first < extent) raw.p[k] = reinterpret_cast<const TilePack<T, V>*>(row)[first / V];
    }
  }

  // Asks L2 for a whole row (cp.async.bulk.prefetch: one request from the group's first thread, nothing held
  // in registers; a later fetch of the row finds it in L2). Rows of whole packs only (V > 1: 16-byte aligned,
  // a multiple of 16 bytes long); a no-op otherwise.
  template <class T>
  __device__ __forceinline__ static void prefetch_l2(const T* row, int64_t extent, int lane) {
    if constexpr (V > 1 && V * sizeof(T) == 16) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      if (lane == 0)
        asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(row),
                     "r"(static_cast<unsigned>(extent * sizeof(T)))
                     : "memory");
#endif
    }
  }

  // v[e] = the fetched value of column(lane, e) in the accumulation type A, `fill` past the row's end.
  template <class T, class A>
  __device__ __forceinline__ static void unpack(const Raw<T>& raw, int64_t extent, int lane, A (&v)[E],
                                                A fill) {
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      if ((static_cast<int64_t>(k) * G + lane) * V < extent) {
#pragma unroll
        for (int j = 0; j < V; ++j) v[k * V + j] = convert<A>(raw.p[k].v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) v[k * V + j] = fill;
      }
    }
  }

  // v[e] = row[column(lane, e)] in the accumulation type A, `fill` past the row's end (fetch and unpack in
  // one: converted as they arrive, which keeps the big tiles' register allocation free of spills).
  template <class T, class A>
  __device__ __forceinline__ static void load(const T* row, int64_t extent, int lane, A (&v)[E], A fill) {
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int64_t first = (static_cast<int64_t>(k) * G + lane) * V;
      if (first < extent) {
        const TilePack<T, V> p = reinterpret_cast<const TilePack<T, V>*>(row)[first / V];
#pragma unroll
        for (int j = 0; j < V; ++j) v[k * V + j] = convert<A>(p.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) v[k * V + j] = fill;
      }
    }
  }

  // row[column(lane, e)] = v[e] for the columns inside the row.
  template <class T, class A>
  __device__ __forceinline__ static void store(T* row, int64_t extent, int lane, const A (&v)[E]) {
#pragma unroll
    for (int k = 0; k < kPacks; ++k) {
      const int64_t first = (static_cast<int64_t>(k) * G + lane) * V;
      if (first < extent) {
        TilePack<T, V> p;
#pragma unroll
        for (int j = 0; j < V; ++j) p.v[j] = convert<T>(v[k * V + j]);
        reinterpret_cast<TilePack<T, V>*>(row)[first / V] = p;
      }
    }
  }
};

// __shfl_xor_sync of any trivially copyable value (a scalar, or a struct of scalars reduced together).
template <class S>
__device__ __forceinline__ S shuffle_xor(S s, int offset) {
  if constexpr (std::is_arithmetic_v<S>) {
    return __shfl_xor_sync(0xffffffffu, s, offset);
  } else {
    constexpr int kWords = (sizeof(S) + 3) / 4;
    int words[kWords] = {};
    memcpy(words, &s, sizeof(S));
#pragma unroll
    for (int w = 0; w < kWords; ++w) words[w] = __shfl_xor_sync(0xffffffffu, words[w], offset);
    memcpy(&s, words, sizeof(S));
    return s;
  }
}

// Combines v over the G threads of a group (aligned groups of one block; G a power of two up to kBlock) in
// a fixed order; every thread of the group gets the same bits (a butterfly gives both partners op(a, b) and
// op(b, a), equal for a commutative op; G = 1 returns v). A may be a struct (ValuePair: two sums for the
// price of one set of barriers). scratch: kBlock / 32 values of shared memory. Every thread of the block
// must call it when G > 32 (it synchronizes).
template <int G, class A, class Op>
__device__ __forceinline__ A group_all_reduce(A v, const Op& op, A* scratch) {
  constexpr int kWarp = 32;
#pragma unroll
  for (int offset = (G < kWarp ? G : kWarp) / 2; offset > 0; offset /= 2) {
    v = op(v, shuffle_xor(v, offset));
  }
  if constexpr (G > kWarp) {
    constexpr int kWarps = G / kWarp;
    const int warp_in_group = (threadIdx.x % G) / kWarp;
    A* group_scratch = scratch + (threadIdx.x / G) * kWarps;
    if (threadIdx.x % kWarp == 0) group_scratch[warp_in_group] = v;
    __syncthreads();
    v = group_scratch[0];
#pragma unroll
    for (int w = 1; w < kWarps; ++w) v = op(v, group_scratch[w]);
    __syncthreads();  // the scratch is reused by the next call
  }
  return v;
}

// Two values reduced by one group_all_reduce (AddOp adds both).
template <class A>
struct ValuePair {
  A first, second;
};

struct AddOp {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return a + b;
  }
  template <class A>
  __device__ __forceinline__ ValuePair<A> operator()(ValuePair<A> a, ValuePair<A> b) const {
    return {a.first + b.first, a.second + b.second};
  }
};

// max that keeps NaN (a row holding NaN gives NaN, as PyTorch).
struct MaxNanOp {
  template <class A>
  __device__ __forceinline__ A operator()(A a, A b) const {
    return (a != a || a > b) ? a : b;
  }
};

// The tile shapes a row kernel is instantiated for. Short rows: groups of G = 1 .. 32 threads holding 16
// values each (rows up to 16 G values; several rows per warp, two 16-byte packs of 16-bit values per thread,
// so the few shuffles of a short row are shared by many values); then a warp with 32 values per thread (up
// to 1024), then groups of 64 .. 256 threads with 32 values each (up to 8192: a row per block or half a
// block, each thread with as many bytes in flight as the warp tiles). f32 rows of up to 16 values: two
// threads of 8 (a thread holding a whole 64-byte row would read it as four packs at a 64-byte stride across
// the warp, each load touching 32 half-used sectors; two threads read each 32-byte sector whole). launch(G,
// E) is called with the smallest that holds `extent`; false beyond 8192 values.
constexpr int kShortRowValues = 16;
constexpr int kLongRowValues = 32;
constexpr int64_t kTileRowLimit = int64_t{kBlock} * kLongRowValues;

template <class T, class Launch>
bool dispatch_row_tile(int64_t extent, Launch&& launch) {
  using std::integral_constant;
  using Short = integral_constant<int, kShortRowValues>;
  using Long = integral_constant<int, kLongRowValues>;
  if constexpr (sizeof(T) == 4) {
    if (extent <= kShortRowValues) {
      launch(integral_constant<int, 2>{}, integral_constant<int, kShortRowValues / 2>{});
      return true;
    }
  }
  if (extent <= 1 * kShortRowValues) {
    launch(integral_constant<int, 1>{}, Short{});
  } else if (extent <= 2 * kShortRowValues) {
    launch(integral_constant<int, 2>{}, Short{});
  } else if (extent <= 4 * kShortRowValues) {
    launch(integral_constant<int, 4>{}, Short{});
  } else if (extent <= 8 * kShortRowValues) {
    launch(integral_constant<int, 8>{}, Short{});
  } else if (extent <= 16 * kShortRowValues) {
    launch(integral_constant<int, 16>{}, Short{});
  } else if (extent <= 32 * kShortRowValues) {
    launch(integral_constant<int, 32>{}, Short{});
  } else if (extent <= 32 * kLongRowValues) {
    launch(integral_constant<int, 32>{}, Long{});
  } else if (extent <= 64 * kLongRowValues) {
    launch(integral_constant<int, 64>{}, Long{});
  } else if (extent <= 128 * kLongRowValues) {
    launch(integral_constant<int, 128>{}, Long{});
  } else if (extent <= kTileRowLimit) {
    launch(integral_constant<int, kBlock>{}, Long{});
  } else {
    return false;
  }
  return true;
}

// The pack width for a tile of E values per thread: 16 bytes (at most E values) when every pointer is
// aligned to it and the row length is a multiple of it; launch(V) with that width or 1.
template <class T, int E, class Launch>
void dispatch_pack(int64_t extent, std::initializer_list<const void*> pointers, Launch&& launch) {
  constexpr int kWide = 16 / sizeof(T) < E ? static_cast<int>(16 / sizeof(T)) : E;
  bool wide = extent % kWide == 0;
  for (const void* p : pointers) wide = wide && reinterpret_cast<uintptr_t>(p) % (kWide * sizeof(T)) == 0;
  if (wide) {
    launch(std::integral_constant<int, kWide>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
}

// Blocks for `rows` rows of groups of G threads.
template <int G>
unsigned tile_blocks(int64_t rows) {
  constexpr int64_t kRowsPerBlock = kBlock / G;
  return static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace liftoff::cuda
