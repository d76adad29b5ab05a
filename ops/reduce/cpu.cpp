#include <algorithm>
#include <vector>

#include "ops/reduce/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
constexpr int64_t kChunk = 1 << 14;
}

void sum_forward(const Tensor& x, double factor, const Tensor& y) {
  dispatch_float(x.dtype(), "sum", [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    const int64_t n = x.numel();
    // Fixed-size chunks summed in double, then the partials in order: the result does not depend on threads.
    const int64_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
    parallel_for(0, chunks, 1, [&](int64_t lo, int64_t hi) {
      for (int64_t c = lo; c < hi; ++c) {
        double acc = 0.0;
        const int64_t end = std::min(n, (c + 1) * kChunk);
        for (int64_t i = c * kChunk; i < end; ++i) acc += static_cast<double>(in[i]);
        partial[static_cast<size_t>(c)] = acc;
      }
    });
    double total = 0.0;
    for (double p : partial) total += p;
    y.data<T>()[0] = static_cast<T>(total * factor);
  });
}

void sum_backward(const Tensor& gy, double factor, const Tensor& gx) {
  dispatch_float(gy.dtype(), "sum backward", [&](auto tag) {
    using T = decltype(tag);
    const T value = static_cast<T>(static_cast<double>(gy.data<T>()[0]) * factor);
    T* out = gx.data<T>();
    parallel_for(0, gx.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) out[i] = value;
    });
  });
}

}  // namespace liftoff::cpu
