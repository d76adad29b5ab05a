#include "ops/repeat/repeat.h"

#include "ops/common/remap.h"
#include "runtime/autograd.h"

namespace liftoff {

namespace {
// gx[k] = sum over the tiles of gy, with gy's dim d seen as [repeats[d], base[d]].
Tensor sum_tiles(const Tensor& gy, const Shape& base, const std::vector<int64_t>& repeats,
                 const Shape& x_shape) {
  Shape red_strides(base.size());
  Shape keep_strides(base.size());
  for (size_t d = 0; d < base.size(); ++d) {
    keep_strides[d] = gy.strides()[d];
    red_strides[d] = gy.strides()[d] * base[d];
  }
  const Tensor gx = Tensor::empty(base, gy.dtype(), gy.device());
  sum_strided_into(gy, strided_of(base, keep_strides, "repeat backward"),
                   strided_of(Shape(repeats.begin(), repeats.end()), red_strides, "repeat backward"), gx);
  return gx.view(x_shape);
}
}  // namespace

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  LIFTOFF_CHECK(x.defined(), ValueError, "repeat: input is an undefined tensor");
  const int64_t lead = static_cast<int64_t>(repeats.size()) - x.dim();
  LIFTOFF_CHECK(lead >= 0, ShapeError, "repeat: ", repeats.size(), " repeats ", shape_str(repeats),
                " for shape ", shape_str(x.shape()), "; give at least one per dimension");
  // x seen with leading size-1 dims, so every dim tiles.
  Shape base(repeats.size(), 1), base_strides(repeats.size(), 0), out_shape(repeats.size());
  RemapPlan plan;
  for (size_t d = 0; d < repeats.size(); ++d) {
    LIFTOFF_CHECK(repeats[d] >= 0, ShapeError, "repeat: negative count in ", shape_str(repeats), " (shape ",
                  shape_str(x.shape()), ")");
    if (static_cast<int64_t>(d) >= lead) {
      base[d] = x.shape()[d - lead];
      base_strides[d] = x.strides()[d - lead];
    }
    out_shape[d] = base[d] * repeats[d];
    plan.dims[d].kind = RemapKind::tile;
  }
  strided_of(out_shape, contiguous_strides(out_shape), "repeat");
  const Tensor src = raw_view(x, base, base_strides, x.offset());
  const Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  remap_into(src, out, plan);
  if (should_record({x})) {
    record(out, "repeat", {x}, [base, repeats, x_shape = x.shape()](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{sum_tiles(gy, base, repeats, x_shape)};
    });
  }
  return out;
}

}  // namespace liftoff
