#include "ops/loss/loss.h"

#include <memory>

#include "ops/cast/cast.h"
#include "ops/loss/front.h"
#include "ops/loss/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
using loss_front::Reduction;

// c (weight, pos_weight) broadcast to `shape` as PyTorch does (trailing dimensions aligned, sizes equal or 1)
// and materialised contiguous in dtype dt; undefined stays undefined. A constant: no gradient.
Tensor broadcast_constant(const char* op, const char* what, const Tensor& c, const Tensor& input, DType dt) {
  if (!c.defined()) return Tensor();
  loss_front::check_floating(op, what, c);
  LIFTOFF_CHECK(c.device() == input.device(), DeviceError, op, ": ", what, " ", shape_str(c.shape()), " on ",
                c.device().str(), " but input ", shape_str(input.shape()), " on ", input.device().str());
  const Shape& shape = input.shape();
  const int64_t lead = input.dim() - c.dim();
  bool fits = lead >= 0;
  Shape strides(shape.size(), 0);
  for (int64_t i = 0; fits && i < c.dim(); ++i) {
    const int64_t size = c.size(i);
    fits = size == shape[static_cast<size_t>(lead + i)] || size == 1;
    strides[static_cast<size_t>(lead + i)] = size == 1 ? 0 : c.strides()[static_cast<size_t>(i)];
  }
  LIFTOFF_CHECK(fits, ShapeError, op, ": ", what, " ", shape_str(c.shape()), " does not broadcast to input ",
                shape_str(shape), " (its trailing sizes must equal the input's or be 1)");
  auto view = std::make_shared<TensorImpl>();
  view->storage = c.storage();
  view->offset = c.offset();
  view->shape = shape;
  view->strides = strides;
  view->dtype = c.dtype();
  Tensor out = Tensor::empty(shape, dt, c.device());
  out.copy_(Tensor(view));
  return out;
}

Tensor pointwise_loss(const char* op, PointwiseLossArgs args, const Tensor& input, const Tensor& target,
                      Reduction reduction, const Tensor& weight = Tensor(),
                      const Tensor& pos_weight = Tensor()) {
  loss_front::check_floating(op, "input", input);
  loss_front::check_floating(op, "target", target);
  LIFTOFF_CHECK(input.shape() == target.shape(), ShapeError, op, ": target ", shape_str(target.shape()),
                " does not match input ", shape_str(input.shape()),
                " (the shapes must be equal; reshape or broadcast the target explicitly)");
  LIFTOFF_CHECK(input.device() == target.device(), DeviceError, op, ": input ", shape_str(input.shape()),
                " on ", input.device().str(), " but target ", shape_str(target.shape()), " on ",
                target.device().str());
  const DType dt = loss_front::compute_dtype(input.dtype(), target.dtype());
  const Tensor w = broadcast_constant(op, "weight", weight, input, dt);
  const Tensor pw = broadcast_constant(op, "pos_weight", pos_weight, input, dt);
  const Tensor x = cast(input, dt).contiguous();
  const Tensor t = cast(target, dt).contiguous();
  args.reduce = reduction != Reduction::none;
  args.divisor = reduction == Reduction::mean        ? static_cast<double>(x.numel())
                 : reduction == Reduction::batchmean ? static_cast<double>(x.dim() > 0 ? x.size(0) : 1)
                                                     : 1.0;
  Tensor out = Tensor::empty(args.reduce ? Shape{} : x.shape(), dt, x.device());
  LIFTOFF_DISPATCH(x.device(), pointwise_loss_forward, args, x, t, w, pw, out);
  if (should_record({x, t})) {
    record(out, op, {x, t},
           [args, xs = x.detach(), ts = t.detach(), w, pw](const Tensor& gy_in, const NeedsGrad& needs) {
             const Tensor gy = gy_in.to(xs.dtype()).contiguous();
             Tensor gx = needs[0] ? Tensor::empty(xs.shape(), xs.dtype(), xs.device()) : Tensor();
             Tensor gt = needs[1] ? Tensor::empty(xs.shape(), xs.dtype(), xs.device()) : Tensor();
             LIFTOFF_DISPATCH(xs.device(), pointwise_loss_backward, args, xs, ts, w, pw, gy, gx, gt);
             return std::vector<Tensor>{gx, gt};
           });
  }
  return out;
}

PointwiseLossArgs spec(PointwiseLoss kind, double param = 0.0) {
  PointwiseLossArgs a;
  a.kind = kind;
  a.param = param;
  return a;
}
}  // namespace

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return pointwise_loss("mse_loss", spec(PointwiseLoss::mse), input, target,
                        loss_front::parse_reduction("mse_loss", reduction));
}

Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return pointwise_loss("l1_loss", spec(PointwiseLoss::l1), input, target,
                        loss_front::parse_reduction("l1_loss", reduction));
}

Tensor smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double beta) {
  LIFTOFF_CHECK(beta >= 0.0, ValueError, "smooth_l1_loss: beta ", beta, " must be >= 0");
  // beta = 0 is exactly l1_loss (PyTorch switches too; the smooth branch would divide by zero).
  const PointwiseLossArgs a = beta == 0.0 ? spec(PointwiseLoss::l1) : spec(PointwiseLoss::smooth_l1, beta);
  return pointwise_loss("smooth_l1_loss", a, input, target,
                        loss_front::parse_reduction("smooth_l1_loss", reduction));
}

Tensor huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction, double delta) {
  LIFTOFF_CHECK(delta > 0.0, ValueError, "huber_loss: delta ", delta, " must be > 0");
  return pointwise_loss("huber_loss", spec(PointwiseLoss::huber, delta), input, target,
                        loss_front::parse_reduction("huber_loss", reduction));
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target, const Tensor& weight,
                                        const std::string& reduction, const Tensor& pos_weight) {
  const char* op = "binary_cross_entropy_with_logits";
  return pointwise_loss(op, spec(PointwiseLoss::bce_logits), input, target,
                        loss_front::parse_reduction(op, reduction), weight, pos_weight);
}

Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction, bool log_target) {
  return pointwise_loss("kl_div", spec(log_target ? PointwiseLoss::kl_div_log_target : PointwiseLoss::kl_div),
                        input, target, loss_front::parse_reduction("kl_div", reduction, true));
}

}  // namespace liftoff
