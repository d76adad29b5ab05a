#include <Eigen/Core>
#include <algorithm>

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
  const T* p = static_cast<const T*>(op.data) + i * op.batch_stride;
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
}  // namespace

void batched_gemm(const MatrixBatch& a, const MatrixBatch& b, const Tensor& c, int64_t batch, int64_t m,
                  int64_t n, int64_t k, double alpha) {
  if (k == 0) {
    c.zero_();
    return;
  }
  dispatch_float(c.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    T* base = c.data<T>();
    const T scale = static_cast<T>(alpha);
    const auto out = [&](int64_t i) { return Eigen::Map<RowMajor<T>>(base + i * m * n, m, n); };
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
