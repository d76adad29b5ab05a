#include "ops/index/index.h"

#include "ops/common/strided.h"
#include "ops/index/kernels.h"
#include "ops/pad/pad.h"
#include "ops/reshape/reshape.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
int64_t wrap(int64_t dim, const Tensor& x, const char* op) {
  const int64_t n = x.dim();
  const int64_t w = dim < 0 ? dim + n : dim;
  LIFTOFF_CHECK(w >= 0 && w < n, ShapeError, op, ": dim ", dim, " out of range for input ",
                shape_str(x.shape()), " (expected in [", -n, ", ", n - 1, "])");
  return w;
}

void check_common(const Tensor& x, const Tensor& index, const char* op) {
  LIFTOFF_CHECK(x.defined() && index.defined(), ValueError, op, ": input and index must be defined tensors");
  LIFTOFF_CHECK(index.dtype() == DType::i64, DTypeError, op, ": index must be i64, got ",
                dtype_name(index.dtype()), " (index ", shape_str(index.shape()), ")");
  LIFTOFF_CHECK(index.device() == x.device(), DeviceError, op, ": input on ", x.device().str(),
                " but index on ", index.device().str(), " (input ", shape_str(x.shape()), ", index ",
                shape_str(index.shape()), ")");
}

// On the CPU the values are at hand: every index must lie in [0, bound).
void check_values(const Tensor& index, int64_t bound, const char* op, const Shape& x_shape) {
  if (!index.device().is_cpu()) return;
  const Tensor packed = index.contiguous();
  const int64_t* v = packed.data<int64_t>();
  for (int64_t i = 0; i < packed.numel(); ++i) {
    LIFTOFF_CHECK(v[i] >= 0 && v[i] < bound, ValueError, op, ": index ", v[i], " at position ", i,
                  " of index ", shape_str(index.shape()), " is out of range [0, ", bound, ") for input ",
                  shape_str(x_shape));
  }
}

// index (1-D [K] or 0-d) seen with `shape` (x's shape with K at dim): stride 0 everywhere but dim.
Tensor broadcast_index(const Tensor& index, const Shape& shape, int64_t dim) {
  Shape strides(shape.size(), 0);
  strides[static_cast<size_t>(dim)] = index.dim() == 1 ? index.strides()[0] : 0;
  return raw_view(index, shape, strides, index.offset());
}

// Gradient of a gather-like op: zeros of x's shape with gy added at index (index in gy's shape).
Tensor scatter_into_zeros(const Shape& x_shape, int64_t dim, const Tensor& index, const Tensor& gy) {
  const Tensor gx = Tensor::zeros(x_shape, gy.dtype(), gy.device());
  if (index.numel() > 0) LIFTOFF_DISPATCH(gy.device(), scatter_add, gx, dim, index, gy);
  return gx;
}
}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index_in) {
  LIFTOFF_CHECK(index_in.defined(), ValueError, "index_select: index must be a defined tensor");
  const Tensor index = index_in.dtype() == DType::i32 ? index_in.to(DType::i64) : index_in;
  check_common(x, index, "index_select");
  LIFTOFF_CHECK(index.dim() <= 1, ShapeError, "index_select: index must be 1-D or 0-d, got ",
                shape_str(index.shape()), " (input ", shape_str(x.shape()), ")");
  if (x.dim() == 0) {
    LIFTOFF_CHECK(index.numel() == 1, ShapeError, "index_select: a 0-d input takes one index, got ",
                  shape_str(index.shape()));
    return reshape(index_select(reshape(x, {1}), 0, index), {});
  }
  const int64_t d = wrap(dim, x, "index_select");
  check_values(index, x.shape()[d], "index_select", x.shape());
  Shape out_shape = x.shape();
  out_shape[d] = index.numel();
  strided_of(out_shape, contiguous_strides(out_shape), "index_select");  // rank check
  const Tensor out = Tensor::empty(out_shape, x.dtype(), x.device());
  if (out.numel() > 0) LIFTOFF_DISPATCH(x.device(), gather, x, d, broadcast_index(index, out_shape, d), out);
  if (should_record({x})) {
    record(out, "index_select", {x}, [index, d, x_shape = x.shape()](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{scatter_into_zeros(x_shape, d, broadcast_index(index, gy.shape(), d), gy)};
    });
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_common(x, index, "gather");
  LIFTOFF_CHECK(index.dim() == x.dim(), ShapeError, "gather: index ", shape_str(index.shape()),
                " must have the rank of input ", shape_str(x.shape()));
  if (x.dim() == 0) return reshape(gather(reshape(x, {1}), 0, reshape(index, {1})), {});
  const int64_t d = wrap(dim, x, "gather");
  for (int64_t k = 0; k < x.dim(); ++k) {
    LIFTOFF_CHECK(k == d || index.shape()[k] <= x.shape()[k], ShapeError, "gather: index ",
                  shape_str(index.shape()), " is larger than input ", shape_str(x.shape()), " at dim ", k,
                  " (only dim ", dim, " may be larger)");
  }
  check_values(index, x.shape()[d], "gather", x.shape());
  strided_of(x, "gather");
  const Tensor out = Tensor::empty(index.shape(), x.dtype(), x.device());
  if (out.numel() > 0) LIFTOFF_DISPATCH(x.device(), gather, x, d, index, out);
  if (should_record({x})) {
    record(out, "gather", {x}, [index, d, x_shape = x.shape()](const Tensor& gy, const NeedsGrad&) {
      return std::vector<Tensor>{scatter_into_zeros(x_shape, d, index, gy)};
    });
  }
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_common(x, index, "scatter_add");
  LIFTOFF_CHECK(src.defined(), ValueError, "scatter_add: src must be a defined tensor");
  LIFTOFF_CHECK(src.dtype() == x.dtype(), DTypeError, "scatter_add: src is ", dtype_name(src.dtype()),
                " but input is ", dtype_name(x.dtype()), " (input ", shape_str(x.shape()), ", src ",
                shape_str(src.shape()), ")");
  LIFTOFF_CHECK(src.device() == x.device(), DeviceError, "scatter_add: input on ", x.device().str(),
                " but src on ", src.device().str());
  LIFTOFF_CHECK(index.dim() == x.dim() && src.dim() == x.dim(), ShapeError, "scatter_add: input ",
                shape_str(x.shape()), ", index ", shape_str(index.shape()), " and src ",
                shape_str(src.shape()), " must have one rank");
  if (x.dim() == 0) {
    return reshape(scatter_add(reshape(x, {1}), 0, reshape(index, {1}), reshape(src, {1})), {});
  }
  const int64_t d = wrap(dim, x, "scatter_add");
  for (int64_t k = 0; k < x.dim(); ++k) {
    LIFTOFF_CHECK(index.shape()[k] <= src.shape()[k] && (k == d || index.shape()[k] <= x.shape()[k]),
                  ShapeError, "scatter_add: index ", shape_str(index.shape()), " is larger than src ",
                  shape_str(src.shape()), " or (outside dim ", dim, ") than input ", shape_str(x.shape()),
                  " at dim ", k);
  }
  check_values(index, x.shape()[d], "scatter_add", x.shape());
  const Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  out.copy_(x);
  if (index.numel() > 0) LIFTOFF_DISPATCH(x.device(), scatter_add, out, d, index, src);
  if (should_record({x, src})) {
    record(out, "scatter_add", {x, src},
           [index, d, src_shape = src.shape()](const Tensor& gy, const NeedsGrad& needs) {
             Tensor gsrc;
             if (needs[1]) {
               // Positions of src outside index's shape were not used: their gradient is zero.
               std::vector<int64_t> pads;
               for (size_t k = src_shape.size(); k-- > 0;) {
                 pads.push_back(0);
                 pads.push_back(src_shape[k] - index.shape()[k]);
               }
               gsrc = pad(gather(gy, d, index), pads);
             }
             return std::vector<Tensor>{needs[0] ? gy : Tensor(), gsrc};
           });
  }
  return out;
}

}  // namespace liftoff
