#include "ops/cross_entropy/cross_entropy.h"

#include "ops/cross_entropy/kernels.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"

namespace liftoff {

Tensor cross_entropy(const Tensor& logits_in, const Tensor& labels_in, double label_smoothing) {
  LIFTOFF_CHECK(logits_in.defined() && labels_in.defined(), ValueError,
                "cross_entropy: logits and labels must be defined tensors");
  LIFTOFF_CHECK(logits_in.dim() == 2, ShapeError, "cross_entropy: expected logits [N, classes], got ",
                shape_str(logits_in.shape()), " (labels ", shape_str(labels_in.shape()), ")");
  LIFTOFF_CHECK(labels_in.dim() == 1 && labels_in.size(0) == logits_in.size(0), ShapeError,
                "cross_entropy: labels ", shape_str(labels_in.shape()), " do not match logits ",
                shape_str(logits_in.shape()), " (expected [", logits_in.size(0), "])");
  LIFTOFF_CHECK(logits_in.size(0) >= 1 && logits_in.size(1) >= 1, ShapeError, "cross_entropy: logits ",
                shape_str(logits_in.shape()), " must have at least one row and one class");
  LIFTOFF_CHECK(is_floating(logits_in.dtype()), DTypeError, "cross_entropy: logits ",
                shape_str(logits_in.shape()), " have dtype ", dtype_name(logits_in.dtype()),
                ", expected a floating type");
  LIFTOFF_CHECK(labels_in.dtype() == DType::i64, DTypeError, "cross_entropy: labels ",
                shape_str(labels_in.shape()), " have dtype ", dtype_name(labels_in.dtype()),
                ", expected i64");
  LIFTOFF_CHECK(logits_in.device() == labels_in.device(), DeviceError, "cross_entropy: logits ",
                shape_str(logits_in.shape()), " on ", logits_in.device().str(), " but labels ",
                shape_str(labels_in.shape()), " on ", labels_in.device().str());
  LIFTOFF_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0, ValueError,
                "cross_entropy: label_smoothing ", label_smoothing, " is outside [0, 1]");
  const Tensor logits = logits_in.contiguous();
  const Tensor labels = labels_in.contiguous();
  const int64_t rows = logits.size(0);
  const int64_t classes = logits.size(1);
  if (labels.device().is_cpu()) {
    const int64_t* l = labels.data<int64_t>();
    for (int64_t i = 0; i < rows; ++i) {
      LIFTOFF_CHECK(l[i] >= 0 && l[i] < classes, ValueError, "cross_entropy: label ", l[i], " in row ", i,
                    " is outside [0, ", classes, ") for logits ", shape_str(logits.shape()));
    }
  }
  Tensor loss = Tensor::empty({}, logits.dtype(), logits.device());
  Tensor lse = Tensor::empty({rows}, logits.dtype() == DType::f64 ? DType::f64 : DType::f32, logits.device());
  LIFTOFF_DISPATCH(logits.device(), cross_entropy_forward, logits, labels, label_smoothing, loss, lse);
  if (should_record({logits})) {
    record(loss, "cross_entropy", {logits},
           [logits_saved = logits.detach(), labels_saved = labels.detach(), lse, label_smoothing](
               const Tensor& gy, const NeedsGrad&) {
             const Tensor grad_loss = gy.to(logits_saved.dtype()).contiguous();
             Tensor gx = Tensor::empty(logits_saved.shape(), logits_saved.dtype(), logits_saved.device());
             LIFTOFF_DISPATCH(gx.device(), cross_entropy_backward, logits_saved, labels_saved, lse, grad_loss,
                              label_smoothing, gx);
             return std::vector<Tensor>{gx};
           });
  }
  return loss;
}

}  // namespace liftoff
