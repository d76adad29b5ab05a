#include <algorithm>

#include "ops/dropout/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"
#include "runtime/philox.h"

namespace liftoff::cpu {

void dropout_apply(const Tensor& x, double p, const PhiloxDraw& draw, const Tensor& y) {
  dispatch_float(x.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* out = y.data<T>();
    const float threshold = static_cast<float>(p);
    const T keep_scale = p < 1.0 ? static_cast<T>(1.0 / (1.0 - p)) : T(0);
    const int64_t groups = (x.numel() + 3) / 4;
    // One Philox call gives the four words of elements 4g .. 4g+3 (the same mapping as the CUDA kernel).
    parallel_for(0, groups, 1 << 12, [&](int64_t lo, int64_t hi) {
      for (int64_t g = lo; g < hi; ++g) {
        const Philox4 r = philox_at(draw.seed, draw.offset, static_cast<uint64_t>(g));
        const int64_t end = std::min<int64_t>(x.numel(), 4 * g + 4);
        for (int64_t i = 4 * g; i < end; ++i) {
          const bool keep = philox_uniform(r.v[i - 4 * g]) >= threshold;
          out[i] = keep ? in[i] * keep_scale : T(0);
        }
      }
    });
  });
}

}  // namespace liftoff::cpu
