// Device helpers of the fused attention kernels (flash_cuda.cu, flash_pipelined_cuda.cu): tensor-core
// products through mma.sync.m16n8k16 (f16/bf16 in, f32 accumulation), fragment loads (plain and ldmatrix),
// cp.async copies and the quad reductions of the online softmax. Fragment layouts of m16n8k16
// (g = lane / 4, t = lane % 4):
//   A 16x16 (row major): reg0 (g, 2t..2t+1), reg1 (g+8, 2t..), reg2 (g, 2t+8..), reg3 (g+8, 2t+8..)
//   B 16x8  (k x n):     reg0 (k = 2t..2t+1, n = g), reg1 (k = 2t+8..2t+9, n = g)
//   C 16x8  (f32):       c0, c1 (g, 2t..2t+1), c2, c3 (g+8, 2t..2t+1)
// so the C fragments of two adjacent 8-column tiles are, rounded to 16 bits, the A fragment of the next
// product (P V, P^T dO, dS^T Q) without a trip through shared memory.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/attention/flash.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda::flash {

template <class T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// The 16 bits of x rounded to T.
template <class T>
__device__ __forceinline__ uint32_t bits16(float x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half_as_ushort(__float2half_rn(x));
  } else {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
}

// lo in the low half (the lower k or column index), hi in the high half.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  return bits16<T>(lo) | (bits16<T>(hi) << 16);
}

__device__ __forceinline__ uint32_t load32(const uint16_t* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Two elements of one column from rows r and r + 1 (a B fragment register of a row-major k x n tile).
__device__ __forceinline__ uint32_t column_pair(const uint16_t* tile, int stride, int r, int col) {
  return static_cast<uint32_t>(tile[r * stride + col]) |
         (static_cast<uint32_t>(tile[(r + 1) * stride + col]) << 16);
}

// A fragment of the 16 rows from `row0` and the 16 columns from `col0` of a row-major shared tile.
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const uint16_t* tile, int stride, int row0,
                                       int col0) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const uint16_t* p = tile + (row0 + g) * stride + col0 + 2 * t;
  a[0] = load32(p);
  a[1] = load32(p + 8 * stride);
  a[2] = load32(p + 8);
  a[3] = load32(p + 8 * stride + 8);
}

// The A fragment of rows x 16 columns (tiles 2c and 2c + 1 of an accumulator), rounded to T.
template <class T>
__device__ __forceinline__ void accumulator_to_a(uint32_t (&a)[4], const float (&lo)[4],
                                                 const float (&hi)[4]) {
  a[0] = pack2<T>(lo[0], lo[1]);
  a[1] = pack2<T>(lo[2], lo[3]);
  a[2] = pack2<T>(hi[0], hi[1]);
  a[3] = pack2<T>(hi[2], hi[3]);
}

__device__ __forceinline__ int64_t batch_offset(const FlashProblem& p, const FlashOperand& t, int64_t n) {
  int64_t offset = 0;
  for (int d = p.batch_ndim - 1; d >= 0; --d) {
    offset += n % p.batch_sizes[d] * t.batch_strides[d];
    n /= p.batch_sizes[d];
  }
  return offset;
}

__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 16-bit matrices; lanes 8m..8m+7 give the row addresses of matrix m, and register m of lane l
// holds row l / 4, columns 2 (l % 4)..+1 of matrix m (with .trans: of its transpose).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// The A fragment of rows row0..row0+15, columns col0..col0+15 of a row-major shared tile.
__device__ __forceinline__ void ldmatrix_a(uint32_t (&a)[4], const uint16_t* tile, int stride, int row0,
                                           int col0) {
  const int lane = threadIdx.x % 32, m = lane / 8;
  ldmatrix_x4(a, tile + (row0 + m % 2 * 8 + lane % 8) * stride + col0 + m / 2 * 8);
}

// The A fragment of the transpose of a row-major shared tile: rows row0.. of A are columns of the tile, the
// 16 columns from col0 of A its rows.
__device__ __forceinline__ void ldmatrix_a_transposed(uint32_t (&a)[4], const uint16_t* tile, int stride,
                                                      int row0, int col0) {
  const int lane = threadIdx.x % 32, m = lane / 8;
  ldmatrix_x4_trans(a, tile + (col0 + m / 2 * 8 + lane % 8) * stride + row0 + m % 2 * 8);
}

// B fragments {b[0], b[1]} of n tile n0..n0+7 and {b[2], b[3]} of n0+8..n0+15 for k = k0..k0+15, from a
// shared tile stored [n][k] (row n holds B's column n: K for Q K^T, Q for K Q^T, dO for V dO^T).
__device__ __forceinline__ void ldmatrix_b_from_nk(uint32_t (&b)[4], const uint16_t* tile, int stride, int n0,
                                                   int k0) {
  const int lane = threadIdx.x % 32, m = lane / 8;
  ldmatrix_x4(b, tile + (n0 + m / 2 * 8 + lane % 8) * stride + k0 + m % 2 * 8);
}

// The same from a shared tile stored [k][n] (row k holds B's row k: V for P V, dO for P^T dO, Q for dS^T Q,
// K for dS K).
__device__ __forceinline__ void ldmatrix_b_from_kn(uint32_t (&b)[4], const uint16_t* tile, int stride, int k0,
                                                   int n0) {
  const int lane = threadIdx.x % 32, m = lane / 8;
  ldmatrix_x4_trans(b, tile + (k0 + m % 2 * 8 + lane % 8) * stride + n0 + m / 2 * 8);
}

// 16 bytes global -> shared without a trip through registers; `bytes` < 16 fills the rest with zeros.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(bytes));
}

// 4 bytes, zero filled when `bytes` is 0.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(bytes));
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}

// Waits for this thread's copies; a __syncthreads() after it makes every thread's visible to the block.
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

}  // namespace liftoff::cuda::flash

namespace liftoff::cuda::flash {

// One key tile of the forward's online softmax for this thread's rows g and g + 8 of its warp: s holds the
// scores Q K^T of keys k0..k0+BC-1 and becomes the unnormalised weights 2^(s * scale_log2 - max); o, the
// running max and the running sum are rescaled to the new max. `masked`: some key of the tile lies past
// the keys or (causal) after a query of the block.
template <int BC, int D>
__device__ __forceinline__ void online_softmax_step(float (&s)[BC / 8][4], float (&o)[D / 8][4],
                                                    float (&row_max)[2], float (&row_sum)[2],
                                                    const FlashProblem& p, int64_t k0,
                                                    const int64_t (&query)[2], bool masked) {
  const int t = threadIdx.x % 4;
  float new_max[2] = {row_max[0], row_max[1]};
#pragma unroll
  for (int nt = 0; nt < BC / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int64_t key = k0 + nt * 8 + 2 * t + (e & 1);
      float x = s[nt][e] * p.scale_log2;
      if (masked && (key >= p.s || (p.causal && key > query[e >> 1]))) x = -INFINITY;
      s[nt][e] = x;
      new_max[e >> 1] = fmaxf(new_max[e >> 1], x);
    }
  }
  float base[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    new_max[h] = quad_max(new_max[h]);
    base[h] = new_max[h] == -INFINITY ? 0.f : new_max[h];  // no key seen yet: keep exp2 finite
    const float alpha = exp2f(row_max[h] - base[h]);
    row_max[h] = new_max[h];
    row_sum[h] *= alpha;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      o[dt][2 * h] *= alpha;
      o[dt][2 * h + 1] *= alpha;
    }
  }
#pragma unroll
  for (int nt = 0; nt < BC / 8; ++nt) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      s[nt][e] = exp2f(s[nt][e] - base[e >> 1]);
      row_sum[e >> 1] += s[nt][e];
    }
  }
}

// The forward's epilogue: rows query[0], query[1] of out (o / sum) and their logsumexp (log2 units).
template <class T, int D>
__device__ __forceinline__ void store_output(const float (&o)[D / 8][4], const float (&row_max)[2],
                                             const float (&row_sum)[2], const int64_t (&query)[2], int64_t n,
                                             int64_t l, T* out, float* lse) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float total = quad_sum(row_sum[h]);
    if (query[h] >= l) continue;
    const float inv = total > 0.f ? 1.f / total : 0.f;  // a row without keys gives zeros
    T* row = out + (n * l + query[h]) * D;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<uint32_t*>(row + dt * 8 + 2 * t) =
          pack2<T>(o[dt][2 * h] * inv, o[dt][2 * h + 1] * inv);
    if (t == 0) lse[n * l + query[h]] = total > 0.f ? row_max[h] + log2f(total) : INFINITY;
  }
}

struct FlashGrads {
  const void* grad_out;
  const float* lse;
  const float* delta;
  float* grad_q_acc;
  void* grad_k;
  void* grad_v;
};

// The backward's epilogue: rows key[0], key[1] of grad_k (dk * scale) and grad_v.
template <class T, int D>
__device__ __forceinline__ void store_key_grads(const float (&dk)[D / 8][4], const float (&dv)[D / 8][4],
                                                const int64_t (&key)[2], int64_t n, int64_t s, float scale,
                                                const FlashGrads& grads) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    if (key[h] >= s) continue;
    T* dk_row = static_cast<T*>(grads.grad_k) + (n * s + key[h]) * D + 2 * t;
    T* dv_row = static_cast<T*>(grads.grad_v) + (n * s + key[h]) * D + 2 * t;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
      *reinterpret_cast<uint32_t*>(dk_row + dt * 8) =
          pack2<T>(dk[dt][2 * h] * scale, dk[dt][2 * h + 1] * scale);
      *reinterpret_cast<uint32_t*>(dv_row + dt * 8) = pack2<T>(dv[dt][2 * h], dv[dt][2 * h + 1]);
    }
  }
}

// Adds an accumulator's rows q0 + row0 + g and + 8 (columns col0 + 8 dt + 2t, +1), times scale, to the f32
// [l, D] matrix acc; Hopper adds the pair with one vector atomic.
template <int D, int COLUMNS>
__device__ __forceinline__ void atomic_add_rows(float* acc, const float (&dq)[COLUMNS / 8][4], int64_t q0,
                                                int row0, int col0, int64_t l, float scale) {
  const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t q = q0 + row0 + g + 8 * h;
    if (q >= l) continue;
    float* row = acc + q * D + col0 + 2 * t;
#pragma unroll
    for (int dt = 0; dt < COLUMNS / 8; ++dt) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      atomicAdd(reinterpret_cast<float2*>(row + dt * 8),
                make_float2(dq[dt][2 * h] * scale, dq[dt][2 * h + 1] * scale));
#else
      atomicAdd(row + dt * 8, dq[dt][2 * h] * scale);
      atomicAdd(row + dt * 8 + 1, dq[dt][2 * h + 1] * scale);
#endif
    }
  }
}

// Host side, shared by the launchers.
unsigned grid_of(int64_t blocks, const char* what);

// Opts a kernel in to more than the default 48 KiB of dynamic shared memory (an attribute call, allowed
// during graph capture).
template <class Kernel>
void allow_shared_memory(Kernel kernel, int bytes) {
  if (bytes > 48 * 1024)
    LIFTOFF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
}

template <class Fn>
void dispatch_head_dim(int head_dim, Fn&& fn) {
  switch (head_dim) {
    case 32:
      fn(std::integral_constant<int, 32>{});
      return;
    case 64:
      fn(std::integral_constant<int, 64>{});
      return;
    case 128:
      fn(std::integral_constant<int, 128>{});
      return;
    default:
      throw ValueError(str_cat("scaled_dot_product_attention: the fused kernel has no head dim ", head_dim,
                               " (32, 64, 128)"));
  }
}

template <class Fn>
void dispatch_half(DType dtype, Fn&& fn) {
  LIFTOFF_CHECK(dtype == DType::f16 || dtype == DType::bf16, DTypeError,
                "scaled_dot_product_attention: the fused kernel takes f16/bf16, not ", dtype_name(dtype));
  if (dtype == DType::f16) {
    fn(__half{});
  } else {
    fn(__nv_bfloat16{});
  }
}

// The pipelined kernels (flash_pipelined_cuda.cu): 128-row tiles of 8 warps, cp.async double buffering,
// ldmatrix fragments. Same contracts as the simple kernels of flash_cuda.cu.
void pipelined_forward(const FlashProblem& p, DType dtype, void* out, float* lse, cudaStream_t stream);
void pipelined_backward(const FlashProblem& p, DType dtype, const FlashGrads& grads, cudaStream_t stream);

}  // namespace liftoff::cuda::flash
