#include "ops/cat/cat.h"

#include "ops/cast/cast.h"
#include "ops/cat/kernels.h"
#include "ops/common/layout.h"
#include "ops/views/views.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
int dtype_rank(DType t) {
  switch (t) {
    case DType::b8:  // bool is below every other type, as PyTorch's promotion
      return -1;
    case DType::u8:
      return 0;
    case DType::i32:
      return 1;
    case DType::i64:
      return 2;
    case DType::f16:
    case DType::bf16:
      return 3;
    case DType::f32:
      return 4;
    case DType::f64:
      return 5;
  }
  return 0;
}

// PyTorch's promotion over a list: the widest kind wins; f16 with bf16 meets at f32.
DType promote(const std::vector<Tensor>& tensors) {
  DType out = tensors.front().dtype();
  for (const Tensor& t : tensors) {
    const DType d = t.dtype();
    if ((d == DType::f16 && out == DType::bf16) || (d == DType::bf16 && out == DType::f16)) {
      out = DType::f32;
    } else if (dtype_rank(d) > dtype_rank(out)) {
      out = d;
    }
  }
  return out;
}

std::string describe(const std::vector<Tensor>& tensors) {
  std::string s;
  for (size_t i = 0; i < tensors.size(); ++i) {
    s += (i ? ", " : "") + shape_str(tensors[i].shape());
  }
  return s;
}

bool is_legacy_empty(const Tensor& t) {
  return t.dim() == 1 && t.numel() == 0;
}
}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  LIFTOFF_CHECK(!tensors.empty(), ValueError, "cat: expects a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    LIFTOFF_CHECK(tensors[i].defined(), ValueError, "cat: tensor ", i, " is undefined");
  }
  // The reference tensor: the first that is not a legacy empty 1-D tensor.
  size_t ref = 0;
  while (ref + 1 < tensors.size() && is_legacy_empty(tensors[ref])) ++ref;
  const Tensor& first = tensors[ref];
  LIFTOFF_CHECK(first.dim() > 0, ShapeError, "cat: zero-dimensional tensors cannot be concatenated (shapes ",
                describe(tensors), "); unsqueeze them or use stack()");
  const int64_t n = first.dim();
  const int64_t d = dim < 0 ? dim + n : dim;
  LIFTOFF_CHECK(d >= 0 && d < n, ShapeError, "cat: dim ", dim, " out of range for shapes ",
                describe(tensors));
  Shape out_shape = first.shape();
  out_shape[d] = 0;
  std::vector<Tensor> parts;
  std::vector<bool> skipped(tensors.size(), false);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    LIFTOFF_CHECK(t.device() == first.device(), DeviceError, "cat: tensor ", i, " is on ", t.device().str(),
                  " but tensor ", ref, " on ", first.device().str(), " (shapes ", describe(tensors), ")");
    if (i != ref && is_legacy_empty(t)) {
      skipped[i] = true;
      continue;
    }
    bool match = t.dim() == n;
    for (int64_t k = 0; match && k < n; ++k) match = k == d || t.shape()[k] == first.shape()[k];
    LIFTOFF_CHECK(match, ShapeError, "cat: shapes ", describe(tensors), " differ outside dim ", dim,
                  " (tensor ", i, " has ", shape_str(t.shape()), "); all sizes but dim ", dim, " must match");
    out_shape[d] += t.shape()[d];
  }
  const DType dtype = promote(tensors);
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!skipped[i]) parts.push_back(cast(tensors[i], dtype));
  }
  const MemoryFormat format = op_memory_format(first);
  const Tensor out = Tensor::empty(out_shape, dtype, first.device(), format);
  LIFTOFF_DISPATCH(out.device(), cat_forward, parts, d, out);
  if (should_record(parts)) {
    std::vector<int64_t> sizes;
    for (const Tensor& t : parts) sizes.push_back(t.shape()[d]);
    record(out, "cat", parts, [sizes, d](const Tensor& gy, const NeedsGrad& needs) {
      std::vector<Tensor> grads(sizes.size());
      int64_t offset = 0;
      for (size_t i = 0; i < sizes.size(); ++i) {
        if (needs[i]) grads[i] = gy.slice(d, offset, offset + sizes[i]);
        offset += sizes[i];
      }
      return grads;
    });
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  LIFTOFF_CHECK(!tensors.empty(), ValueError, "stack: expects a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    LIFTOFF_CHECK(tensors[i].defined(), ValueError, "stack: tensor ", i, " is undefined");
    LIFTOFF_CHECK(tensors[i].shape() == tensors[0].shape(), ShapeError, "stack: shapes ", describe(tensors),
                  " differ (tensor ", i, "); stack needs tensors of one shape");
  }
  const int64_t n = tensors[0].dim() + 1;
  const int64_t d = dim < 0 ? dim + n : dim;
  LIFTOFF_CHECK(d >= 0 && d < n, ShapeError, "stack: dim ", dim, " out of range for shapes ",
                describe(tensors), " (expected in [", -n, ", ", n - 1, "])");
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) parts.push_back(unsqueeze(t, d));
  return cat(parts, d);
}

}  // namespace liftoff
