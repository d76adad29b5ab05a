#include "ops/conv2d/fusion.h"

#include <memory>
#include <utility>

#include "ops/common/layout.h"
#include "ops/conv2d/kernels.h"
#include "runtime/config.h"
#include "runtime/deferred.h"

namespace liftoff {

namespace {
// The bias add of one convolution output, not issued yet.
class PendingConvBias final : public DeferredWrite {
 public:
  PendingConvBias(Tensor target, Tensor bias, bool channels_last)
      : target(std::move(target)), bias(std::move(bias)), channels_last(channels_last) {}

  // Writes target + bias (then ReLU when relu) into out.
  void add_into(const Tensor& out, bool relu) const {
    LIFTOFF_CHECK(target.device().is_cuda(), DeviceError, "conv2d: a deferred bias add must be on CUDA");
#if LIFTOFF_WITH_CUDA
    cuda::conv2d_add_bias(target, bias, out, channels_last, relu);
#else
    (void)out;
    (void)relu;
#endif
  }

  // y is this pending output itself (not a view of part of it).
  bool is_whole(const Tensor& y) const {
    return y.offset() == target.offset() && y.shape() == target.shape() && y.strides() == target.strides() &&
           y.dtype() == target.dtype();
  }

  const Tensor target;  // the output's memory (the convolution, without the bias), without the deferred hook
  const Tensor bias;
  const bool channels_last;

 protected:
  void issue() override {
    add_into(target, false);
  }
};

const PendingConvBias* pending_conv_bias(const Tensor& y) {
  if (!y.defined()) return nullptr;
  const auto* pending = dynamic_cast<const PendingConvBias*>(y.storage().deferred());
  return pending != nullptr && pending->pending() && pending->is_whole(y) ? pending : nullptr;
}
}  // namespace

namespace detail {
bool conv_defers_bias(const Tensor& x) {
  if (!x.device().is_cuda()) return false;
  return config::get_string(config::Knob::conv_bias_relu).value_or("off") == "auto";
}

void defer_conv_bias(const Tensor& y, const Tensor& bias, bool channels_last) {
  // The writer's handle shares the memory but not the hook (detach() copies the storage before defer()).
  auto pending = std::make_shared<PendingConvBias>(y.detach(), bias, channels_last);
  register_deferred_write(pending);
  y.impl().storage.defer(std::move(pending));
}
}  // namespace detail

Tensor fold_relu_into_conv_bias(const Tensor& y) {
  const PendingConvBias* pending = pending_conv_bias(y);
  if (pending == nullptr) return Tensor();
  const Tensor& t = pending->target;
  Tensor out = Tensor::empty(t.shape(), t.dtype(), t.device(), op_memory_format(t));
  pending->add_into(out, true);
  return out;
}

}  // namespace liftoff
