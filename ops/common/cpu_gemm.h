// CPU-only helper: C = A * B for row-major matrices, single-threaded (callers split the work across the
// pool). f32 on a CPU with AVX-512F runs a register-blocked micro-kernel compiled for AVX-512 (chosen at run
// time, so the library still runs on AVX2-only hosts); everything else goes to Eigen. The host build targets
// x86-64-v3 (AVX2), which limits Eigen to 8-wide vectors; on AVX-512 hosts this kernel uses 16-wide ones.
// Used by conv2d for its forward and input-gradient products (M = filters or channels, N = output pixels, K =
// C*R*S or K*R*S). docs/perf.md ("CPU training speed vs PyTorch") has the measurements.
#pragma once
#include <Eigen/Core>
#include <cstdint>
#include <type_traits>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define LIFTOFF_HAVE_AVX512_KERNEL 1
#endif

namespace liftoff::cpu::gemm {

// Where the micro-kernel stores one 16-column vector of a C row (matmul_offsets with a column map): the lanes
// in `keep`, compressed to the front, at element `dst` of the row (`stored` = the low popcount(keep) lanes).
// Lets an implicit-im2col product drop its junk columns in the store instead of in a separate copy.
struct CompactVector {
  int64_t dst;
  uint16_t keep, stored;
};

#if LIFTOFF_HAVE_AVX512_KERNEL
inline bool cpu_has_avx512f() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}

namespace detail {
template <bool Masked>
__attribute__((target("avx512f"))) inline __m512 load(__mmask16 m, const float* p) {
  if constexpr (Masked) return _mm512_maskz_loadu_ps(m, p);
  return _mm512_loadu_ps(p);
}
template <bool Masked>
__attribute__((target("avx512f"))) inline void store(float* p, __mmask16 m, __m512 v) {
  if constexpr (Masked) return _mm512_mask_storeu_ps(p, m, v);
  _mm512_storeu_ps(p, v);
}

// One block of MR rows x NV*16 columns. Accumulates over all of K in registers (starting from C when `acc`),
// then stores: every C entry is one sum over k in order. With a column map `cv` (one entry per vector, never
// with `acc`), c is the row start and each vector goes where its entry says. Row r of A
// starts at a + r * lda, or at a + aoff[r] when `aoff` is given; row k of B at b + k * ldb, or at b + boff[k]
// (implicit im2col: rows at offsets into a padded image instead of materialised columns). Only the last
// vector of a block can be partial (`Masked`: its columns past N are masked with `mask`); the others load and
// store unmasked. With masks on both vectors GCC spilled them and reloaded both from the stack at every k:
// unmasked full strips are 1.05x to 1.15x faster.
template <int MR, int NV, bool Masked>
__attribute__((target("avx512f"))) inline void block(int64_t k_len, const float* a, int64_t lda,
                                                     const int64_t* aoff, const float* b, int64_t ldb,
                                                     const int64_t* boff, float* c, int64_t ldc,
                                                     const CompactVector* cv, __mmask16 mask, bool acc) {
  constexpr bool masked0 = Masked && NV == 1, masked1 = Masked && NV == 2, masked2 = Masked && NV == 3;
  __m512 acc0[MR], acc1[MR], acc2[MR];
  const float* arow[MR];
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    arow[r] = aoff ? a + aoff[r] : a + r * lda;
    acc0[r] = acc ? load<masked0>(mask, c + r * ldc) : _mm512_setzero_ps();
    acc1[r] = acc && NV >= 2 ? load<masked1>(mask, c + r * ldc + 16) : _mm512_setzero_ps();
    acc2[r] = acc && NV == 3 ? load<masked2>(mask, c + r * ldc + 32) : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < k_len; ++k) {
    const float* bk = boff ? b + boff[k] : b + k * ldb;
    const __m512 b0 = load<masked0>(mask, bk);
    const __m512 b1 = NV >= 2 ? load<masked1>(mask, bk + 16) : b0;
    const __m512 b2 = NV == 3 ? load<masked2>(mask, bk + 32) : b0;
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(arow[r][k]);
      acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
      if constexpr (NV >= 2) acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
      if constexpr (NV == 3) acc2[r] = _mm512_fmadd_ps(av, b2, acc2[r]);
    }
  }
  if (cv) {
#pragma GCC unroll 16
    for (int r = 0; r < MR; ++r) {
      const __m512 v[3] = {acc0[r], acc1[r], acc2[r]};
#pragma GCC unroll 3
      for (int q = 0; q < NV; ++q)
        _mm512_mask_storeu_ps(c + r * ldc + cv[q].dst, cv[q].stored,
                              _mm512_maskz_compress_ps(cv[q].keep, v[q]));
    }
    return;
  }
#pragma GCC unroll 16
  for (int r = 0; r < MR; ++r) {
    store<masked0>(c + r * ldc, mask, acc0[r]);
    if constexpr (NV >= 2) store<masked1>(c + r * ldc + 16, mask, acc1[r]);
    if constexpr (NV == 3) store<masked2>(c + r * ldc + 32, mask, acc2[r]);
  }
}

// All rows of one column strip: blocks of MR rows, then the remainder with halved blocks.
template <int MR, int NV, bool Masked>
__attribute__((target("avx512f"))) inline void strip(int64_t m, int64_t k, const float* a, int64_t lda,
                                                     const int64_t* aoff, const float* b, int64_t ldb,
                                                     const int64_t* boff, float* c, int64_t ldc,
                                                     const CompactVector* cv, __mmask16 mask, bool acc) {
  int64_t i = 0;
  for (; i + MR <= m; i += MR) {
    block<MR, NV, Masked>(k, aoff ? a : a + i * lda, lda, aoff ? aoff + i : nullptr, b, ldb, boff,
                          c + i * ldc, ldc, cv, mask, acc);
  }
  if constexpr (MR > 1) {
    if (i < m) {
      strip<MR / 2, NV, Masked>(m - i, k, aoff ? a : a + i * lda, lda, aoff ? aoff + i : nullptr, b, ldb,
                                boff, c + i * ldc, ldc, cv, mask, acc);
    }
  }
}

__attribute__((target("avx512f"))) inline void sgemm_avx512(int64_t m, int64_t n, int64_t k, const float* a,
                                                            int64_t lda, const int64_t* aoff, const float* b,
                                                            int64_t ldb, const int64_t* boff, float* c,
                                                            int64_t ldc, const CompactVector* cv, bool acc) {
  // Three vectors: 8 rows x 3 accumulators + 3 B vectors + 1 broadcast = 28 of 32 zmm registers, 11 loads
  // per 24 multiply-adds (two vectors: 10 per 16); 1.05x to 1.1x faster where N allows. The rest in strips of
  // two vectors, or one (16 rows, so each B vector still feeds 16 multiply-adds).
  // With a column map, every strip gets the row starts and its own entries.
  const auto cj = [&](int64_t j) { return cv ? c : c + j; };
  const auto vj = [&](int64_t j) { return cv ? cv + j / 16 : nullptr; };
  int64_t j = 0;
  for (; j + 48 <= n; j += 48)
    strip<8, 3, false>(m, k, a, lda, aoff, b + j, ldb, boff, cj(j), ldc, vj(j), 0, acc);
  for (; j < n; j += 32) {
    const int64_t cols = n - j < 32 ? n - j : 32;
    const __mmask16 mask = static_cast<__mmask16>((1u << (cols % 16)) - 1);  // the last vector's columns
    if (cols == 32) {
      strip<8, 2, false>(m, k, a, lda, aoff, b + j, ldb, boff, cj(j), ldc, vj(j), mask, acc);
    } else if (cols > 16) {
      strip<8, 2, true>(m, k, a, lda, aoff, b + j, ldb, boff, cj(j), ldc, vj(j), mask, acc);
    } else if (cols == 16) {
      strip<16, 1, false>(m, k, a, lda, aoff, b + j, ldb, boff, cj(j), ldc, vj(j), mask, acc);
    } else {
      strip<16, 1, true>(m, k, a, lda, aoff, b + j, ldb, boff, cj(j), ldc, vj(j), mask, acc);
    }
  }
}
}  // namespace detail
#endif

// C[m x n] = A[m x k] * B[k x n] (or C += A * B when `accumulate`); row-major with leading dimensions lda,
// ldb, ldc (elements).
template <class T>
void matmul(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb, T* c,
            int64_t ldc, bool accumulate = false) {
#if LIFTOFF_HAVE_AVX512_KERNEL
  if constexpr (std::is_same_v<T, float>) {
    if (cpu_has_avx512f()) {
      detail::sgemm_avx512(m, n, k, a, lda, nullptr, b, ldb, nullptr, c, ldc, nullptr, accumulate);
      return;
    }
  }
#endif
  using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  Eigen::Map<RowMat, 0, Stride> out(c, m, n, Stride(ldc));
  const Eigen::Map<const RowMat, 0, Stride> ma(a, m, k, Stride(lda));
  const Eigen::Map<const RowMat, 0, Stride> mb(b, k, n, Stride(ldb));
  if (accumulate) {
    out.noalias() += ma * mb;
  } else {
    out.noalias() = ma * mb;
  }
}

// Whether matmul_offsets can run here (f32 on a CPU with AVX-512F); callers fall back to materialised
// columns.
template <class T>
bool has_offset_kernel() {
#if LIFTOFF_HAVE_AVX512_KERNEL
  if constexpr (std::is_same_v<T, float>) return cpu_has_avx512f();
#endif
  return false;
}

// C[m x n] = A * B (or C += A * B) where row i of A starts at a + aoff[i] (or a + i * lda when aoff is null)
// and row p of B at b + boff[p] (or b + p * ldb). Only where has_offset_kernel<float>() is true. Masked loads
// read nothing past column n of a row. With a column map `cv` (ceil(n / 16) entries, not with `accumulate`),
// row i's vector q of C goes to c + i * ldc + cv[q].dst, compressed to its kept lanes.
inline void matmul_offsets([[maybe_unused]] int64_t m, [[maybe_unused]] int64_t n, [[maybe_unused]] int64_t k,
                           [[maybe_unused]] const float* a, [[maybe_unused]] int64_t lda,
                           [[maybe_unused]] const int64_t* aoff, [[maybe_unused]] const float* b,
                           [[maybe_unused]] int64_t ldb, [[maybe_unused]] const int64_t* boff,
                           [[maybe_unused]] float* c, [[maybe_unused]] int64_t ldc,
                           [[maybe_unused]] bool accumulate = false,
                           [[maybe_unused]] const CompactVector* cv = nullptr) {
#if LIFTOFF_HAVE_AVX512_KERNEL
  detail::sgemm_avx512(m, n, k, a, lda, aoff, b, ldb, boff, c, ldc, cv, accumulate);
#endif
}

}  // namespace liftoff::cpu::gemm
