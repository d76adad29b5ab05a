#include "ops/reshape/reshape.h"

#include "runtime/autograd.h"

namespace liftoff {

namespace {
// The requested shape with its -1 resolved; throws naming both shapes when the sizes cannot match.
Shape resolve_shape(const Shape& from, const Shape& requested) {
  Shape target = requested;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == -1) {
      LIFTOFF_CHECK(infer < 0, ShapeError, "reshape: more than one -1 in ", shape_str(requested), " (input ",
                    shape_str(from), ")");
      infer = static_cast<int>(i);
    } else {
      LIFTOFF_CHECK(target[i] >= 0, ShapeError, "reshape: negative size in ", shape_str(requested),
                    " (input ", shape_str(from), ")");
      known *= target[i];
    }
  }
  const int64_t numel = shape_numel(from);
  if (infer >= 0) {
    LIFTOFF_CHECK(known > 0 && numel % known == 0, ShapeError, "reshape: cannot reshape ", shape_str(from),
                  " (", numel, " elements) into ", shape_str(requested));
    target[static_cast<size_t>(infer)] = numel / known;
  }
  LIFTOFF_CHECK(shape_numel(target) == numel, ShapeError, "reshape: cannot reshape ", shape_str(from), " (",
                numel, " elements) into ", shape_str(requested), " (", shape_numel(target), " elements)");
  return target;
}
}  // namespace

Tensor reshape(const Tensor& x, const Shape& shape) {
  LIFTOFF_CHECK(x.defined(), ValueError, "reshape: input is an undefined tensor");
  const Shape target = resolve_shape(x.shape(), shape);
  // contiguous() copies only when needed; view() then shares that storage.
  Tensor y = x.contiguous().view(target);
  if (should_record({x})) {
    record(y, "reshape", {x}, [x_shape = x.shape()](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{gy.contiguous().view(x_shape)};
    });
  }
  return y;
}

Tensor flatten(const Tensor& x, int64_t start_dim) {
  LIFTOFF_CHECK(x.defined(), ValueError, "flatten: input is an undefined tensor");
  const int64_t dims = x.dim();
  if (dims == 0) {
    LIFTOFF_CHECK(start_dim == 0 || start_dim == -1, ShapeError, "flatten: start_dim ", start_dim,
                  " out of range for a 0-d tensor");
    return reshape(x, {1});
  }
  const int64_t start = start_dim < 0 ? start_dim + dims : start_dim;
  LIFTOFF_CHECK(start >= 0 && start < dims, ShapeError, "flatten: start_dim ", start_dim,
                " out of range for shape ", shape_str(x.shape()));
  Shape target(x.shape().begin(), x.shape().begin() + start);
  int64_t rest = 1;
  for (int64_t d = start; d < dims; ++d) rest *= x.shape()[static_cast<size_t>(d)];
  target.push_back(rest);
  return reshape(x, target);
}

}  // namespace liftoff
