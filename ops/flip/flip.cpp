#include "ops/flip/flip.h"

#include "ops/common/layout.h"
#include "ops/common/remap.h"
#include "ops/reshape/reshape.h"
#include "runtime/autograd.h"

namespace liftoff {

namespace {
int64_t wrap(const Tensor& x, int64_t dim, const char* op) {
  const int64_t n = x.dim();
  const int64_t w = dim < 0 ? dim + n : dim;
  LIFTOFF_CHECK(w >= 0 && w < n, ShapeError, op, ": dim ", dim, " out of range for shape ",
                shape_str(x.shape()), " (expected in [", -n, ", ", n - 1, "])");
  return w;
}

// A copy of x in its op layout, remapped by plan (no autograd).
Tensor remapped(const Tensor& x, const RemapPlan& plan) {
  strided_of(x, "flip/roll");  // rank check before any work
  const Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), op_memory_format(x));
  remap_into(x, out, plan);
  return out;
}
}  // namespace

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  LIFTOFF_CHECK(x.defined(), ValueError, "flip: input is an undefined tensor");
  RemapPlan plan;
  std::vector<bool> seen(static_cast<size_t>(x.dim()), false);
  for (int64_t d : dims) {
    const int64_t w = wrap(x, d, "flip");
    LIFTOFF_CHECK(!seen[w], ShapeError, "flip: dim ", d, " appears twice in ", shape_str(dims), " (shape ",
                  shape_str(x.shape()), ")");
    seen[w] = true;
    plan.dims[w].kind = RemapKind::flip;
  }
  const Tensor out = remapped(x, plan);
  if (should_record({x})) {
    record(out, "flip", {x},
           [dims](const Tensor& gy, const NeedsGrad&) { return std::vector<Tensor>{flip(gy, dims)}; });
  }
  return out;
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  LIFTOFF_CHECK(x.defined(), ValueError, "roll: input is an undefined tensor");
  if (dims.empty()) {
    LIFTOFF_CHECK(shifts.size() == 1, ShapeError, "roll: without dims, exactly one shift is expected, got ",
                  shape_str(shifts), " (shape ", shape_str(x.shape()), ")");
    return reshape(roll(reshape(x, {-1}), shifts, {0}), x.shape());
  }
  LIFTOFF_CHECK(shifts.size() == dims.size(), ShapeError, "roll: shifts ", shape_str(shifts), " and dims ",
                shape_str(dims), " differ in length (shape ", shape_str(x.shape()), ")");
  RemapPlan plan;
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t w = wrap(x, dims[i], "roll");
    const int64_t n = x.shape()[w];
    if (n == 0) continue;
    // Repeated dims add up, as in PyTorch.
    const int64_t total = plan.dims[w].shift + shifts[i] % n;
    plan.dims[w] = {RemapKind::roll, ((total % n) + n) % n};
  }
  const Tensor out = remapped(x, plan);
  if (should_record({x})) {
    std::vector<int64_t> back;
    for (int64_t s : shifts) back.push_back(-s);
    record(out, "roll", {x}, [back, dims](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{roll(gy, back, dims)};
    });
  }
  return out;
}

}  // namespace liftoff
