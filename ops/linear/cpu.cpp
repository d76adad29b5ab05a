#include <Eigen/Core>
#include <algorithm>
#include <vector>

#include "ops/linear/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
template <class T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

void gemm(const Tensor& a, bool transpose_a, const Tensor& b, bool transpose_b, const Tensor& c) {
  dispatch_float(a.dtype(), "matmul", [&](auto tag) {
    using T = decltype(tag);
    Eigen::Map<const RowMajor<T>> ma(a.data<T>(), a.size(0), a.size(1));
    Eigen::Map<const RowMajor<T>> mb(b.data<T>(), b.size(0), b.size(1));
    Eigen::Map<RowMajor<T>> mc(c.data<T>(), c.size(0), c.size(1));
    const int64_t m = c.size(0), n = c.size(1), k = transpose_a ? a.size(0) : a.size(1);
    // Eigen runs single-threaded (runtime/parallel.h): split C into row or column blocks across the pool,
    // each block one independent GEMM (the same sums in the same order whatever the split).
    const auto block = [&](int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
      auto out = mc.block(r0, c0, rows, cols);
      if (!transpose_a && !transpose_b) {
        out.noalias() = ma.middleRows(r0, rows) * mb.middleCols(c0, cols);
      } else if (!transpose_a && transpose_b) {
        out.noalias() = ma.middleRows(r0, rows) * mb.middleRows(c0, cols).transpose();
      } else if (transpose_a && !transpose_b) {
        out.noalias() = ma.middleCols(r0, rows).transpose() * mb.middleCols(c0, cols);
      } else {
        out.noalias() = ma.middleCols(r0, rows).transpose() * mb.middleRows(c0, cols).transpose();
      }
    };
    const int64_t work = std::max<int64_t>(1, n * k);  // multiply-adds per row of C
    if (m >= n) {
      parallel_for(0, m, std::max<int64_t>(1, (1 << 18) / work),
                   [&](int64_t lo, int64_t hi) { block(lo, hi - lo, 0, n); });
    } else {
      parallel_for(0, n, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(1, m * k)),
                   [&](int64_t lo, int64_t hi) { block(0, m, lo, hi - lo); });
    }
  });
}

void bias_add(const Tensor& y, const Tensor& bias) {
  dispatch_float(y.dtype(), "linear bias", [&](auto tag) {
    using T = decltype(tag);
    T* out = y.data<T>();
    const T* b = bias.data<T>();
    const int64_t cols = y.size(1);
    parallel_for(0, y.size(0), std::max<int64_t>(1, (1 << 14) / std::max<int64_t>(cols, 1)),
                 [&](int64_t lo, int64_t hi) {
                   for (int64_t r = lo; r < hi; ++r) {
                     for (int64_t j = 0; j < cols; ++j) out[r * cols + j] += b[j];
                   }
                 });
  });
}

void bias_grad(const Tensor& gy, const Tensor& gb) {
  dispatch_float(gy.dtype(), "linear bias backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = gy.data<T>();
    T* out = gb.data<T>();
    const int64_t rows = gy.size(0);
    const int64_t cols = gy.size(1);
    // Column blocks per thread: each output is summed in row order by one thread (deterministic).
    parallel_for(0, cols, 64, [&](int64_t lo, int64_t hi) {
      std::vector<double> acc(static_cast<size_t>(hi - lo), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = lo; j < hi; ++j)
          acc[static_cast<size_t>(j - lo)] += static_cast<double>(g[r * cols + j]);
      }
      for (int64_t j = lo; j < hi; ++j) out[j] = static_cast<T>(acc[static_cast<size_t>(j - lo)]);
    });
  });
}

}  // namespace liftoff::cpu
