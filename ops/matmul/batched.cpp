#include "ops/matmul/batched.h"

#include <algorithm>
#include <memory>

#include "ops/cast/cast.h"
#include "ops/matmul/kernels.h"
#include "runtime/autocast.h"
#include "runtime/dispatch.h"
#include "runtime/profile/flops.h"

namespace liftoff::matmul_detail {

namespace {
Tensor raw_view(const Tensor& t, const Shape& shape, const Shape& strides) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage();
  impl->offset = t.offset();
  impl->shape = shape;
  impl->strides = strides;
  impl->dtype = t.dtype();
  return Tensor(std::move(impl));
}

// The stored layout of t's last two dims (R, C), or false when they are neither row-major nor transposed.
bool matrix_layout(const Tensor& t, MatrixBatch* m) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  const int64_t rs = t.strides()[t.strides().size() - 2], cs = t.strides().back();
  if ((cols == 1 || cs == 1) && (rows == 1 || rs >= cols)) {
    m->transpose = false;
    m->ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
    return true;
  }
  if ((rows == 1 || rs == 1) && (cols == 1 || cs >= rows)) {
    m->transpose = true;  // stored as the row-major [C, R] matrix
    m->ld = cols == 1 ? std::max<int64_t>(rows, 1) : cs;
    return true;
  }
  return false;
}

// One stride s such that batch entry i (row-major over `batch`) starts at i * s, or false. t's batch dims
// broadcast to `batch`.
bool batch_stride(const Tensor& t, const Shape& batch, int64_t* stride) {
  const int64_t nb = static_cast<int64_t>(batch.size());
  const int64_t lead = nb - (t.dim() - 2);
  // Stride of each batch dim in t's memory (0 where t is broadcast), innermost first.
  int64_t s = -1, running = 1;
  for (int64_t d = nb - 1; d >= 0; --d) {
    const int64_t td = d - lead;
    const bool broadcast = td < 0 || t.shape()[static_cast<size_t>(td)] == 1;
    if (batch[static_cast<size_t>(d)] != 1) {
      const int64_t st = broadcast ? 0 : t.strides()[static_cast<size_t>(td)];
      if (s < 0) {
        if (st % running != 0) return false;
        s = st / running;
      } else if (st != s * running) {
        return false;
      }
    }
    running *= batch[static_cast<size_t>(d)];
  }
  *stride = s < 0 ? 0 : s;
  return true;
}

// t as a MatrixBatch over `batch`, copying t (contiguous, then also expanded to the full batch) only when
// its strides do not fit. *keep holds a copy alive.
MatrixBatch operand(const Tensor& t, const Shape& batch, Tensor* keep) {
  MatrixBatch m;
  Tensor src = t;
  if (!matrix_layout(src, &m)) {
    src = t.detach().contiguous();
    matrix_layout(src, &m);
  }
  if (!batch_stride(src, batch, &m.batch_stride)) {
    Shape full = batch;
    full.push_back(t.size(-2));
    full.push_back(t.size(-1));
    Shape strides(full.size(), 0);
    const int64_t lead = static_cast<int64_t>(full.size()) - src.dim();
    for (int64_t d = 0; d < src.dim(); ++d) {
      if (src.shape()[static_cast<size_t>(d)] != 1 || d >= src.dim() - 2)
        strides[static_cast<size_t>(d + lead)] = src.strides()[static_cast<size_t>(d)];
    }
    const Tensor expanded = Tensor::empty(full, src.dtype(), src.device());
    expanded.copy_(raw_view(src, full, strides));
    src = expanded;
    matrix_layout(src, &m);
    m.batch_stride = t.size(-2) * t.size(-1);
  }
  *keep = src;
  m.data = src.raw_data();
  return m;
}
}  // namespace

Shape batch_shape(const Shape& shape) {
  return shape.size() <= 2 ? Shape{} : Shape(shape.begin(), shape.end() - 2);
}

bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out) {
  const size_t n = std::max(a.size(), b.size());
  Shape r(n, 1);
  for (size_t i = 0; i < n; ++i) {
    const int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    r[i] = x == 1 ? y : x;
  }
  *out = r;
  return true;
}

Tensor transpose_last2(const Tensor& t) {
  Shape shape = t.shape(), strides = t.strides();
  std::swap(shape[shape.size() - 2], shape[shape.size() - 1]);
  std::swap(strides[strides.size() - 2], strides[strides.size() - 1]);
  return raw_view(t, shape, strides);
}

Tensor batched_matmul(const Tensor& a, const Tensor& b, double alpha, const Shape& batch_hint) {
  Shape batch;
  broadcast_shapes(batch_shape(a.shape()), batch_shape(b.shape()), &batch);
  broadcast_shapes(batch, batch_hint, &batch);
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  Shape out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor c = Tensor::empty(out_shape, a.dtype(), a.device());
  const int64_t count = shape_numel(batch);
  // linear, matmul, bmm and attention all multiply here: their FLOPs are counted once, in one place.
  if (counting_flops()) add_flops(gemm_flops(m, n, k, count));
  if (c.numel() == 0) return c;
  Tensor keep_a, keep_b;
  const MatrixBatch ma = operand(a, batch, &keep_a);
  const MatrixBatch mb = operand(b, batch, &keep_b);
  LIFTOFF_DISPATCH(c.device(), batched_gemm, ma, mb, c, count, m, n, k, alpha);
  return c;
}


Tensor autocast_input(const Tensor& t) {
  DType half = DType::f32;
  if (t.defined() && t.is_cuda() && t.dtype() == DType::f32 && autocast_enabled(&half)) return cast(t, half);
  return t;
}

std::string describe(const Tensor& t) {
  return str_cat(shape_str(t.shape()), " ", dtype_name(t.dtype()), " on ", t.device().str());
}

void check_same_kind(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                     const Tensor& b) {
  LIFTOFF_CHECK(a.dtype() == b.dtype(), DTypeError, op, ": ", name_a, " ", describe(a), " and ", name_b, " ",
                describe(b), " have different dtypes");
  LIFTOFF_CHECK(a.device() == b.device(), DeviceError, op, ": ", name_a, " ", describe(a), " and ", name_b,
                " ", describe(b), " are on different devices");
}

}  // namespace liftoff::matmul_detail
