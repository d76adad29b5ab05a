#include <algorithm>
#include <vector>

#include "ops/linear/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

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
