#include "ops/common/strided.h"

namespace liftoff {

Strided strided_of(const Shape& shape, const Shape& strides, const char* op) {
  LIFTOFF_CHECK(shape.size() <= static_cast<size_t>(kMaxStridedDims) && strides.size() == shape.size(),
                ShapeError, op, ": supports up to ", kMaxStridedDims, " dimensions, got shape ",
                shape_str(shape));
  Strided l;
  l.dims = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    l.shape[d] = shape[d];
    l.strides[d] = strides[d];
  }
  return l;
}

Tensor raw_view(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.storage();
  impl->offset = offset;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = base.dtype();
  return Tensor(std::move(impl));
}

Strided strided_of(const Tensor& t, const char* op) {
  return strided_of(t.shape(), t.strides(), op);
}

}  // namespace liftoff
