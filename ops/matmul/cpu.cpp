#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "ops/common/cpu_gemm.h"
#include "ops/matmul/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using ConstMap = Eigen::Map<const RowMajor<T>, 0, Eigen::OuterStride<>>;

// Matrix i of an operand of logical size rows x cols.
template <class T>
ConstMap<T> stored(const MatrixBatch& op, int64_t i, int64_t rows, int64_t cols) {
  const T* p = static_cast<const T*>(op.data) + op.start(i);
  return op.transpose ? ConstMap<T>(p, cols, rows, Eigen::OuterStride<>(op.ld))
                      : ConstMap<T>(p, rows, cols, Eigen::OuterStride<>(op.ld));
}

// C[r0:r0+rows, c0:c0+cols] = alpha * op(A) op(B) restricted to those rows/columns (one single-threaded
// GEMM).
template <class T, class C>
void block(const MatrixBatch& a, const MatrixBatch& b, int64_t i, int64_t m, int64_t n, int64_t k, T alpha,
           C& c, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  const ConstMap<T> sa = stored<T>(a, i, m, k), sb = stored<T>(b, i, k, n);
  auto out = c.block(r0, c0, rows, cols);
  if (!a.transpose && !b.transpose) {
    out.noalias() = alpha * sa.middleRows(r0, rows) * sb.middleCols(c0, cols);
  } else if (!a.transpose) {
    out.noalias() = alpha * sa.middleRows(r0, rows) * sb.middleRows(c0, cols).transpose();
  } else if (!b.transpose) {
    out.noalias() = alpha * sa.middleCols(r0, rows).transpose() * sb.middleCols(c0, cols);
  } else {
    out.noalias() = alpha * sa.middleCols(r0, rows).transpose() * sb.middleRows(c0, cols).transpose();
  }
}
// f32 on an AVX-512 host: ops/common/cpu_gemm.h's register-blocked kernel (16-wide vectors; the host build
// limits Eigen to AVX2's 8). It reads row-major operands, so a transposed B (linear's weight, attention's
// keys) is packed once per call and a transposed A (a weight gradient's g^T) per block of rows: copies of
// k x n and m x k floats against 2 m n k flops. Each element's sum runs over k in order whatever the split.
void gemm_f32_avx512(const MatrixBatch& a, const MatrixBatch& b, const MatrixBatch& c, int64_t batch,
                     int64_t m, int64_t n, int64_t k, float alpha) {
  const auto* a_data = static_cast<const float*>(a.data);
  const float* b_data = static_cast<const float*>(b.data);
  int64_t b_ld = b.ld;
  bool b_packed = false;
  if (b.transpose) {  // stored n x k: pack each distinct matrix to k x n
    const int64_t distinct = b.dims == 0 && b.batch_stride == 0 ? 1 : batch;
    // Reused across calls on this thread (grown, never shrunk; overwritten whole): a plain pointer for the
    // pool's threads, which would name their own thread_local.
    thread_local std::vector<float> b_buffer;
    if (b_buffer.size() < static_cast<size_t>(distinct * k * n))
      b_buffer.resize(static_cast<size_t>(distinct * k * n));
    float* const packed = b_buffer.data();
    parallel_for(0, distinct * k, std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(1, n)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t row = lo; row < hi; ++row) {  // row p of matrix i
                     const int64_t i = row / k, p = row % k;
                     const float* src = b_data + b.start(i) + p;
                     float* dst = packed + row * n;
                     for (int64_t j = 0; j < n; ++j) dst[j] = src[j * b.ld];
                   }
                 });
    b_data = packed;
    b_ld = n;
    b_packed = true;
  }
  const int64_t b_distinct_stride = b.dims == 0 && b.batch_stride == 0 ? 0 : k * n;
  const auto b_at = [&](int64_t i) { return b_packed ? i * b_distinct_stride : b.start(i); };
  auto* const c_data = static_cast<float*>(const_cast<void*>(c.data));
  const auto product = [&](int64_t i, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
    const float* ai = a_data + a.start(i);
    int64_t lda = a.ld;
    thread_local std::vector<float> a_packed;
    if (a.transpose) {  // stored k x m: rows r0.. of op(A) are columns of the stored matrix
      a_packed.resize(static_cast<size_t>(rows * k));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t p = 0; p < k; ++p) a_packed[static_cast<size_t>(r * k + p)] = ai[p * a.ld + r0 + r];
      ai = a_packed.data();
      lda = k;
    } else {
      ai += r0 * a.ld;
    }
    float* ci = c_data + c.start(i) + r0 * c.ld + c0;
    gemm::matmul<float>(rows, cols, k, ai, lda, b_data + b_at(i) + c0, b_ld, ci, c.ld);
    if (alpha != 1.0f) {
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) ci[r * c.ld + j] *= alpha;
    }
  };
  if (batch == 1 && m < n) {  // few rows: split the columns
    parallel_for(0, n, std::max<int64_t>(16, (1 << 18) / std::max<int64_t>(1, m * k)),
                 [&](int64_t lo, int64_t hi) { product(0, 0, m, lo, hi - lo); });
    return;
  }
  parallel_for(0, batch * m, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(1, n * k)),
               [&](int64_t lo, int64_t hi) {
                 while (lo < hi) {
                   const int64_t i = lo / m, r0 = lo % m, rows = std::min(hi - lo, m - r0);
                   product(i, r0, rows, 0, n);
                   lo += rows;
                 }
               });
}
}  // namespace

void batched_gemm(const MatrixBatch& a, const MatrixBatch& b, const MatrixBatch& c, const Tensor& out_tensor,
                  int64_t batch, int64_t m, int64_t n, int64_t k, double alpha) {
  if (k == 0) {
    out_tensor.zero_();
    return;
  }
  if (out_tensor.dtype() == DType::f32 && gemm::has_offset_kernel<float>()) {
    gemm_f32_avx512(a, b, c, batch, m, n, k, static_cast<float>(alpha));
    return;
  }
  dispatch_float(out_tensor.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    T* base = static_cast<T*>(const_cast<void*>(c.data));
    const T scale = static_cast<T>(alpha);
    using OutMap = Eigen::Map<RowMajor<T>, 0, Eigen::OuterStride<>>;
    const auto out = [&](int64_t i) { return OutMap(base + c.start(i), m, n, Eigen::OuterStride<>(c.ld)); };
    // Eigen runs single-threaded (runtime/parallel.h): split C into independent blocks across the pool (the
    // same sums in the same order whatever the split).
    if (batch == 1 && m < n) {
      auto c0 = out(0);
      parallel_for(0, n, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(1, m * k)),
                   [&](int64_t lo, int64_t hi) { block<T>(a, b, 0, m, n, k, scale, c0, 0, m, lo, hi - lo); });
      return;
    }
    // Rows of all batch entries as one range: a chunk covers parts of one or more matrices.
    parallel_for(0, batch * m, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(1, n * k)),
                 [&](int64_t lo, int64_t hi) {
                   while (lo < hi) {
                     const int64_t i = lo / m, r0 = lo % m, rows = std::min(hi - lo, m - r0);
                     auto ci = out(i);
                     block<T>(a, b, i, m, n, k, scale, ci, r0, rows, 0, n);
                     lo += rows;
                   }
                 });
  });
}

}  // namespace liftoff::cpu
