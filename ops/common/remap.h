// Remapped copies: dst[o] = src[map(o)] where every dimension maps its output coordinate to a source
// coordinate on its own (copy, flip, roll, tile, or one of F.pad's modes), or to a fill value. One CPU and
// one CUDA kernel serve flip, roll, repeat and pad forward (and constant pad's backward). src and dst may
// have any strides (dst is written through its strides, so a channels-last dst stays channels-last).
#pragma once
#include <cstdint>

#include "ops/common/strided.h"

namespace liftoff {

enum class RemapKind : int32_t { copy, flip, roll, tile, pad_constant, pad_reflect, pad_replicate };

// shift: roll's shift normalised to [0, n); the left (leading) pad of the pad kinds.
struct DimRemap {
  RemapKind kind = RemapKind::copy;
  int64_t shift = 0;
};

struct RemapPlan {
  DimRemap dims[kMaxStridedDims];
};

// The source coordinate of output coordinate o along a dimension of source size n, or -1 for the fill value.
// Reflect needs its pads below n (one reflection); the others any o.
LIFTOFF_HOST_DEVICE int64_t remap_coord(DimRemap m, int64_t o, int64_t n) {
  const int64_t s = o - m.shift;
  switch (m.kind) {
    case RemapKind::copy:
      return o;
    case RemapKind::flip:
      return n - 1 - o;
    case RemapKind::roll:
      return s < 0 ? s + n : s;
    case RemapKind::tile:
      return o % n;
    case RemapKind::pad_constant:
      return s < 0 || s >= n ? -1 : s;
    case RemapKind::pad_reflect: {
      const int64_t r = s < 0 ? -s : s;
      return r >= n ? 2 * (n - 1) - r : r;
    }
    case RemapKind::pad_replicate:
      return s < 0 ? 0 : (s >= n ? n - 1 : s);
  }
  return o;
}

// Offset in src of the element dst's linear index `linear` reads, or -1 for the fill value.
LIFTOFF_HOST_DEVICE int64_t remap_source(const Strided& dst, const Strided& src, const RemapPlan& plan,
                                         int64_t linear) {
  int64_t off = 0;
  for (int d = dst.dims - 1; d >= 0; --d) {
    const int64_t o = linear % dst.shape[d];
    linear /= dst.shape[d];
    const int64_t s = remap_coord(plan.dims[d], o, src.shape[d]);
    if (s < 0) return -1;
    off += s * src.strides[d];
  }
  return off;
}

namespace cpu {
// dst (any strides, src's dtype and rank) = src remapped by plan; any dtype.
void remap(const Tensor& src, const Tensor& dst, const RemapPlan& plan, double fill);
// dst[k] = sum over r of src[keep(k) + reduce(r)] (offsets from src's first element), dst contiguous with
// keep's shape; floating dtypes, accumulated in f64 for f64 and f32 otherwise.
void sum_strided(const Tensor& src, const Strided& keep, const Strided& reduce, const Tensor& dst);
}  // namespace cpu
namespace cuda {
void remap(const Tensor& src, const Tensor& dst, const RemapPlan& plan, double fill);
void sum_strided(const Tensor& src, const Strided& keep, const Strided& reduce, const Tensor& dst);
}  // namespace cuda

// Device-dispatching fronts of the two kernels above (no checks, no autograd).
void remap_into(const Tensor& src, const Tensor& dst, const RemapPlan& plan, double fill = 0.0);
void sum_strided_into(const Tensor& src, const Strided& keep, const Strided& reduce, const Tensor& dst);

}  // namespace liftoff
