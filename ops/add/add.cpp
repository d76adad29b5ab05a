#include "ops/add/add.h"

#include "ops/add/kernels.h"
#include "ops/common/layout.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

Tensor add(const Tensor& a_in, const Tensor& b_in) {
  LIFTOFF_CHECK(a_in.defined() && b_in.defined(), ValueError, "add: both operands must be defined tensors");
  LIFTOFF_CHECK(a_in.shape() == b_in.shape(), ShapeError, "add: shapes ", shape_str(a_in.shape()), " and ",
                shape_str(b_in.shape()), " differ (add needs equal shapes; no broadcasting)");
  LIFTOFF_CHECK(a_in.dtype() == b_in.dtype(), DTypeError, "add: dtypes ", dtype_name(a_in.dtype()), " and ",
                dtype_name(b_in.dtype()), " differ (shapes ", shape_str(a_in.shape()), ")");
  LIFTOFF_CHECK(is_floating(a_in.dtype()), DTypeError, "add: dtype ", dtype_name(a_in.dtype()),
                " is not a floating type");
  LIFTOFF_CHECK(a_in.device() == b_in.device(), DeviceError, "add: operands on ", a_in.device().str(),
                " and ", b_in.device().str(), " (shapes ", shape_str(a_in.shape()), ")");
  // Elementwise over the storage in a's layout (channels-last CUDA stays channels-last); b follows a.
  const MemoryFormat format = op_memory_format(a_in);
  const Tensor a = a_in.contiguous(format);
  const Tensor b = b_in.contiguous(format);
  Tensor y = Tensor::empty(a.shape(), a.dtype(), a.device(), format);
  LIFTOFF_DISPATCH(a.device(), add_forward, a, b, y);
  if (should_record({a, b})) {
    record(y, "add", {a, b}, [](const Tensor& gy, const NeedsGrad& needs) {
      return std::vector<Tensor>{needs[0] ? gy : Tensor(), needs[1] ? gy : Tensor()};
    });
  }
  return y;
}

}  // namespace liftoff
