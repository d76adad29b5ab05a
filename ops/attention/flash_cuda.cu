// The simple fused attention kernels (see flash.h): 64 query rows (forward) or 64 keys (backward) per block
// of 4 warps, synchronous tile loads. They keep ViT-tiny's short rows (one tile) fast; longer sequences take
// the pipelined kernels of flash_pipelined_cuda.cu. Fragment layouts and helpers: flash_mma.cuh.
#include <cmath>

#include "ops/attention/flash.h"
#include "ops/attention/flash_mma.cuh"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

using namespace flash;

namespace {
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kBlockRows = kWarps * 16;  // query rows per forward block, key rows per backward block
constexpr int kPad = 8;                  // 16 bytes of padding per shared row: conflict-free fragment reads

// Rows [first, first + ROWS) of a [total, D] matrix (rows `stride` apart) into shared memory, rows past
// `total` as zeros.
template <int D, int ROWS>
__device__ __forceinline__ void load_rows(uint16_t* tile, const uint16_t* src, int64_t stride, int64_t first,
                                          int64_t total) {
  constexpr int kVectors = D / 8;
  for (int idx = threadIdx.x; idx < ROWS * kVectors; idx += kThreads) {
    const int r = idx / kVectors, c = idx % kVectors * 8;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (first + r < total) value = *reinterpret_cast<const uint4*>(src + (first + r) * stride + c);
    *reinterpret_cast<uint4*>(tile + r * (D + kPad) + c) = value;
  }
}

template <int D, int BC>
constexpr int forward_smem_bytes() {
  return (kBlockRows + 2 * BC) * (D + kPad) * 2;
}

// One block: 64 query rows of one batch entry (16 per warp) against all keys, BC keys at a time.
template <class T, int D, int BC>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(FlashProblem p, T* out, float* lse) {
  extern __shared__ __align__(16) uint16_t smem[];
  constexpr int kStride = D + kPad;
  uint16_t* qs = smem;
  uint16_t* ks = qs + kBlockRows * kStride;
  uint16_t* vs = ks + BC * kStride;
  const int64_t query_blocks = (p.l + kBlockRows - 1) / kBlockRows;
  const int64_t n = blockIdx.x / query_blocks;
  const int64_t q0 = blockIdx.x % query_blocks * kBlockRows;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const auto* qg = static_cast<const uint16_t*>(p.q.data) + batch_offset(p, p.q, n);
  const auto* kg = static_cast<const uint16_t*>(p.k.data) + batch_offset(p, p.k, n);
  const auto* vg = static_cast<const uint16_t*>(p.v.data) + batch_offset(p, p.v, n);

  load_rows<D, kBlockRows>(qs, qg, p.q.row, q0, p.l);
  __syncthreads();
  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kc = 0; kc < D / 16; ++kc) load_a(qa[kc], qs, kStride, warp * 16, kc * 16);

  float o[D / 8][4] = {};
  float row_max[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.f, 0.f};  // rows g and g + 8 of the warp
  const int64_t query[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  // Causal: query i sees keys j <= i, so the block needs keys below its last query + 1.
  const int64_t key_end = p.causal ? min(p.s, min(q0 + kBlockRows, p.l)) : p.s;
  for (int64_t k0 = 0; k0 < key_end; k0 += BC) {
    __syncthreads();  // every warp is done with the previous K/V tile
    load_rows<D, BC>(ks, kg, p.k.row, k0, p.s);
    load_rows<D, BC>(vs, vg, p.v.row, k0, p.s);
    __syncthreads();

    float s[BC / 8][4] = {};
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
#pragma unroll
      for (int nt = 0; nt < BC / 8; ++nt) {
        const uint16_t* kr = ks + (nt * 8 + g) * kStride + kc * 16 + 2 * t;
        mma16816<T>(s[nt], qa[kc], load32(kr), load32(kr + 8));
      }
    }
    const bool masked = k0 + BC > p.s || (p.causal && k0 + BC - 1 > q0);
    online_softmax_step<BC, D>(s, o, row_max, row_sum, p, k0, query, masked);
#pragma unroll
    for (int kc = 0; kc < BC / 16; ++kc) {
      uint32_t pa[4];
      accumulator_to_a<T>(pa, s[2 * kc], s[2 * kc + 1]);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        const int col = dt * 8 + g, r = kc * 16 + 2 * t;
        mma16816<T>(o[dt], pa, column_pair(vs, kStride, r, col), column_pair(vs, kStride, r + 8, col));
      }
    }
  }

  store_output<T, D>(o, row_max, row_sum, query, n, p.l, out, lse);
}

// delta[row] = sum_d grad_out[row, d] * out[row, d] (the softmax backward's row term), one warp per row.
template <class T>
__global__ void flash_delta_kernel(const T* grad_out, const T* out, float* delta, int64_t rows, int d) {
  const int64_t r = blockIdx.x * static_cast<int64_t>(kWarps) + threadIdx.x / 32;
  if (r >= rows) return;
  float sum = 0.f;
  for (int i = threadIdx.x % 32; i < d; i += 32)
    sum += convert<float>(grad_out[r * d + i]) * convert<float>(out[r * d + i]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (threadIdx.x % 32 == 0) delta[r] = sum;
}

template <class T>
__global__ void flash_convert_kernel(const float* from, T* to, int64_t count) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    to[i] = convert<T>(from[i]);
}

template <int D, int BQ>
constexpr int backward_smem_bytes() {
  return (2 * kBlockRows * (D + kPad) + 2 * BQ * (D + kPad) + BQ * (kBlockRows + kPad)) * 2 + 2 * BQ * 4;
}

// dQ += scale * dS K for this block's keys: dS [BQ, 64] and K [64, D] in shared memory; the warps split the
// BQ x D product into 16-row by (D / column groups) pieces, added to grad_q_acc with atomics.
template <class T, int D, int BQ>
__device__ __forceinline__ void accumulate_grad_q(const uint16_t* dss, const uint16_t* ks, float* grad_q_acc,
                                                  int64_t q0, int64_t l, float scale) {
  constexpr int kRowGroups = BQ / 16, kColumns = D / (kWarps / kRowGroups), kStride = D + kPad;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const int row0 = warp % kRowGroups * 16, col0 = warp / kRowGroups * kColumns;
  float dq[kColumns / 8][4] = {};
#pragma unroll
  for (int kc = 0; kc < kBlockRows / 16; ++kc) {
    uint32_t a[4];
    load_a(a, dss, kBlockRows + kPad, row0, kc * 16);
#pragma unroll
    for (int dt = 0; dt < kColumns / 8; ++dt) {
      const int col = col0 + dt * 8 + g, r = kc * 16 + 2 * t;
      mma16816<T>(dq[dt], a, column_pair(ks, kStride, r, col), column_pair(ks, kStride, r + 8, col));
    }
  }
  atomic_add_rows<D, kColumns>(grad_q_acc, dq, q0, row0, col0, l, scale);
}

// One block: 64 keys of one batch entry (16 per warp) against all queries that see them, BQ at a time.
// dV and dK accumulate in registers; dQ goes through f32 atomics (several key blocks add to each row).
template <class T, int D, int BQ>
__global__ void __launch_bounds__(kThreads) flash_backward_kernel(FlashProblem p, FlashGrads grads) {
  extern __shared__ __align__(16) uint16_t smem[];
  constexpr int kStride = D + kPad, kDsStride = kBlockRows + kPad;
  uint16_t* ks = smem;
  uint16_t* vs = ks + kBlockRows * kStride;
  uint16_t* qs = vs + kBlockRows * kStride;
  uint16_t* dos = qs + BQ * kStride;
  uint16_t* dss = dos + BQ * kStride;  // dS [query][key] of this step
  float* lse_s = reinterpret_cast<float*>(dss + BQ * kDsStride);
  float* delta_s = lse_s + BQ;
  const int64_t key_blocks = (p.s + kBlockRows - 1) / kBlockRows;
  const int64_t n = blockIdx.x / key_blocks;
  const int64_t k0 = blockIdx.x % key_blocks * kBlockRows;
  const int warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const auto* qg = static_cast<const uint16_t*>(p.q.data) + batch_offset(p, p.q, n);
  const auto* kg = static_cast<const uint16_t*>(p.k.data) + batch_offset(p, p.k, n);
  const auto* vg = static_cast<const uint16_t*>(p.v.data) + batch_offset(p, p.v, n);
  const auto* dog = static_cast<const uint16_t*>(grads.grad_out) + n * p.l * D;
  const float* lse = grads.lse + n * p.l;
  const float* delta = grads.delta + n * p.l;
  const float scale = p.scale;

  load_rows<D, kBlockRows>(ks, kg, p.k.row, k0, p.s);
  load_rows<D, kBlockRows>(vs, vg, p.v.row, k0, p.s);
  float dk[D / 8][4] = {}, dv[D / 8][4] = {};
  const int key_row = warp * 16 + g;  // this thread's keys: key_row and key_row + 8 of the block
  const int64_t key[2] = {k0 + key_row, k0 + key_row + 8};
  // Causal: only queries i >= k0 see this block's keys.
  for (int64_t q0 = p.causal ? k0 / BQ * BQ : 0; q0 < p.l; q0 += BQ) {
    __syncthreads();  // the previous step's reads of qs, dos, dss are done
    load_rows<D, BQ>(qs, qg, p.q.row, q0, p.l);
    load_rows<D, BQ>(dos, dog, D, q0, p.l);
    for (int i = threadIdx.x; i < BQ; i += kThreads) {
      lse_s[i] = q0 + i < p.l ? lse[q0 + i] : INFINITY;
      delta_s[i] = q0 + i < p.l ? delta[q0 + i] : 0.f;
    }
    __syncthreads();

    // S^T = K Q^T and dP^T = V dO^T for this warp's 16 keys and the BQ queries.
    float st[BQ / 8][4] = {}, dpt[BQ / 8][4] = {};
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t ka[4], va[4];
      load_a(ka, ks, kStride, warp * 16, kc * 16);
      load_a(va, vs, kStride, warp * 16, kc * 16);
#pragma unroll
      for (int nt = 0; nt < BQ / 8; ++nt) {
        const uint16_t* qr = qs + (nt * 8 + g) * kStride + kc * 16 + 2 * t;
        const uint16_t* dr = dos + (nt * 8 + g) * kStride + kc * 16 + 2 * t;
        mma16816<T>(st[nt], ka, load32(qr), load32(qr + 8));
        mma16816<T>(dpt[nt], va, load32(dr), load32(dr + 8));
      }
    }
    // P^T from the saved logsumexp; dS^T = P^T * (dP^T - delta).
#pragma unroll
    for (int nt = 0; nt < BQ / 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int ql = nt * 8 + 2 * t + (e & 1);
        const int64_t k = key[e >> 1], q = q0 + ql;
        const bool seen = k < p.s && q < p.l && (!p.causal || k <= q);
        const float prob = seen ? exp2f(st[nt][e] * p.scale_log2 - lse_s[ql]) : 0.f;
        st[nt][e] = prob;
        dpt[nt][e] = prob * (dpt[nt][e] - delta_s[ql]);
        dss[ql * kDsStride + key_row + 8 * (e >> 1)] = static_cast<uint16_t>(bits16<T>(dpt[nt][e]));
      }
    }
    // dV += P^T dO, dK += dS^T Q (scaled at the end).
#pragma unroll
    for (int kc = 0; kc < BQ / 16; ++kc) {
      uint32_t pa[4], da[4];
      accumulator_to_a<T>(pa, st[2 * kc], st[2 * kc + 1]);
      accumulator_to_a<T>(da, dpt[2 * kc], dpt[2 * kc + 1]);
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        const int col = dt * 8 + g, r = kc * 16 + 2 * t;
        mma16816<T>(dv[dt], pa, column_pair(dos, kStride, r, col), column_pair(dos, kStride, r + 8, col));
        mma16816<T>(dk[dt], da, column_pair(qs, kStride, r, col), column_pair(qs, kStride, r + 8, col));
      }
    }
    __syncthreads();  // dS of every warp is in shared memory
    accumulate_grad_q<T, D, BQ>(dss, ks, grads.grad_q_acc + n * p.l * D, q0, p.l, scale);
  }

  store_key_grads<T, D>(dk, dv, key, n, p.s, scale, grads);
}

template <class T>
void launch_simple_backward(const FlashProblem& p, const FlashGrads& grads, cudaStream_t stream) {
  const unsigned blocks = grid_of(p.batch * ((p.s + kBlockRows - 1) / kBlockRows), "key");
  dispatch_head_dim(p.head_dim, [&](auto dim) {
    constexpr int D = decltype(dim)::value, BQ = D > 64 ? 32 : 64;
    constexpr int bytes = backward_smem_bytes<D, BQ>();
    const auto kernel = flash_backward_kernel<T, D, BQ>;
    allow_shared_memory(kernel, bytes);
    kernel<<<blocks, kThreads, bytes, stream>>>(p, grads);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace

namespace flash {
unsigned grid_of(int64_t blocks, const char* what) {
  LIFTOFF_CHECK(blocks <= INT32_MAX, ShapeError, "scaled_dot_product_attention: ", blocks, " ", what,
                " blocks exceed the CUDA grid; use the plain path (LIFTOFF_ATTENTION_FUSED=0)");
  return static_cast<unsigned>(blocks);
}
}  // namespace flash

void flash_forward(const FlashProblem& p, const Tensor& out, const Tensor& lse) {
  const int device = out.device().index;
  DeviceGuard guard(device);
  const cudaStream_t stream = compute_stream(device);
  if (p.pipelined) {
    pipelined_forward(p, out.dtype(), out.raw_data(), static_cast<float*>(lse.raw_data()), stream);
    return;
  }
  const unsigned blocks = grid_of(p.batch * ((p.l + kBlockRows - 1) / kBlockRows), "query");
  dispatch_half(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    dispatch_head_dim(p.head_dim, [&](auto dim) {
      constexpr int D = decltype(dim)::value, BC = 64;
      constexpr int bytes = forward_smem_bytes<D, BC>();
      const auto kernel = flash_forward_kernel<T, D, BC>;
      allow_shared_memory(kernel, bytes);
      kernel<<<blocks, kThreads, bytes, stream>>>(p, static_cast<T*>(out.raw_data()),
                                                  static_cast<float*>(lse.raw_data()));
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

void flash_backward(const FlashProblem& p, const Tensor& out, const Tensor& lse, const Tensor& grad_out,
                    const Tensor& delta, const Tensor& grad_q_acc, const Tensor& grad_q, const Tensor& grad_k,
                    const Tensor& grad_v) {
  const int device = out.device().index;
  DeviceGuard guard(device);
  const cudaStream_t stream = compute_stream(device);
  const int64_t rows = p.batch * p.l;
  LIFTOFF_CUDA_CHECK(cudaMemsetAsync(grad_q_acc.raw_data(), 0, grad_q_acc.nbytes(), stream));
  dispatch_half(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    flash_delta_kernel<T><<<grid_of((rows + kWarps - 1) / kWarps, "row"), kThreads, 0, stream>>>(
        static_cast<const T*>(grad_out.raw_data()), static_cast<const T*>(out.raw_data()),
        static_cast<float*>(delta.raw_data()), rows, p.head_dim);
    LIFTOFF_LAUNCH_CHECK();
    const FlashGrads grads{grad_out.raw_data(),
                           static_cast<const float*>(lse.raw_data()),
                           static_cast<const float*>(delta.raw_data()),
                           static_cast<float*>(grad_q_acc.raw_data()),
                           grad_k.raw_data(),
                           grad_v.raw_data()};
    if (p.pipelined) {
      pipelined_backward(p, out.dtype(), grads, stream);
    } else {
      launch_simple_backward<T>(p, grads, stream);
    }
    const int64_t count = grad_q.numel();
    const unsigned convert_blocks = static_cast<unsigned>(std::min<int64_t>((count + 255) / 256, 65536));
    flash_convert_kernel<T><<<convert_blocks, 256, 0, stream>>>(
        static_cast<const float*>(grad_q_acc.raw_data()), static_cast<T*>(grad_q.raw_data()), count);
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
