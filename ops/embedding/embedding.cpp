#include "ops/embedding/embedding.h"

#include <limits>

#include "ops/common/index_dtype.h"
#include "ops/embedding/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
template <class I>
void check_indices(const Tensor& indices, const Tensor& weight) {
  const I* p = indices.data<I>();
  const int64_t num = weight.size(0);
  for (int64_t i = 0; i < indices.numel(); ++i) {
    const int64_t v = static_cast<int64_t>(p[i]);
    LIFTOFF_CHECK(v >= 0 && v < num, ValueError, "embedding: index ", v, " at position ", i,
                  " is outside [0, ", num, ") for weight ", shape_str(weight.shape()), " (indices ",
                  shape_str(indices.shape()), ")");
  }
}
}  // namespace

Tensor embedding(const Tensor& input, const Tensor& weight_in, std::optional<int64_t> padding_idx) {
  LIFTOFF_CHECK(input.defined() && weight_in.defined(), ValueError,
                "embedding: input and weight must be defined tensors");
  LIFTOFF_CHECK(is_index_dtype(input.dtype()), DTypeError, "embedding: indices ", shape_str(input.shape()),
                " have dtype ", dtype_name(input.dtype()), ", expected i64 or i32");
  LIFTOFF_CHECK(weight_in.dim() == 2, ShapeError, "embedding: weight ", shape_str(weight_in.shape()),
                " must be [num_embeddings, dim] (indices ", shape_str(input.shape()), ")");
  LIFTOFF_CHECK(is_floating(weight_in.dtype()), DTypeError, "embedding: weight ",
                shape_str(weight_in.shape()), " has dtype ", dtype_name(weight_in.dtype()),
                ", expected a floating dtype");
  LIFTOFF_CHECK(input.device() == weight_in.device(), DeviceError, "embedding: indices ",
                shape_str(input.shape()), " on ", input.device().str(), " but weight ",
                shape_str(weight_in.shape()), " on ", weight_in.device().str());
  const int64_t num = weight_in.size(0);
  int64_t padding = -1;
  if (padding_idx) {
    LIFTOFF_CHECK(*padding_idx >= -num && *padding_idx < num, ValueError, "embedding: padding_idx ",
                  *padding_idx, " is outside [", -num, ", ", num, ") for weight ",
                  shape_str(weight_in.shape()));
    padding = *padding_idx < 0 ? *padding_idx + num : *padding_idx;
  }
  // The CUDA backward sorts 32-bit keys and positions.
  constexpr int64_t kMax32 = std::numeric_limits<int32_t>::max();
  LIFTOFF_CHECK(num < kMax32 && input.numel() < kMax32, ShapeError, "embedding: weight ",
                shape_str(weight_in.shape()), " or indices ", shape_str(input.shape()),
                " exceed 2^31 - 1 rows / positions");
  const Tensor indices = input.contiguous();
  if (indices.device().is_cpu()) {
    dispatch_index(indices.dtype(), "embedding",
                   [&](auto tag) { check_indices<decltype(tag)>(indices, weight_in); });
  }
  const Tensor weight = weight_in.contiguous();
  Shape out_shape = indices.shape();
  out_shape.push_back(weight.size(1));
  Tensor out = Tensor::empty(out_shape, weight.dtype(), weight.device());
  LIFTOFF_DISPATCH(weight.device(), embedding_forward, indices, weight, out);
  if (should_record({weight})) {
    record(out, "embedding", {weight},
           [idx = indices.detach(), wshape = weight.shape(), dtype = weight.dtype(), padding](
               const Tensor& gy_in, const NeedsGrad&) {
             const Tensor gy = gy_in.to(dtype).contiguous();
             Tensor gw = Tensor::empty(wshape, dtype, gy.device());
             LIFTOFF_DISPATCH(gy.device(), embedding_backward, idx, gy, padding, gw);
             return std::vector<Tensor>{gw};
           });
  }
  return out;
}

}  // namespace liftoff
