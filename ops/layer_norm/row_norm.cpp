#include "ops/layer_norm/row_norm.h"

#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

void check_affine(const char* op, const Tensor& x, const Tensor& t, const char* what) {
  if (!t.defined()) return;
  LIFTOFF_CHECK(t.dtype() == x.dtype(), DTypeError, op, ": input ", shape_str(x.shape()), " is ",
                dtype_name(x.dtype()), " but ", what, " ", shape_str(t.shape()), " is ",
                dtype_name(t.dtype()), "; cast one of them");
  LIFTOFF_CHECK(t.device() == x.device(), DeviceError, op, ": input ", shape_str(x.shape()), " is on ",
                x.device().str(), " but ", what, " ", shape_str(t.shape()), " is on ", t.device().str());
}

Tensor row_norm(const char* op, const Tensor& input, const Tensor& x, const Tensor& weight,
                const Tensor& bias, const RowNormShape& s, MemoryFormat format) {
  const Device dev = x.device();
  // Statistics in f32 for f32/f16/bf16, f64 for f64.
  const DType stat = x.dtype() == DType::f64 ? DType::f64 : DType::f32;
  const Tensor w = weight.defined() ? weight.contiguous() : Tensor();
  const Tensor b = bias.defined() ? bias.contiguous() : Tensor();
  Tensor y = Tensor::empty(x.shape(), x.dtype(), dev);
  const Tensor mean = Tensor::empty({s.rows}, stat, dev);
  const Tensor rstd = Tensor::empty({s.rows}, stat, dev);
  const bool empty = x.numel() == 0;  // nothing to normalise; the parameters' gradients are zeros
  if (!empty) LIFTOFF_DISPATCH(dev, row_norm_forward, x, w, b, y, mean, rstd, s);
  if (format != MemoryFormat::contiguous) y = y.contiguous(format);
  if (should_record({input, weight, bias})) {
    const Tensor w_saved = w.defined() ? w.detach() : Tensor();
    record(y, op, {input, weight, bias},
           [x_saved = x.detach(), w_saved, mean, rstd, s, op, w_shape = w.defined() ? w.shape() : Shape{},
            b_shape = b.defined() ? b.shape() : Shape{}](const Tensor& gy_in, const NeedsGrad& needs) {
             LIFTOFF_CHECK(gy_in.shape() == x_saved.shape() && gy_in.dtype() == x_saved.dtype(), ShapeError,
                           op, " backward: gradient ", shape_str(gy_in.shape()), " ",
                           dtype_name(gy_in.dtype()), " does not match the output ",
                           shape_str(x_saved.shape()), " ", dtype_name(x_saved.dtype()));
             const Tensor gy = gy_in.contiguous();
             const DType dt = gy.dtype();
             const Device d = gy.device();
             const Tensor gx = needs[0] ? Tensor::empty(gy.shape(), dt, d) : Tensor();
             const Tensor gw = needs[1] ? Tensor::empty(w_shape, dt, d) : Tensor();
             const Tensor gb = needs[2] ? Tensor::empty(b_shape, dt, d) : Tensor();
             if (gy.numel() > 0) {
               LIFTOFF_DISPATCH(d, row_norm_backward, gy, x_saved, mean, rstd, w_saved, gx, gw, gb, s);
             } else {
               for (const Tensor& t : {gw, gb})
                 if (t.defined()) t.zero_();
             }
             return std::vector<Tensor>{gx, gw, gb};
           });
  }
  return y;
}

}  // namespace liftoff
