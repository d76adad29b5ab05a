#include "ops/matmul/batched.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "ops/cast/cast.h"
#include "ops/matmul/kernels.h"
#include "runtime/autocast.h"
#include "runtime/dispatch.h"
#include "runtime/profile/flops.h"

namespace liftoff::matmul_detail {

namespace {
std::atomic<int64_t> g_operand_copies{0};

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

// Where t's matrices sit over `batch` (t's batch dims broadcast to it; stride 0 where t is broadcast): one
// stride (m->dims = 0) where the dims nest, else up to kMaxGemmBatchDims (size, stride) pairs after dropping
// size-1 dims and merging dims that nest. False when more dims than that remain.
bool batch_layout(const Tensor& t, const Shape& batch, MatrixBatch* m) {
  const int64_t nb = static_cast<int64_t>(batch.size());
  const int64_t lead = nb - (t.dim() - 2);
  std::vector<std::pair<int64_t, int64_t>> dims;  // (size, stride), outermost first
  for (int64_t d = 0; d < nb; ++d) {
    const int64_t size = batch[static_cast<size_t>(d)];
    if (size == 1) continue;
    const int64_t td = d - lead;
    const bool broadcast = td < 0 || t.shape()[static_cast<size_t>(td)] == 1;
    const int64_t stride = broadcast ? 0 : t.strides()[static_cast<size_t>(td)];
    if (!dims.empty() && dims.back().second == stride * size) {
      dims.back() = {dims.back().first * size, stride};  // nests in the previous dim
    } else {
      dims.emplace_back(size, stride);
    }
  }
  m->dims = 0;
  if (dims.size() <= 1) {
    m->batch_stride = dims.empty() ? 0 : dims[0].second;
    return true;
  }
  if (dims.size() > static_cast<size_t>(kMaxGemmBatchDims)) return false;
  m->dims = static_cast<int>(dims.size());
  for (size_t d = 0; d < dims.size(); ++d) {
    m->sizes[d] = dims[d].first;
    m->strides[d] = dims[d].second;
  }
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
    g_operand_copies.fetch_add(1, std::memory_order_relaxed);
  }
  if (!batch_layout(src, batch, &m)) {
    g_operand_copies.fetch_add(1, std::memory_order_relaxed);
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
    m.dims = 0;
    m.batch_stride = t.size(-2) * t.size(-1);
  }
  *keep = src;
  m.data = src.raw_data();
  return m;
}

// The result's matrices: row-major (unit column stride), rows apart by ld >= N, batch by batch_layout.
bool result_layout(const Tensor& out, const Shape& batch, MatrixBatch* m) {
  const int64_t rows = out.size(-2), cols = out.size(-1);
  const int64_t rs = out.strides()[out.strides().size() - 2], cs = out.strides().back();
  if (!(cols == 1 || cs == 1) || !(rows == 1 || rs >= cols)) return false;
  m->ld = rows == 1 ? std::max<int64_t>(cols, 1) : rs;
  m->transpose = false;
  m->data = out.raw_data();
  return batch_layout(out, batch, m);
}
}  // namespace

int64_t operand_copies() {
  return g_operand_copies.load(std::memory_order_relaxed);
}

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

void batched_matmul_into(const Tensor& a, const Tensor& b, const Tensor& out, double alpha) {
  const Shape batch = batch_shape(out.shape());
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  const int64_t count = shape_numel(batch);
  // linear, matmul, bmm and attention all multiply here: their FLOPs are counted once, in one place.
  if (counting_flops()) add_flops(gemm_flops(m, n, k, count));
  if (out.numel() == 0) return;
  Tensor keep_a, keep_b;
  const MatrixBatch ma = operand(a, batch, &keep_a);
  const MatrixBatch mb = operand(b, batch, &keep_b);
  MatrixBatch mc;
  if (result_layout(out, batch, &mc)) {
    LIFTOFF_DISPATCH(out.device(), batched_gemm, ma, mb, mc, out, count, m, n, k, alpha);
    return;
  }
  // A result whose strides no GEMM writes: computed contiguous, then copied in.
  const Tensor dense = Tensor::empty(out.shape(), out.dtype(), out.device());
  result_layout(dense, batch, &mc);
  LIFTOFF_DISPATCH(out.device(), batched_gemm, ma, mb, mc, dense, count, m, n, k, alpha);
  out.copy_(dense);
}

Tensor empty_in_order_of(const Shape& shape, const Tensor& like, DType dtype, Device device) {
  const size_t n = shape.size();
  bool matches = like.dim() == static_cast<int64_t>(n) && n >= 1;
  for (size_t d = 0; matches && d + 1 < n; ++d) matches = like.shape()[d] == shape[d];
  if (!matches) return Tensor::empty(shape, dtype, device);
  // Every dim but the last, outermost first by like's strides (ties keep their order); the last innermost.
  std::vector<int64_t> order(n - 1);
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return like.strides()[static_cast<size_t>(x)] > like.strides()[static_cast<size_t>(y)];
  });
  order.push_back(static_cast<int64_t>(n - 1));
  Shape stored(n);
  std::vector<int64_t> where(n);  // where[d]: the stored dim holding logical dim d
  for (size_t i = 0; i < n; ++i) {
    stored[i] = shape[static_cast<size_t>(order[i])];
    where[static_cast<size_t>(order[i])] = static_cast<int64_t>(i);
  }
  return Tensor::empty(stored, dtype, device).permute(where);
}

Tensor batched_matmul(const Tensor& a, const Tensor& b, double alpha, const Shape& batch_hint) {
  Shape batch;
  broadcast_shapes(batch_shape(a.shape()), batch_shape(b.shape()), &batch);
  broadcast_shapes(batch, batch_hint, &batch);
  Shape out_shape = batch;
  out_shape.push_back(a.size(-2));
  out_shape.push_back(b.size(-1));
  Tensor c = Tensor::empty(out_shape, a.dtype(), a.device());
  batched_matmul_into(a, b, c, alpha);
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
