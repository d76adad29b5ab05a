#include "ops/common/host_types.h"
#include "ops/common/strided.h"
#include "ops/index/kernels.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

namespace {
// Offsets of the element at `linear` of the index's shape in the target (x or out), the index and the source,
// with the dim coordinate left out (and returned in coord).
struct Offsets {
  int64_t target = 0, index = 0, source = 0, coord = 0;
};
Offsets offsets_except(const Strided& shape, const Shape& target, const Shape& index, const Shape& source,
                       int64_t dim, int64_t linear) {
  Offsets o;
  for (int64_t d = shape.dims - 1; d >= 0; --d) {
    const int64_t c = linear % shape.shape[d];
    linear /= shape.shape[d];
    const auto k = static_cast<size_t>(d);
    if (d == dim) {
      o.coord = c;
      o.index += c * index[k];
      o.source += c * source[k];
    } else {
      o.target += c * target[k];
      o.index += c * index[k];
      o.source += c * source[k];
    }
  }
  return o;
}
}  // namespace

void gather(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& out) {
  const Strided is = strided_of(index, "gather");
  const int64_t* idx = index.data<int64_t>();
  const int64_t x_dim_stride = x.strides()[static_cast<size_t>(dim)];
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = static_cast<const T*>(x.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    parallel_for(0, out.numel(), 1 << 12, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const Offsets o = offsets_except(is, x.strides(), index.strides(), index.strides(), dim, i);
        dst[i] = src[o.target + idx[o.index] * x_dim_stride];
      }
    });
  });
}

void scatter_add(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src) {
  const Strided is = strided_of(index, "scatter_add");
  const int64_t* idx = index.data<int64_t>();
  const int64_t out_dim_stride = out.strides()[static_cast<size_t>(dim)];
  dispatch_all(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = host_acc_t<T>;
    const T* s = static_cast<const T*>(src.raw_data());
    T* dst = static_cast<T*>(out.raw_data());
    // Serial, in index order: repeated targets add up in the same order on every run.
    for (int64_t i = 0; i < index.numel(); ++i) {
      const Offsets o = offsets_except(is, out.strides(), index.strides(), src.strides(), dim, i);
      T& target = dst[o.target + idx[o.index] * out_dim_stride];
      target = host_convert<T>(host_convert<A>(target) + host_convert<A>(s[o.source]));
    }
  });
}

}  // namespace liftoff::cpu
