// CPU loops over an ElementwisePlan: out[i] = f(inputs at i...). An input is a tensor (read through the
// plan's strides) or a constant. Used by the CPU kernels of the elementwise ops (binary, compare, where,
// ...).
#pragma once
#include <algorithm>
#include <tuple>
#include <utility>

#include "ops/common/elementwise.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

// One input of an elementwise loop: a tensor's first element, or (data == nullptr) a constant.
template <class T>
struct ElementInput {
  const T* data = nullptr;
  T value{};
  T at(int64_t offset) const { return data != nullptr ? data[offset] : value; }
};

template <class T>
ElementInput<T> tensor_input(const Tensor& t) {
  return {static_cast<const T*>(t.raw_data()), T{}};
}
template <class T>
ElementInput<T> constant_input(T value) {
  return {nullptr, value};
}

namespace detail {
constexpr int64_t kElementwiseGrain = 1 << 14;

// The loop bodies are function objects over a tuple of inputs rather than lambdas capturing the pack (GCC 12
// crashes on folds over a captured pack).
template <class Out, class F, class... T>
struct ElementwiseRange {
  static constexpr size_t N = sizeof...(T);
  const ElementwisePlan& plan;
  Out* out;
  const F& f;
  std::tuple<ElementInput<T>...> in;
  int slot[N > 0 ? N : 1];  // the plan's stride row of each input, -1 for a constant

  ElementwiseRange(const ElementwisePlan& p, Out* o, const F& fn, const ElementInput<T>&... inputs)
      : plan(p), out(o), f(fn), in(inputs...), slot{} {
    int next = 0;
    int k = 0;
    ((slot[k++] = inputs.data != nullptr ? next++ : -1), ...);
  }

  int64_t stride(size_t k, int d) const { return slot[k] < 0 ? 0 : plan.strides[slot[k]][d]; }

  void operator()(int64_t lo, int64_t hi) const {
    if (plan.dense) {
      dense(lo, hi, std::index_sequence_for<T...>{});
    } else {
      strided(lo, hi, std::index_sequence_for<T...>{});
    }
  }

  template <size_t... K>
  void dense(int64_t lo, int64_t hi, std::index_sequence<K...>) const {
    if (((std::get<K>(in).data != nullptr) && ...)) {
      dense_tensors(lo, hi, out, std::get<K>(in).data...);  // restrict pointers: the loop vectorises
    } else {
      for (int64_t i = lo; i < hi; ++i) out[i] = static_cast<Out>(f(std::get<K>(in).at(i)...));
    }
  }

  void dense_tensors(int64_t lo, int64_t hi, Out* __restrict dst, const T* __restrict... src) const {
    for (int64_t i = lo; i < hi; ++i) dst[i] = static_cast<Out>(f(src[i]...));
  }

  template <size_t... K>
  void strided(int64_t lo, int64_t hi, std::index_sequence<K...>) const {
    const int last = plan.dims - 1;
    int64_t index[kElementwiseMaxDims] = {};
    int64_t off[N > 0 ? N : 1] = {};
    int64_t rem = lo;
    for (int d = last; d >= 0; --d) {
      index[d] = rem % plan.sizes[d];
      rem /= plan.sizes[d];
      for (size_t k = 0; k < N; ++k) off[k] += index[d] * stride(k, d);
    }
    int64_t inner[N > 0 ? N : 1] = {};
    for (size_t k = 0; k < N; ++k) inner[k] = stride(k, last);
    for (int64_t i = lo; i < hi;) {
      const int64_t run = std::min(hi - i, plan.sizes[last] - index[last]);
      for (int64_t j = 0; j < run; ++j) {
        out[i + j] = static_cast<Out>(f(std::get<K>(in).at(off[K] + j * inner[K])...));
      }
      i += run;
      for (size_t k = 0; k < N; ++k) off[k] += run * inner[k];
      index[last] += run;
      for (int d = last; d > 0 && index[d] == plan.sizes[d]; --d) {  // carry into the outer dimensions
        for (size_t k = 0; k < N; ++k) off[k] += stride(k, d - 1) - plan.sizes[d] * stride(k, d);
        index[d] = 0;
        ++index[d - 1];
      }
    }
  }
};
}  // namespace detail

// out[i] = f(in...) over the plan; f takes the inputs' element types and returns something convertible to
// Out.
template <class Out, class F, class... T>
void elementwise(const ElementwisePlan& plan, Out* out, const F& f, const ElementInput<T>&... in) {
  if (plan.numel == 0) return;
  const detail::ElementwiseRange<Out, F, T...> range(plan, out, f, in...);
  parallel_for(0, plan.numel, detail::kElementwiseGrain, range);
}

}  // namespace liftoff::cpu
