#include "ops/common/host_types.h"
#include "ops/common/remap.h"
#include "runtime/dispatch.h"
#include "runtime/parallel.h"

namespace liftoff::cpu {

void remap(const Tensor& src, const Tensor& dst, const RemapPlan& plan, double fill) {
  const Strided in = strided_of(src, "remap");
  const Strided out = strided_of(dst, "remap");
  dispatch_all(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* s = static_cast<const T*>(src.raw_data());
    T* d = static_cast<T*>(dst.raw_data());
    const T value = host_convert<T>(fill);
    parallel_for(0, dst.numel(), 1 << 14, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t from = remap_source(out, in, plan, i);
        d[strided_offset(out, i)] = from < 0 ? value : s[from];
      }
    });
  });
}

void sum_strided(const Tensor& src, const Strided& keep, const Strided& reduce, const Tensor& dst) {
  int64_t reduce_numel = 1;
  for (int d = 0; d < reduce.dims; ++d) reduce_numel *= reduce.shape[d];
  dispatch_all(src.dtype(), [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    if constexpr (std::is_integral_v<T>) {
      throw DTypeError(str_cat("sum_strided: dtype ", dtype_name(src.dtype()), " is not a floating type"));
    } else {
      const T* s = static_cast<const T*>(src.raw_data());
      T* d = static_cast<T*>(dst.raw_data());
      parallel_for(0, dst.numel(), 1 << 10, [&](int64_t lo, int64_t hi) {
        for (int64_t k = lo; k < hi; ++k) {
          const T* base = s + strided_offset(keep, k);
          A acc = 0;
          for (int64_t r = 0; r < reduce_numel; ++r) acc += host_convert<A>(base[strided_offset(reduce, r)]);
          d[k] = host_convert<T>(acc);
        }
      });
    }
  });
}

}  // namespace liftoff::cpu
