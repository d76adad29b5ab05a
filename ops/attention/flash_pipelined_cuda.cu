// The pipelined fused attention kernels (see flash.h): blocks of 8 warps over 128 query rows (forward) or
// 128 keys (backward), 16 rows per warp. Tiles stream through shared memory with cp.async into two buffers,
// so the copy of tile j + 1 overlaps the products of tile j; every operand fragment comes from ldmatrix
// (.trans for the [k][n] operands V, dO, Q, K of the second products); rows are padded by 16 bytes so the
// eight 16-byte rows of each ldmatrix phase hit distinct banks. Causal grids run the longest blocks first.
// dQ is summed over key blocks with f32 vector atomics (half as many as 64-key blocks need).
#include "ops/attention/flash_mma.cuh"

namespace liftoff::cuda::flash {

namespace {
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = kWarps * 16;  // query rows per forward block, key rows per backward block
constexpr int kKeys = 64;           // keys per forward step
constexpr int kPad = 8;             // 16 bytes per shared row: conflict-free ldmatrix and cp.async

// Queries per backward step: D = 128 keeps dK and dV (128 registers) plus S^T and dP^T under 255.
template <int D>
constexpr int backward_queries() {
  return D > 64 ? 32 : 64;
}

template <int D>
constexpr int forward_smem_bytes() {
  return (kRows + 4 * kKeys) * (D + kPad) * 2;  // Q, then K and V in two buffers each
}

template <int D>
constexpr int backward_smem_bytes() {
  constexpr int bq = backward_queries<D>();
  // K, V; Q and dO in two buffers each; dS^T; lse and delta in two buffers each.
  return (2 * kRows * (D + kPad) + 4 * bq * (D + kPad) + kRows * (bq + kPad)) * 2 + 4 * bq * 4;
}

// Starts copying rows [first, first + ROWS) of a [total, D] global matrix (rows `stride` apart) into a
// shared tile with rows D + kPad apart; rows past `total` are zero filled.
template <int D, int ROWS>
__device__ __forceinline__ void copy_rows_async(uint16_t* tile, const uint16_t* src, int64_t stride,
                                                int64_t first, int64_t total) {
  constexpr int kVectors = D / 8;
  static_assert(ROWS * kVectors % kThreads == 0, "whole copy rounds");
#pragma unroll
  for (int idx = threadIdx.x; idx < ROWS * kVectors; idx += kThreads) {
    const int r = idx / kVectors, c = idx % kVectors * 8;
    const bool inside = first + r < total;
    cp_async16(tile + r * (D + kPad) + c, inside ? src + (first + r) * stride + c : src, inside ? 16 : 0);
  }
}

// Starts copying entries [first, first + COUNT) of a float vector of `total`, zeros past the end.
template <int COUNT>
__device__ __forceinline__ void copy_floats_async(float* dst, const float* src, int64_t first,
                                                  int64_t total) {
  for (int i = threadIdx.x; i < COUNT; i += kThreads) {
    const bool inside = first + i < total;
    cp_async4(dst + i, inside ? src + first + i : src, inside ? 4 : 0);
  }
}

// Block -> (batch entry, tile): causal grids hand out the most expensive tiles first (the last query tiles
// in the forward, the first key tiles in the backward), across all batch entries, so the short ones fill
// the tail; other grids keep one entry's tiles adjacent (its K and V stay in L2).
struct BlockTile {
  int64_t n, tile;
};

__device__ __forceinline__ BlockTile block_tile(int64_t batch, int64_t tiles, bool causal, bool last_first) {
  const int64_t b = blockIdx.x;
  if (!causal) return {b / tiles, b % tiles};
  const int64_t order = b / batch;
  return {b % batch, last_first ? tiles - 1 - order : order};
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads) pipelined_forward_kernel(FlashProblem p, T* out, float* lse) {
  extern __shared__ __align__(16) uint16_t smem[];
  constexpr int kStride = D + kPad, kTile = kKeys * kStride;
  uint16_t* qs = smem;
  uint16_t* ks = qs + kRows * kStride;  // buffers 0 and 1
  uint16_t* vs = ks + 2 * kTile;        // buffers 0 and 1
  const BlockTile bt = block_tile(p.batch, (p.l + kRows - 1) / kRows, p.causal, true);
  const int64_t n = bt.n, q0 = bt.tile * kRows;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
  const auto* qg = static_cast<const uint16_t*>(p.q.data) + batch_offset(p, p.q, n);
  const auto* kg = static_cast<const uint16_t*>(p.k.data) + batch_offset(p, p.k, n);
  const auto* vg = static_cast<const uint16_t*>(p.v.data) + batch_offset(p, p.v, n);
  // Causal: query i sees keys j <= i, so the block needs keys below its last query + 1 (at least one).
  const int64_t key_end = p.causal ? min(p.s, min(q0 + kRows, p.l)) : p.s;
  const int64_t steps = (key_end + kKeys - 1) / kKeys;

  copy_rows_async<D, kRows>(qs, qg, p.q.row, q0, p.l);
  copy_rows_async<D, kKeys>(ks, kg, p.k.row, 0, p.s);
  copy_rows_async<D, kKeys>(vs, vg, p.v.row, 0, p.s);
  cp_async_commit();

  float o[D / 8][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};  // rows g and g + 8 of the warp
  const int64_t query[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  for (int64_t j = 0; j < steps; ++j) {
    cp_async_wait_all();
    __syncthreads();  // tile j is in; every warp is done with tile j - 1, whose buffers the next copy takes
    const int64_t k0 = j * kKeys;
    if (j + 1 < steps) {
      const int next = static_cast<int>((j + 1) & 1);
      copy_rows_async<D, kKeys>(ks + next * kTile, kg, p.k.row, k0 + kKeys, p.s);
      copy_rows_async<D, kKeys>(vs + next * kTile, vg, p.v.row, k0 + kKeys, p.s);
      cp_async_commit();
    }
    const uint16_t* kt = ks + (j & 1) * kTile;
    const uint16_t* vt = vs + (j & 1) * kTile;

    float s[kKeys / 8][4] = {};
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t qa[4];
      ldmatrix_a(qa, qs, kStride, warp * 16, kc * 16);
#pragma unroll
      for (int nt = 0; nt < kKeys / 8; nt += 2) {
        uint32_t b[4];
        ldmatrix_b_from_nk(b, kt, kStride, nt * 8, kc * 16);
        mma16816<T>(s[nt], qa, b[0], b[1]);
        mma16816<T>(s[nt + 1], qa, b[2], b[3]);
      }
    }
    const bool masked = k0 + kKeys > p.s || (p.causal && k0 + kKeys - 1 > q0);
    online_softmax_step<kKeys, D>(s, o, row_max, row_sum, p, k0, query, masked);
#pragma unroll
    for (int kc = 0; kc < kKeys / 16; ++kc) {
      uint32_t pa[4];
      accumulator_to_a<T>(pa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int dt = 0; dt < D / 8; dt += 2) {
        uint32_t b[4];
        ldmatrix_b_from_kn(b, vt, kStride, kc * 16, dt * 8);
        mma16816<T>(o[dt], pa, b[0], b[1]);
        mma16816<T>(o[dt + 1], pa, b[2], b[3]);
      }
    }
  }
  store_output<T, D>(o, row_max, row_sum, query, n, p.l, out, lse);
}

// dQ += scale * dS K for this block's 128 keys: dS^T [128 keys][BQ] and K [128][D] in shared memory; the
// warps split the BQ x D product into 16-row by (D / column groups) pieces, added with atomics.
template <class T, int D, int BQ>
__device__ __forceinline__ void accumulate_grad_q(const uint16_t* dst, const uint16_t* ks, float* grad_q_acc,
                                                  int64_t q0, int64_t l, float scale) {
  constexpr int kRowGroups = BQ / 16, kColumns = D / (kWarps / kRowGroups);
  static_assert(kWarps % kRowGroups == 0 && kColumns % 16 == 0, "whole ldmatrix pairs per warp");
  const int warp = threadIdx.x / 32;
  const int row0 = warp % kRowGroups * 16, col0 = warp / kRowGroups * kColumns;
  float dq[kColumns / 8][4] = {};
#pragma unroll
  for (int kc = 0; kc < kRows / 16; ++kc) {
    uint32_t a[4];
    ldmatrix_a_transposed(a, dst, BQ + kPad, row0, kc * 16);
#pragma unroll
    for (int dt = 0; dt < kColumns / 8; dt += 2) {
      uint32_t b[4];
      ldmatrix_b_from_kn(b, ks, D + kPad, kc * 16, col0 + dt * 8);
      mma16816<T>(dq[dt], a, b[0], b[1]);
      mma16816<T>(dq[dt + 1], a, b[2], b[3]);
    }
  }
  atomic_add_rows<D, kColumns>(grad_q_acc, dq, q0, row0, col0, l, scale);
}

// Shared-memory tiles of one backward step (buffer `buffer` of the two).
struct QueryTile {
  uint16_t* q;
  uint16_t* grad_out;
  float* lse;
  float* delta;
};

template <int D>
__device__ __forceinline__ QueryTile query_tile(uint16_t* qs, int buffer) {
  constexpr int bq = backward_queries<D>(), kTile = bq * (D + kPad);
  uint16_t* dos = qs + 2 * kTile;
  float* floats = reinterpret_cast<float*>(dos + 2 * kTile + kRows * (bq + kPad));
  return {qs + buffer * kTile, dos + buffer * kTile, floats + buffer * bq, floats + (2 + buffer) * bq};
}

// One block: 128 keys of one batch entry (16 per warp) against all queries that see them, BQ at a time.
// dV and dK accumulate in registers; dQ goes through f32 atomics (several key blocks add to each row).
template <class T, int D>
__global__ void __launch_bounds__(kThreads) pipelined_backward_kernel(FlashProblem p, FlashGrads grads) {
  extern __shared__ __align__(16) uint16_t smem[];
  constexpr int BQ = backward_queries<D>(), kStride = D + kPad, kDsStride = BQ + kPad;
  uint16_t* ks = smem;
  uint16_t* vs = ks + kRows * kStride;
  uint16_t* qs = vs + kRows * kStride;    // then dO, dS^T, lse, delta (query_tile)
  uint16_t* dst = qs + 4 * BQ * kStride;  // dS^T [key][query] of this step
  const BlockTile bt = block_tile(p.batch, (p.s + kRows - 1) / kRows, p.causal, false);
  const int64_t n = bt.n, k0 = bt.tile * kRows;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const auto* qg = static_cast<const uint16_t*>(p.q.data) + batch_offset(p, p.q, n);
  const auto* kg = static_cast<const uint16_t*>(p.k.data) + batch_offset(p, p.k, n);
  const auto* vg = static_cast<const uint16_t*>(p.v.data) + batch_offset(p, p.v, n);
  const auto* dog = static_cast<const uint16_t*>(grads.grad_out) + n * p.l * D;
  const float* lse = grads.lse + n * p.l;
  const float* delta = grads.delta + n * p.l;
  const float scale = p.scale;
  // Causal: only queries i >= k0 see this block's keys (none when k0 >= L: dK = dV = 0).
  const int64_t q_begin = p.causal ? k0 / BQ * BQ : 0;
  const int64_t steps = q_begin < p.l ? (p.l - q_begin + BQ - 1) / BQ : 0;
  const auto copy_queries = [&](int64_t q0, int buffer) {
    const QueryTile tile = query_tile<D>(qs, buffer);
    copy_rows_async<D, BQ>(tile.q, qg, p.q.row, q0, p.l);
    copy_rows_async<D, BQ>(tile.grad_out, dog, D, q0, p.l);
    copy_floats_async<BQ>(tile.lse, lse, q0, p.l);
    copy_floats_async<BQ>(tile.delta, delta, q0, p.l);
  };

  copy_rows_async<D, kRows>(ks, kg, p.k.row, k0, p.s);
  copy_rows_async<D, kRows>(vs, vg, p.v.row, k0, p.s);
  if (steps > 0) copy_queries(q_begin, 0);
  cp_async_commit();

  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  const int key_row = warp * 16 + g;  // this thread's keys: key_row and key_row + 8 of the block
  const int64_t key[2] = {k0 + key_row, k0 + key_row + 8};
  for (int64_t i = 0; i < steps; ++i) {
    cp_async_wait_all();
    __syncthreads();  // tile i is in; every warp is done with step i - 1 (its buffers and dS^T)
    const int64_t q0 = q_begin + i * BQ;
    if (i + 1 < steps) {
      copy_queries(q0 + BQ, static_cast<int>((i + 1) & 1));
      cp_async_commit();
    }
    const QueryTile tile = query_tile<D>(qs, static_cast<int>(i & 1));

    // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys and the BQ queries.
    float st[BQ / 8][4] = {}, dpt[BQ / 8][4] = {};
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t ka[4], va[4];
      ldmatrix_a(ka, ks, kStride, warp * 16, kc * 16);
      ldmatrix_a(va, vs, kStride, warp * 16, kc * 16);
#pragma unroll
      for (int nt = 0; nt < BQ / 8; nt += 2) {
        uint32_t qb[4], db[4];
        ldmatrix_b_from_nk(qb, tile.q, kStride, nt * 8, kc * 16);
        ldmatrix_b_from_nk(db, tile.grad_out, kStride, nt * 8, kc * 16);
        mma16816<T>(st[nt], ka, qb[0], qb[1]);
        mma16816<T>(st[nt + 1], ka, qb[2], qb[3]);
        mma16816<T>(dpt[nt], va, db[0], db[1]);
        mma16816<T>(dpt[nt + 1], va, db[2], db[3]);
      }
    }
    // P^T from the saved logsumexp; dS^T = P^T * (dP^T - delta), also stored for dQ. Queries past L read
    // zero-filled lse and delta and are masked.
#pragma unroll
    for (int nt = 0; nt < BQ / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ql = nt * 8 + 2 * t + (e & 1);
        const int64_t k = key[e >> 1], q = q0 + ql;
        const bool seen = k < p.s && q < p.l && (!p.causal || k <= q);
        const float prob = seen ? exp2f(st[nt][e] * p.scale_log2 - tile.lse[ql]) : 0.f;
        st[nt][e] = prob;
        dpt[nt][e] = prob * (dpt[nt][e] - tile.delta[ql]);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h)
        *reinterpret_cast<uint32_t*>(dst + (key_row + 8 * h) * kDsStride + nt * 8 + 2 * t) =
            pack2<T>(dpt[nt][2 * h], dpt[nt][2 * h + 1]);
    }
    // dV += P^T dO, dK += dS^T Q (scaled at the end).
#pragma unroll
    for (int kc = 0; kc < BQ / 16; ++kc) {
      uint32_t pa[4], da[4];
      accumulator_to_a<T>(pa, st[2 * kc], st[2 * kc + 1]);
      accumulator_to_a<T>(da, dpt[2 * kc], dpt[2 * kc + 1]);
#pragma unroll
      for (int dt = 0; dt < D / 8; dt += 2) {
        uint32_t ob[4], qb[4];
        ldmatrix_b_from_kn(ob, tile.grad_out, kStride, kc * 16, dt * 8);
        ldmatrix_b_from_kn(qb, tile.q, kStride, kc * 16, dt * 8);
        mma16816<T>(dv[dt], pa, ob[0], ob[1]);
        mma16816<T>(dv[dt + 1], pa, ob[2], ob[3]);
        mma16816<T>(dk[dt], da, qb[0], qb[1]);
        mma16816<T>(dk[dt + 1], da, qb[2], qb[3]);
      }
    }
    __syncthreads();  // dS^T of every warp is in shared memory
    accumulate_grad_q<T, D, BQ>(dst, ks, grads.grad_q_acc + n * p.l * D, q0, p.l, scale);
  }
  cp_async_wait_all();  // K and V copies of a block without steps
  store_key_grads<T, D>(dk, dv, key, n, p.s, scale, grads);
}
}  // namespace

void pipelined_forward(const FlashProblem& p, DType dtype, void* out, float* lse, cudaStream_t stream) {
  const unsigned blocks = grid_of(p.batch * ((p.l + kRows - 1) / kRows), "query");
  dispatch_half(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(p.head_dim, [&](auto dim) {
      constexpr int D = decltype(dim)::value, bytes = forward_smem_bytes<D>();
      const auto kernel = pipelined_forward_kernel<T, D>;
      allow_shared_memory(kernel, bytes);
      kernel<<<blocks, kThreads, bytes, stream>>>(p, static_cast<T*>(out), lse);
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

void pipelined_backward(const FlashProblem& p, DType dtype, const FlashGrads& grads, cudaStream_t stream) {
  const unsigned blocks = grid_of(p.batch * ((p.s + kRows - 1) / kRows), "key");
  dispatch_half(dtype, [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(p.head_dim, [&](auto dim) {
      constexpr int D = decltype(dim)::value, bytes = backward_smem_bytes<D>();
      const auto kernel = pipelined_backward_kernel<T, D>;
      allow_shared_memory(kernel, bytes);
      kernel<<<blocks, kThreads, bytes, stream>>>(p, grads);
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

}  // namespace liftoff::cuda::flash
