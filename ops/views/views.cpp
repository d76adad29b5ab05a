#include "ops/views/views.h"

#include "ops/common/broadcast.h"

#include <algorithm>

#include "ops/common/remap.h"
#include "ops/reshape/reshape.h"
#include "runtime/autograd.h"

namespace liftoff {

namespace {
void check_defined(const Tensor& x, const char* op) {
  LIFTOFF_CHECK(x.defined(), ValueError, op, ": input is an undefined tensor");
}

// dim wrapped into [0, n); ShapeError naming op and shape otherwise.
int64_t wrap(int64_t dim, int64_t n, const char* op, const Shape& shape) {
  const int64_t w = dim < 0 ? dim + n : dim;
  LIFTOFF_CHECK(w >= 0 && w < n, ShapeError, op, ": dimension ", dim, " out of range for shape ",
                shape_str(shape), " (expected in [", -n, ", ", n - 1, "])");
  return w;
}

// A view whose gradient is gy reshaped back to x's shape (squeeze, unsqueeze, flatten, unflatten: the same
// elements in the same order, only the dims regrouped).
Tensor regrouped_view(const Tensor& x, Shape shape, Shape strides, const char* name) {
  Tensor out = raw_view(x, std::move(shape), std::move(strides), x.offset());
  if (should_record({x})) {
    record(out, name, {x}, [x_shape = x.shape()](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{reshape(gy, x_shape)};
    });
  }
  return out;
}

// Sizes of `shape` with one -1 inferred so that they hold `numel` elements.
Shape infer_sizes(const Shape& sizes, int64_t numel, const char* op, const Shape& x_shape) {
  Shape out = sizes;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      LIFTOFF_CHECK(infer < 0, ShapeError, op, ": more than one -1 in ", shape_str(sizes));
      infer = static_cast<int>(i);
    } else {
      LIFTOFF_CHECK(out[i] >= 0, ShapeError, op, ": negative size in ", shape_str(sizes));
      known *= out[i];
    }
  }
  if (infer >= 0 && known > 0) out[static_cast<size_t>(infer)] = numel / known;
  LIFTOFF_CHECK(shape_numel(out) == numel && (infer < 0 || known > 0), ShapeError, op, ": sizes ",
                shape_str(sizes), " do not hold the ", numel, " elements of that dimension of shape ",
                shape_str(x_shape));
  return out;
}
}  // namespace

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  check_defined(x, "slice");
  LIFTOFF_CHECK(step > 0, ValueError, "slice: step must be positive, got ", step, " (shape ",
                shape_str(x.shape()), "); use flip() to reverse");
  const int64_t w = wrap(dim, x.dim(), "slice", x.shape());
  const int64_t n = x.shape()[w];
  auto clamp_index = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  const int64_t lo = clamp_index(start);
  const int64_t hi = std::max(lo, clamp_index(end));
  Shape shape = x.shape();
  Shape strides = x.strides();
  shape[w] = (hi - lo + step - 1) / step;
  strides[w] *= step;
  const int64_t offset = x.offset() + lo * x.strides()[w];
  Tensor out = raw_view(x, shape, strides, offset);
  if (should_record({x})) {
    record(out, "slice", {x}, [x_shape = x.shape(), w, lo, step](const Tensor& gy, const NeedsGrad&) {
      const Tensor g = Tensor::zeros(x_shape, gy.dtype(), gy.device());
      Shape st = g.strides();
      const int64_t off = lo * st[w];
      st[w] *= step;
      raw_view(g, gy.shape(), st, off).copy_(gy);
      return std::vector<Tensor>{g};
    });
  }
  return out;
}

Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length) {
  check_defined(x, "narrow");
  const int64_t w = wrap(dim, x.dim(), "narrow", x.shape());
  const int64_t n = x.shape()[w];
  const int64_t s = start < 0 ? start + n : start;
  LIFTOFF_CHECK(s >= 0 && length >= 0 && s + length <= n, ShapeError, "narrow: start ", start, " and length ",
                length, " exceed dimension ", dim, " of shape ", shape_str(x.shape()));
  return slice(x, w, s, s + length);
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  check_defined(x, "select");
  const int64_t w = wrap(dim, x.dim(), "select", x.shape());
  const int64_t n = x.shape()[w];
  LIFTOFF_CHECK(index >= -n && index < n, ShapeError, "select: index ", index, " out of range for dimension ",
                dim, " of shape ", shape_str(x.shape()), " (expected in [", -n, ", ", n - 1, "])");
  return x.select(w, index < 0 ? index + n : index);
}

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  check_defined(x, "permute");
  return x.permute(dims);
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  check_defined(x, "transpose");
  const int64_t n = std::max<int64_t>(x.dim(), 1);
  // A 0-d tensor transposes to itself, as in PyTorch (dims 0 and -1 allowed).
  const int64_t a = wrap(dim0, n, "transpose", x.shape());
  const int64_t b = wrap(dim1, n, "transpose", x.shape());
  if (x.dim() == 0) return x;
  std::vector<int64_t> order(static_cast<size_t>(x.dim()));
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::swap(order[a], order[b]);
  return x.permute(order);
}

Tensor movedim(const Tensor& x, int64_t source, int64_t destination) {
  return movedim(x, std::vector<int64_t>{source}, std::vector<int64_t>{destination});
}

Tensor movedim(const Tensor& x, const std::vector<int64_t>& source, const std::vector<int64_t>& destination) {
  check_defined(x, "movedim");
  LIFTOFF_CHECK(source.size() == destination.size(), ShapeError, "movedim: ", source.size(),
                " source dims but ", destination.size(), " destination dims (shape ", shape_str(x.shape()),
                ")");
  const int64_t n = x.dim();
  std::vector<int64_t> order(static_cast<size_t>(n), -1);
  std::vector<bool> used(static_cast<size_t>(n), false);
  for (size_t i = 0; i < source.size(); ++i) {
    const int64_t s = wrap(source[i], n, "movedim", x.shape());
    const int64_t d = wrap(destination[i], n, "movedim", x.shape());
    LIFTOFF_CHECK(!used[s] && order[d] < 0, ShapeError, "movedim: repeated dim in source ", shape_str(source),
                  " or destination ", shape_str(destination), " (shape ", shape_str(x.shape()), ")");
    used[s] = true;
    order[d] = s;
  }
  // The other dims keep their relative order in the free destination slots.
  int64_t next = 0;
  for (auto& o : order) {
    if (o >= 0) continue;
    while (used[next]) ++next;
    o = next++;
  }
  return x.permute(order);
}

Tensor squeeze(const Tensor& x) {
  check_defined(x, "squeeze");
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d) dims.push_back(d);
  return squeeze(x, dims);
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  return squeeze(x, std::vector<int64_t>{dim});
}

Tensor squeeze(const Tensor& x, const std::vector<int64_t>& dims) {
  check_defined(x, "squeeze");
  // A 0-d tensor accepts dim 0 / -1, as in PyTorch.
  std::vector<bool> drop(static_cast<size_t>(x.dim()), false);
  for (int64_t d : dims) {
    const int64_t w = wrap(d, std::max<int64_t>(x.dim(), 1), "squeeze", x.shape());
    if (x.dim() > 0 && x.shape()[w] == 1) drop[w] = true;
  }
  Shape shape, strides;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (drop[d]) continue;
    shape.push_back(x.shape()[d]);
    strides.push_back(x.strides()[d]);
  }
  return regrouped_view(x, shape, strides, "squeeze");
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  check_defined(x, "unsqueeze");
  const int64_t w = wrap(dim, x.dim() + 1, "unsqueeze", x.shape());
  Shape shape = x.shape();
  Shape strides = x.strides();
  const int64_t stride = w < x.dim() ? x.shape()[w] * x.strides()[w] : 1;
  shape.insert(shape.begin() + w, 1);
  strides.insert(strides.begin() + w, stride);
  return regrouped_view(x, shape, strides, "unsqueeze");
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  check_defined(x, "flatten");
  if (x.dim() == 0) {
    wrap(start_dim, 1, "flatten", x.shape());
    wrap(end_dim, 1, "flatten", x.shape());
    return regrouped_view(x, {1}, {1}, "flatten");
  }
  const int64_t s = wrap(start_dim, x.dim(), "flatten", x.shape());
  const int64_t e = wrap(end_dim, x.dim(), "flatten", x.shape());
  LIFTOFF_CHECK(s <= e, ShapeError, "flatten: start_dim ", start_dim, " comes after end_dim ", end_dim,
                " for shape ", shape_str(x.shape()));
  Shape shape(x.shape().begin(), x.shape().begin() + s);
  Shape strides(x.strides().begin(), x.strides().begin() + s);
  // The run s..e is one strided run when each dim's stride is the next one's stride times its size
  // (size-1 dims have no say).
  int64_t count = 1, inner = 1, expected = -1;
  bool viewable = true;
  for (int64_t d = e; d >= s; --d) {
    count *= x.shape()[d];
    if (x.shape()[d] == 1) continue;
    if (expected < 0) {
      inner = x.strides()[d];
    } else if (x.strides()[d] != expected) {
      viewable = false;
    }
    expected = x.strides()[d] * x.shape()[d];
  }
  shape.push_back(count);
  strides.push_back(inner);
  shape.insert(shape.end(), x.shape().begin() + e + 1, x.shape().end());
  strides.insert(strides.end(), x.strides().begin() + e + 1, x.strides().end());
  if (!viewable) return reshape(x, shape);
  return regrouped_view(x, shape, strides, "flatten");
}

Tensor unflatten(const Tensor& x, int64_t dim, const Shape& sizes) {
  check_defined(x, "unflatten");
  const int64_t w = wrap(dim, x.dim(), "unflatten", x.shape());
  LIFTOFF_CHECK(!sizes.empty(), ShapeError, "unflatten: sizes must not be empty (shape ",
                shape_str(x.shape()), ")");
  const Shape split = infer_sizes(sizes, x.shape()[w], "unflatten", x.shape());
  Shape split_strides(split.size());
  int64_t stride = x.strides()[w];
  for (size_t i = split.size(); i-- > 0;) {
    split_strides[i] = stride;
    stride *= split[i];
  }
  Shape shape = x.shape();
  Shape strides = x.strides();
  shape.erase(shape.begin() + w);
  strides.erase(strides.begin() + w);
  shape.insert(shape.begin() + w, split.begin(), split.end());
  strides.insert(strides.begin() + w, split_strides.begin(), split_strides.end());
  return regrouped_view(x, shape, strides, "unflatten");
}

Tensor expand(const Tensor& x, const Shape& sizes) {
  check_defined(x, "expand");
  const int64_t n = static_cast<int64_t>(sizes.size());
  const int64_t lead = n - x.dim();
  LIFTOFF_CHECK(lead >= 0, ShapeError, "expand: cannot expand shape ", shape_str(x.shape()), " to ",
                shape_str(sizes), " (fewer dimensions)");
  Shape shape(sizes.size()), strides(sizes.size(), 0);
  for (int64_t d = 0; d < n; ++d) {
    if (d < lead) {
      LIFTOFF_CHECK(sizes[d] >= 0, ShapeError, "expand: size ", sizes[d], " for new leading dimension ", d,
                    " when expanding ", shape_str(x.shape()), " to ", shape_str(sizes));
      shape[d] = sizes[d];
      continue;
    }
    const int64_t own = x.shape()[d - lead];
    const int64_t want = sizes[d] == -1 ? own : sizes[d];
    LIFTOFF_CHECK(want == own || own == 1, ShapeError, "expand: cannot expand shape ", shape_str(x.shape()),
                  " to ", shape_str(sizes), ": dimension ", d, " has size ", own,
                  " (only size-1 dimensions can be expanded)");
    shape[d] = want;
    strides[d] = want == own ? x.strides()[d - lead] : 0;
  }
  if (shape == x.shape()) return x;
  Tensor out = raw_view(x, shape, strides, x.offset());
  if (should_record({x})) {
    record(out, "expand", {x}, [x_shape = x.shape()](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{sum_to_size(gy, x_shape)};
    });
  }
  return out;
}

Tensor broadcast_to(const Tensor& x, const Shape& shape) {
  return expand(x, shape);
}

Tensor sum_to_size(const Tensor& x, const Shape& shape) {
  check_defined(x, "sum_to_size");
  LIFTOFF_CHECK(is_floating(x.dtype()), DTypeError, "sum_to_size: dtype ", dtype_name(x.dtype()),
                " is not a floating type (shape ", shape_str(x.shape()), ")");
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  bool ok = lead >= 0;
  for (size_t i = 0; ok && i < shape.size(); ++i) {
    const int64_t have = x.shape()[lead + static_cast<int64_t>(i)];
    ok = shape[i] == have || shape[i] == 1;
  }
  LIFTOFF_CHECK(ok, ShapeError, "sum_to_size: shape ", shape_str(x.shape()), " is not a broadcast of ",
                shape_str(shape), " (each target size must equal the input's or be 1)");
  // The reduction over the broadcast dims is the one every broadcasting op's backward uses.
  return sum_to_shape(x, shape);
}

}  // namespace liftoff
