#include "ops/common/remap.h"

#include "runtime/dispatch.h"

namespace liftoff {

void remap_into(const Tensor& src, const Tensor& dst, const RemapPlan& plan, double fill) {
  if (dst.numel() == 0) return;
  LIFTOFF_DISPATCH(dst.device(), remap, src, dst, plan, fill);
}

void sum_strided_into(const Tensor& src, const Strided& keep, const Strided& reduce, const Tensor& dst) {
  if (dst.numel() == 0) return;
  LIFTOFF_DISPATCH(dst.device(), sum_strided, src, keep, reduce, dst);
}

}  // namespace liftoff
