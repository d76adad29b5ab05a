#include "ops/reduce/reduce.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>

#include "ops/binary/binary.h"
#include "ops/cast/cast.h"
#include "ops/common/broadcast.h"
#include "ops/reduce/kernels.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {

void check_input(const char* op, const Tensor& x) {
  LIFTOFF_CHECK(x.defined(), ValueError, op, ": input is an undefined tensor");
  LIFTOFF_CHECK(is_floating(x.dtype()), DTypeError, op, ": input ", shape_str(x.shape()), " has dtype ",
                dtype_name(x.dtype()), ", expected a floating type");
  LIFTOFF_CHECK(x.is_cuda() || x.dtype() == DType::f32 || x.dtype() == DType::f64, DTypeError, op, ": input ",
                shape_str(x.shape()), " has dtype ", dtype_name(x.dtype()),
                "; the CPU computes f32 and f64 (cast first, or run on CUDA)");
}

// Under autocast, the f32-list reductions read half CUDA inputs in f32 (and so return f32), as PyTorch.
Tensor autocast_f32(const Tensor& x) {
  const bool half = x.dtype() == DType::f16 || x.dtype() == DType::bf16;
  return half && x.is_cuda() && autocast_enabled() ? cast(x, DType::f32) : x;
}

// Which dimensions `dims` reduces (all for an empty list). A 0-d tensor accepts 0 and -1.
std::vector<bool> reduced_mask(const char* op, const Tensor& x, const std::vector<int64_t>& dims) {
  const int64_t rank = x.dim();
  std::vector<bool> mask(static_cast<size_t>(rank), dims.empty());
  for (int64_t d : dims) {
    const int64_t span = std::max<int64_t>(rank, 1);
    const int64_t w = d < 0 ? d + span : d;
    LIFTOFF_CHECK(w >= 0 && w < span, ShapeError, op, ": dimension ", d, " out of range for shape ",
                  shape_str(x.shape()), " (expected -", span, " to ", span - 1, ")");
    if (rank == 0) continue;
    LIFTOFF_CHECK(!mask[static_cast<size_t>(w)], ShapeError, op, ": dimension ", d,
                  " appears more than once in the dims of shape ", shape_str(x.shape()));
    mask[static_cast<size_t>(w)] = true;
  }
  return mask;
}

Shape result_shape(const Shape& shape, const std::vector<bool>& mask, bool keepdim) {
  Shape out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!mask[d]) {
      out.push_back(shape[d]);
    } else if (keepdim) {
      out.push_back(1);
    }
  }
  return out;
}

int64_t reduced_count(const Shape& shape, const std::vector<bool>& mask) {
  int64_t n = 1;
  for (size_t d = 0; d < shape.size(); ++d) n *= mask[d] ? shape[d] : 1;
  return n;
}

// x's data as a contiguous [outer, extent, inner] block, and the order (logical dims) in which the kept
// dimensions of the result come out. A channels-last CUDA tensor is read in its memory order; reduced
// dimensions that are not adjacent (size-1 dimensions aside) are first permuted behind the kept ones.
struct ReductionLayout {
  Tensor data;
  int64_t outer = 1, extent = 1, inner = 1;
  std::vector<int64_t> kept_order;
};

ReductionLayout reduction_layout(const Tensor& x, const std::vector<bool>& mask) {
  const int64_t rank = x.dim();
  std::vector<int64_t> order(static_cast<size_t>(rank));
  std::iota(order.begin(), order.end(), 0);
  ReductionLayout l;
  if (x.is_cuda() && !x.is_contiguous() && x.is_channels_last()) {
    order = {0, 2, 3, 1};
    l.data = x.permute(order);  // a contiguous view
  } else {
    l.data = x.contiguous();
  }
  auto reduced = [&](size_t k) { return mask[static_cast<size_t>(order[k])]; };
  auto size = [&](size_t k) { return x.shape()[static_cast<size_t>(order[k])]; };
  // One block of reduced dimensions (ignoring size-1 dimensions) reads in place; otherwise permute.
  int blocks = 0;
  bool in_block = false;
  for (size_t k = 0; k < order.size(); ++k) {
    if (size(k) == 1) continue;
    if (reduced(k) && !in_block) ++blocks;
    in_block = reduced(k);
  }
  if (blocks > 1) {
    std::vector<int64_t> perm;
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t k = 0; k < order.size(); ++k) {
        if (reduced(k) == (pass == 1)) perm.push_back(static_cast<int64_t>(k));
      }
    }
    std::vector<int64_t> composed;
    for (int64_t k : perm) composed.push_back(order[static_cast<size_t>(k)]);
    l.data = l.data.permute(perm).contiguous();
    order = composed;
  }
  bool seen_block = false;
  for (size_t k = 0; k < order.size(); ++k) {
    if (reduced(k)) {
      l.extent *= size(k);
      seen_block = seen_block || size(k) != 1;
    } else {
      (seen_block ? l.inner : l.outer) *= size(k);
      l.kept_order.push_back(order[k]);
    }
  }
  return l;
}

struct Reduced {
  Tensor values;
  Tensor indices;
};

// Runs one reduction of x (no autograd) into values (x's dtype) and/or indices (i64) of the result shape.
Reduced run_reduction(const Tensor& input, const std::vector<bool>& mask, bool keepdim,
                      const ReduceParams& params, bool want_values, bool want_indices) {
  const Tensor x = input.detach();
  const ReductionLayout l = reduction_layout(x, mask);
  Shape kept_sizes;
  for (int64_t d : l.kept_order) kept_sizes.push_back(x.shape()[static_cast<size_t>(d)]);
  Reduced r;
  if (want_values) r.values = Tensor::empty(kept_sizes, x.dtype(), x.device());
  if (want_indices) r.indices = Tensor::empty(kept_sizes, DType::i64, x.device());
  LIFTOFF_DISPATCH(x.device(), reduce_forward, l.data, l.outer, l.extent, l.inner, params, r.values,
                   r.indices);
  // Back to the logical order of the kept dimensions.
  const Shape shape = result_shape(x.shape(), mask, keepdim);
  std::vector<int64_t> back(l.kept_order.size());
  std::iota(back.begin(), back.end(), 0);
  std::sort(back.begin(), back.end(), [&](int64_t a, int64_t b) {
    return l.kept_order[static_cast<size_t>(a)] < l.kept_order[static_cast<size_t>(b)];
  });
  const bool ordered = std::is_sorted(l.kept_order.begin(), l.kept_order.end());
  for (Tensor* t : {&r.values, &r.indices}) {
    if (t->defined()) *t = (ordered ? *t : t->permute(back).contiguous()).view(shape);
  }
  return r;
}

// gx = f(x, gy, stat) elementwise over x's shape (ReduceGradKind), gy and stat in the keepdim shape; an
// undefined gy reads as 1.
Tensor reduce_grad_tensor(ReduceGradKind kind, double param, const Tensor& x, const Tensor& gy,
                          const Tensor& stat) {
  const ElementwisePlan plan =
      make_elementwise_plan("reduce backward", x.shape(), MemoryFormat::contiguous, {x, gy, stat});
  Tensor gx = Tensor::empty(x.shape(), x.dtype(), x.device());
  LIFTOFF_DISPATCH(x.device(), reduce_grad, kind, param, plan, x, gy, stat, gx);
  return gx;
}

// The incoming gradient in the keepdim shape (contiguous).
Tensor keep_shape_grad(const Tensor& gy, const Shape& keep_shape) {
  return gy.contiguous().view(keep_shape);
}

// gy * scale broadcast over `shape` (sum and mean backward).
Tensor broadcast_grad(const Tensor& gy, const Shape& keep_shape, const Shape& shape, double scale) {
  const Tensor g = broadcast_to(keep_shape_grad(gy, keep_shape), shape);
  return scale == 1.0 ? g.contiguous() : mul(g, scale);
}

// The amax/amin rule: gy split evenly among the elements of x that equal the result (or whose |x| does).
Tensor split_among_equal(ReduceGradKind equal, const Tensor& x, const Tensor& gy_keep, const Tensor& y_keep,
                         const std::vector<int64_t>& dims) {
  const Tensor count = sum(reduce_grad_tensor(equal, 0, x, Tensor(), y_keep), dims, /*keepdim=*/true);
  return div(gy_keep, count);
}

std::vector<int64_t> mask_dims(const std::vector<bool>& mask) {
  std::vector<int64_t> dims;
  for (size_t d = 0; d < mask.size(); ++d) {
    if (mask[d]) dims.push_back(static_cast<int64_t>(d));
  }
  return dims;
}

// sum, mean, var, std, norm, logsumexp: one value per column, a gradient from (x, gy, y).
using GradRule = std::function<Tensor(const Tensor& x, const Tensor& gy_keep, const Tensor& y_keep,
                                      const std::vector<int64_t>& dims)>;

Tensor value_reduction(const char* op, const Tensor& input, const std::vector<int64_t>& dims, bool keepdim,
                       const ReduceParams& params, bool upcast, GradRule grad) {
  check_input(op, input);
  const Tensor x = upcast ? autocast_f32(input) : input;
  const std::vector<bool> mask = reduced_mask(op, x, dims);
  Tensor y = run_reduction(x, mask, keepdim, params, true, false).values;
  if (should_record({x})) {
    record(y, op, {x},
           [x_saved = x.detach(), y_saved = y.detach(), mask, grad = std::move(grad)](const Tensor& gy,
                                                                                      const NeedsGrad&) {
             const Shape keep = result_shape(x_saved.shape(), mask, true);
             return std::vector<Tensor>{
                 grad(x_saved, keep_shape_grad(gy, keep), y_saved.view(keep), mask_dims(mask))};
           });
  }
  return y;
}

Tensor scaled_sum(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
                  bool average) {
  check_input(op, x);
  const std::vector<bool> mask = reduced_mask(op, x, dims);
  const int64_t count = reduced_count(x.shape(), mask);
  ReduceParams params;
  params.scale =
      !average ? 1.0
               : (count > 0 ? 1.0 / static_cast<double>(count) : std::numeric_limits<double>::quiet_NaN());
  const double scale = params.scale;
  return value_reduction(
      op, x, dims, keepdim, params, true,
      [scale](const Tensor& xs, const Tensor& gy, const Tensor&, const std::vector<int64_t>&) {
        return broadcast_grad(gy, gy.shape(), xs.shape(), scale);
      });
}

std::pair<Tensor, Tensor> extreme_along(const char* op, const Tensor& x, int64_t dim, bool keepdim,
                                        bool is_max) {
  check_input(op, x);
  const std::vector<bool> mask = reduced_mask(op, x, {dim});
  LIFTOFF_CHECK(reduced_count(x.shape(), mask) > 0, ShapeError, op, ": dimension ", dim, " of shape ",
                shape_str(x.shape()), " is empty (no maximum/minimum)");
  ReduceParams params;
  params.kind = is_max ? ReduceKind::max : ReduceKind::min;
  Reduced r = run_reduction(x, mask, keepdim, params, true, true);
  if (should_record({x})) {
    record(r.values, op, {x},
           [shape = x.shape(), mask, indices = r.indices, dtype = x.dtype()](const Tensor& gy,
                                                                             const NeedsGrad&) {
             int64_t outer = 1, extent = 1, inner = 1;
             bool after = false;
             for (size_t d = 0; d < shape.size(); ++d) {
               if (mask[d]) {
                 extent = shape[d];
                 after = true;
               } else {
                 (after ? inner : outer) *= shape[d];
               }
             }
             const Tensor g = gy.contiguous();
             Tensor gx = Tensor::empty(shape, g.dtype(), g.device());
             LIFTOFF_DISPATCH(g.device(), index_backward, g, indices, outer, extent, inner, gx);
             return std::vector<Tensor>{gx};
           });
  }
  return {r.values, r.indices};
}

Tensor extreme_over(const char* op, const Tensor& x, const std::vector<int64_t>& dims, bool keepdim,
                    bool is_max) {
  check_input(op, x);
  LIFTOFF_CHECK(reduced_count(x.shape(), reduced_mask(op, x, dims)) > 0, ShapeError, op,
                ": cannot reduce over empty dimensions of shape ", shape_str(x.shape()));
  ReduceParams params;
  params.kind = is_max ? ReduceKind::max : ReduceKind::min;
  return value_reduction(
      op, x, dims, keepdim, params, false,
      [](const Tensor& xs, const Tensor& gy, const Tensor& y, const std::vector<int64_t>& d) {
        return reduce_grad_tensor(ReduceGradKind::equal, 0, xs,
                                  split_among_equal(ReduceGradKind::equal, xs, gy, y, d), y);
      });
}

Tensor arg_extreme(const char* op, const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  check_input(op, x);
  const std::vector<bool> mask = reduced_mask(op, x, {dim});
  LIFTOFF_CHECK(reduced_count(x.shape(), mask) > 0, ShapeError, op, ": dimension ", dim, " of shape ",
                shape_str(x.shape()), " is empty");
  ReduceParams params;
  params.kind = is_max ? ReduceKind::max : ReduceKind::min;
  return run_reduction(x, mask, keepdim, params, false, true).indices;
}

Tensor variance(const char* op, const Tensor& x, const std::vector<int64_t>& dims, int64_t correction,
                bool keepdim, bool take_sqrt) {
  check_input(op, x);
  ReduceParams params;
  params.kind = ReduceKind::var;
  params.correction = static_cast<double>(correction);
  params.take_sqrt = take_sqrt;
  return value_reduction(op, x, dims, keepdim, params, true,
                         [correction, take_sqrt](const Tensor& xs, const Tensor& gy, const Tensor& y,
                                                 const std::vector<int64_t>& d) {
                           const int64_t n = xs.numel() / std::max<int64_t>(1, y.numel());
                           const double param = 1.0 / static_cast<double>(n - correction);
                           const Tensor g = take_sqrt ? mul(div(gy, y), 0.5) : gy;  // d std = d var / (2 std)
                           return reduce_grad_tensor(ReduceGradKind::var, param, xs, g,
                                                     mean(xs, d, /*keepdim=*/true));
                         });
}

}  // namespace

Tensor sum(const Tensor& x) {
  return scaled_sum("sum", x, {}, false, false);
}
Tensor mean(const Tensor& x) {
  return scaled_sum("mean", x, {}, false, true);
}
Tensor sum(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return scaled_sum("sum", x, dims, keepdim, false);
}
Tensor mean(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return scaled_sum("mean", x, dims, keepdim, true);
}

std::pair<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_along("max", x, dim, keepdim, true);
}
std::pair<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  return extreme_along("min", x, dim, keepdim, false);
}
Tensor max(const Tensor& x) {
  return extreme_over("max", x, {}, false, true);
}
Tensor min(const Tensor& x) {
  return extreme_over("min", x, {}, false, false);
}
Tensor amax(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme_over("amax", x, dims, keepdim, true);
}
Tensor amin(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  return extreme_over("amin", x, dims, keepdim, false);
}

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme("argmax", x, dim, keepdim, true);
}
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_extreme("argmin", x, dim, keepdim, false);
}
Tensor argmax(const Tensor& x) {
  check_input("argmax", x);
  return arg_extreme("argmax", x.detach().contiguous().view({x.numel()}), 0, false, true);
}
Tensor argmin(const Tensor& x) {
  check_input("argmin", x);
  return arg_extreme("argmin", x.detach().contiguous().view({x.numel()}), 0, false, false);
}

Tensor var(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return variance("var", x, dims, correction, keepdim, false);
}
Tensor std(const Tensor& x, const std::vector<int64_t>& dims, int64_t correction, bool keepdim) {
  return variance("std", x, dims, correction, keepdim, true);
}

Tensor norm(const Tensor& x, double p, const std::vector<int64_t>& dims, bool keepdim) {
  LIFTOFF_CHECK(p > 0, ValueError, "norm: order p = ", p, " is not supported (p > 0 or infinity), input ",
                x.defined() ? shape_str(x.shape()) : "undefined");
  ReduceParams params;
  params.kind = ReduceKind::norm;
  params.p = p;
  return value_reduction(
      "norm", x, dims, keepdim, params, true,
      [p](const Tensor& xs, const Tensor& gy, const Tensor& y, const std::vector<int64_t>& d) {
        const bool inf = std::isinf(p);
        const Tensor g = inf ? split_among_equal(ReduceGradKind::abs_equal, xs, gy, y, d) : gy;
        return reduce_grad_tensor(ReduceGradKind::norm, p, xs, g, y);
      });
}

Tensor logsumexp(const Tensor& x, const std::vector<int64_t>& dims, bool keepdim) {
  ReduceParams params;
  params.kind = ReduceKind::logsumexp;
  return value_reduction(
      "logsumexp", x, dims, keepdim, params, true,
      [](const Tensor& xs, const Tensor& gy, const Tensor& y, const std::vector<int64_t>&) {
        return reduce_grad_tensor(ReduceGradKind::logsumexp, 0, xs, gy, y);
      });
}

}  // namespace liftoff
