#include "ops/cast/cast.h"
#include "ops/loss/front.h"
#include "ops/loss/kernels.h"
#include "ops/loss/loss.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
// input [C] / [N, C] / [N, C, d1, ...] against target [] / [N] / [N, d1, ...].
NllLossArgs nll_geometry(const Tensor& input, const Tensor& target) {
  LIFTOFF_CHECK(input.dim() >= 1, ShapeError, "nll_loss: input ", shape_str(input.shape()),
                " must be [C], [N, C] or [N, C, d1, ...] (target ", shape_str(target.shape()), ")");
  Shape expected;
  NllLossArgs a{};
  if (input.dim() == 1) {
    a.n = 1;
    a.classes = input.size(0);
    a.inner = 1;
  } else {
    a.n = input.size(0);
    a.classes = input.size(1);
    a.inner = 1;
    expected.push_back(a.n);
    for (int64_t d = 2; d < input.dim(); ++d) {
      expected.push_back(input.size(d));
      a.inner *= input.size(d);
    }
  }
  LIFTOFF_CHECK(target.shape() == expected, ShapeError, "nll_loss: target ", shape_str(target.shape()),
                " does not match input ", shape_str(input.shape()), " (expected target ", shape_str(expected),
                ": the input without its class dimension 1)");
  LIFTOFF_CHECK(a.classes >= 1, ShapeError, "nll_loss: input ", shape_str(input.shape()), " has no classes");
  return a;
}

template <class I>
void check_targets(const Tensor& target, const NllLossArgs& a, const Tensor& input) {
  const I* t = target.data<I>();
  for (int64_t i = 0; i < target.numel(); ++i) {
    const int64_t c = static_cast<int64_t>(t[i]);
    LIFTOFF_CHECK(c == a.ignore_index || (c >= 0 && c < a.classes), ValueError, "nll_loss: target ", c,
                  " at position ", i, " is outside [0, ", a.classes, ") for input ", shape_str(input.shape()),
                  " (and is not ignore_index ", a.ignore_index, ")");
  }
}
}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target_in, const Tensor& weight_in, int64_t ignore_index,
                const std::string& reduction_name) {
  loss_front::check_floating("nll_loss", "input", input);
  LIFTOFF_CHECK(target_in.defined(), ValueError, "nll_loss: target must be a defined tensor");
  LIFTOFF_CHECK(target_in.dtype() == DType::i64 || target_in.dtype() == DType::i32, DTypeError,
                "nll_loss: target ", shape_str(target_in.shape()), " has dtype ",
                dtype_name(target_in.dtype()), ", expected class indices (i64 or i32)");
  LIFTOFF_CHECK(input.device() == target_in.device(), DeviceError, "nll_loss: input ",
                shape_str(input.shape()), " on ", input.device().str(), " but target ",
                shape_str(target_in.shape()), " on ", target_in.device().str());
  NllLossArgs a = nll_geometry(input, target_in);
  a.ignore_index = ignore_index;
  const auto reduction = loss_front::parse_reduction("nll_loss", reduction_name);
  a.reduce = reduction != loss_front::Reduction::none;
  a.mean = reduction == loss_front::Reduction::mean;
  const DType dt = loss_front::compute_dtype(input.dtype(), input.dtype());
  Tensor w;
  if (weight_in.defined()) {
    loss_front::check_floating("nll_loss", "weight", weight_in);
    LIFTOFF_CHECK(weight_in.shape() == Shape{a.classes}, ShapeError, "nll_loss: weight ",
                  shape_str(weight_in.shape()), " does not match the ", a.classes, " classes of input ",
                  shape_str(input.shape()), " (expected [", a.classes, "])");
    LIFTOFF_CHECK(weight_in.device() == input.device(), DeviceError, "nll_loss: weight on ",
                  weight_in.device().str(), " but input on ", input.device().str());
    w = weight_in.detach().to(dt).contiguous();
  }
  const Tensor target = target_in.contiguous();
  if (target.device().is_cpu()) {
    if (target.dtype() == DType::i64) {
      check_targets<int64_t>(target, a, input);
    } else {
      check_targets<int32_t>(target, a, input);
    }
  }
  const Tensor x = cast(input, dt).contiguous();
  Tensor out = Tensor::empty(a.reduce ? Shape{} : target.shape(), dt, x.device());
  Tensor total_weight = Tensor::empty({}, dt == DType::f64 ? DType::f64 : DType::f32, x.device());
  LIFTOFF_DISPATCH(x.device(), nll_loss_forward, a, x, target, w, out, total_weight);
  if (should_record({x})) {
    record(out, "nll_loss", {x},
           [a, shape = x.shape(), dt, ts = target.detach(), w, total_weight](const Tensor& gy_in,
                                                                             const NeedsGrad&) {
             const Tensor gy = gy_in.to(dt).contiguous();
             Tensor gx = Tensor::empty(shape, dt, gy.device());
             LIFTOFF_DISPATCH(gy.device(), nll_loss_backward, a, ts, w, total_weight, gy, gx);
             return std::vector<Tensor>{gx};
           });
  }
  return out;
}

}  // namespace liftoff
