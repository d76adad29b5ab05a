#include <algorithm>
#include <vector>

#include "ops/common/elementwise_cpu.h"
#include "ops/reduce/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
constexpr int64_t kChunk = 1 << 14;

// Reduces each (outer, inner) column of x [outer, extent, inner] in fixed chunks of the extent, then the
// chunks' states in order: the result does not depend on the number of threads.
template <class T, class R>
void reduce_columns(const T* x, int64_t outer, int64_t extent, int64_t inner, const R& reducer, T* values,
                    int64_t* indices) {
  using State = typename R::State;
  const int64_t outputs = outer * inner;
  const int64_t chunks = std::max<int64_t>(1, (extent + kChunk - 1) / kChunk);
  std::vector<State> partial(static_cast<size_t>(outputs * chunks));
  parallel_for(0, outputs * chunks, std::max<int64_t>(1, kChunk / std::max<int64_t>(1, extent)),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t job = lo; job < hi; ++job) {
                   const int64_t out = job / chunks;
                   const int64_t chunk = job % chunks;
                   const T* column = x + (out / inner) * extent * inner + out % inner;
                   State s = reducer.identity();
                   const int64_t end = std::min(extent, (chunk + 1) * kChunk);
                   for (int64_t r = chunk * kChunk; r < end; ++r) {
                     s = reducer.combine(s, reducer.map(static_cast<double>(column[r * inner]), r));
                   }
                   partial[static_cast<size_t>(job)] = s;
                 }
               });
  for (int64_t out = 0; out < outputs; ++out) {
    State s = partial[static_cast<size_t>(out * chunks)];
    for (int64_t c = 1; c < chunks; ++c)
      s = reducer.combine(s, partial[static_cast<size_t>(out * chunks + c)]);
    if (values != nullptr) values[out] = static_cast<T>(reducer.value(s));
    if (indices != nullptr) indices[out] = reducer.index(s);
  }
}
}  // namespace

void reduce_forward(const Tensor& x, int64_t outer, int64_t extent, int64_t inner, const ReduceParams& params,
                    const Tensor& values, const Tensor& indices) {
  dispatch_float(x.dtype(), "reduce", [&](auto tag) {
    using T = decltype(tag);
    visit_reducer<double>(params, [&](const auto& reducer) {
      reduce_columns<T>(x.data<T>(), outer, extent, inner, reducer,
                        values.defined() ? values.data<T>() : nullptr,
                        indices.defined() ? indices.data<int64_t>() : nullptr);
    });
  });
}

void index_backward(const Tensor& gy, const Tensor& indices, int64_t outer, int64_t extent, int64_t inner,
                    const Tensor& gx) {
  dispatch_float(gy.dtype(), "max/min backward", [&](auto tag) {
    using T = decltype(tag);
    const T* g = gy.data<T>();
    const int64_t* idx = indices.data<int64_t>();
    T* out = gx.data<T>();
    parallel_for(0, outer * extent * inner, 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t column = (i / (extent * inner)) * inner + i % inner;
        const int64_t r = (i / inner) % extent;
        out[i] = idx[column] == r ? g[column] : T(0);
      }
    });
  });
}

void reduce_grad(ReduceGradKind kind, double param, const ElementwisePlan& plan, const Tensor& x,
                 const Tensor& gy, const Tensor& stat, const Tensor& gx) {
  dispatch_float(x.dtype(), "reduce backward", [&](auto tag) {
    using T = decltype(tag);
    visit_reduce_grad<T>(kind, param, [&](const auto& f) {
      elementwise(plan, gx.data<T>(), f, tensor_input<T>(x),
                  gy.defined() ? tensor_input<T>(gy) : constant_input<T>(T(1)), tensor_input<T>(stat));
    });
  });
}

}  // namespace liftoff::cpu
