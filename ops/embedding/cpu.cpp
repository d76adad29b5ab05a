#include <algorithm>
#include <cstring>

#include "ops/common/index_dtype.h"
#include "ops/embedding/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void embedding_forward(const Tensor& indices, const Tensor& weight, const Tensor& out) {
  const int64_t n = indices.numel(), dim = weight.size(1);
  dispatch_float(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(indices.dtype(), "embedding", [&](auto itag) {
      using I = decltype(itag);
      const I* idx = indices.data<I>();
      const T* w = weight.data<T>();
      T* o = out.data<T>();
      parallel_for(0, n, std::max<int64_t>(1, 16384 / std::max<int64_t>(dim, 1)),
                   [&](int64_t lo, int64_t hi) {
                     for (int64_t p = lo; p < hi; ++p) {
                       std::memcpy(o + p * dim, w + static_cast<int64_t>(idx[p]) * dim,
                                   static_cast<size_t>(dim) * sizeof(T));
                     }
                   });
    });
  });
}

void embedding_backward(const Tensor& indices, const Tensor& gy, int64_t padding, const Tensor& gweight) {
  gweight.zero_();
  const int64_t n = indices.numel(), dim = gweight.size(1);
  dispatch_float(gweight.dtype(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(indices.dtype(), "embedding backward", [&](auto itag) {
      using I = decltype(itag);
      const I* idx = indices.data<I>();
      const T* g = gy.data<T>();
      T* gw = gweight.data<T>();
      // Threads own column ranges and walk the positions in order: deterministic for any thread count.
      parallel_for(0, dim, std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1)),
                   [&](int64_t lo, int64_t hi) {
                     for (int64_t p = 0; p < n; ++p) {
                       const int64_t r = static_cast<int64_t>(idx[p]);
                       if (r == padding) continue;
                       for (int64_t d = lo; d < hi; ++d) gw[r * dim + d] += g[p * dim + d];
                     }
                   });
    });
  });
}

}  // namespace liftoff::cpu
