#include "ops/batch_norm2d/fusion.h"

#include <memory>
#include <utility>
#include <vector>

#include "ops/batch_norm2d/kernels.h"
#include "ops/common/layout.h"
#include "runtime/autograd.h"
#include "runtime/branches.h"
#include "runtime/deferred.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
// The statistics of a training forward, not taken yet (where the whole forward is one launch:
// cuda::batch_norm_one_launch). The first normalize pass issued takes them in its launch; reading the running
// statistics first (this write is deferred on their storage too), the layer's next forward, or backward's
// flush takes them alone. Either way they are taken once, before anyone can see them.
class PendingStatistics final : public DeferredWrite {
 public:
  PendingStatistics(Tensor x, Tensor weight, Tensor bias, Tensor running_mean, Tensor running_var,
                    Tensor batches_tracked, double momentum, double eps, Tensor save_mean, Tensor save_invstd)
      : x_(std::move(x)),
        weight_(std::move(weight)),
        bias_(std::move(bias)),
        running_mean_(std::move(running_mean)),
        running_var_(std::move(running_var)),
        batches_tracked_(std::move(batches_tracked)),
        save_mean_(std::move(save_mean)),
        save_invstd_(std::move(save_invstd)),
        momentum_(momentum),
        eps_(eps) {}

  // Takes the statistics together with the normalize pass `epilogue` into out, unless they were taken
  // already; true when it did (out is then written).
  bool take_with(BnEpilogue epilogue, const Tensor& out) {
    if (!claim()) return false;
    launch(std::move(epilogue), out);
    return true;
  }

 protected:
  void issue() override {
    BnEpilogue statistics_only;
    statistics_only.skip_normalize = true;
    launch(std::move(statistics_only), Tensor());
  }

 private:
  void launch(BnEpilogue epilogue, const Tensor& out) {
#if LIFTOFF_WITH_CUDA
    epilogue.batches_tracked = batches_tracked_;
    // As the front does around an eager forward: branches updating these running statistics take turns.
    const bool updates_running = running_mean_.defined();
    if (updates_running) order_shared_state(running_mean_.raw_data());
    cuda::batch_norm_forward(x_, weight_, bias_, running_mean_, running_var_, true, momentum_, eps_, epilogue,
                             out, save_mean_, save_invstd_);
    if (updates_running) record_shared_state(running_mean_.raw_data());
#endif
    // Taken: nothing here is needed again (and x need not stay alive for the running statistics' hook).
    x_ = weight_ = bias_ = running_mean_ = running_var_ = batches_tracked_ = save_mean_ = save_invstd_ =
        Tensor();
  }

  Tensor x_, weight_, bias_, running_mean_, running_var_, batches_tracked_, save_mean_, save_invstd_;
  double momentum_, eps_;
};

// The normalize pass of one batch-norm output, not issued yet (with the statistics, when `stats` is still
// pending).
class PendingBatchNorm final : public DeferredWrite {
 public:
  PendingBatchNorm(Tensor target, Tensor x, Tensor weight, Tensor bias, Tensor save_mean, Tensor save_invstd,
                   Tensor residual, bool training, std::shared_ptr<PendingStatistics> stats)
      : target(std::move(target)),
        x(std::move(x)),
        weight(std::move(weight)),
        bias(std::move(bias)),
        save_mean(std::move(save_mean)),
        save_invstd(std::move(save_invstd)),
        residual(std::move(residual)),
        training(training),
        stats(std::move(stats)) {}

  // Writes bn(x) (+ residual) (ReLU capped at relu_cap) into out.
  void normalize_into(const Tensor& out, bool relu, double relu_cap = kNoReluCap) const {
    BnEpilogue epilogue;
    epilogue.residual = residual;
    epilogue.relu = relu;
    epilogue.relu_cap = relu_cap;
    LIFTOFF_CHECK(x.device().is_cuda(), DeviceError,
                  "batch_norm2d: a deferred normalize pass must be on CUDA");
    if (stats != nullptr && stats->take_with(epilogue, out)) return;
#if LIFTOFF_WITH_CUDA
    cuda::batch_norm_apply(x, weight, bias, save_mean, save_invstd, epilogue, out);
#endif
  }

  // y is this pending output itself (not a view of part of it).
  bool is_whole(const Tensor& y) const {
    return y.offset() == target.offset() && y.shape() == target.shape() && y.strides() == target.strides() &&
           y.dtype() == target.dtype();
  }

  const Tensor target;  // the output's memory, without the deferred hook
  const Tensor x, weight, bias, save_mean, save_invstd, residual;
  const bool training;
  const std::shared_ptr<PendingStatistics> stats;  // null: the statistics were taken at the call

 protected:
  void issue() override {
    normalize_into(target, false);
  }
};

PendingBatchNorm* pending_batch_norm(const Tensor& y) {
  if (!y.defined()) return nullptr;
  auto* pending = dynamic_cast<PendingBatchNorm*>(y.storage().deferred());
  return pending != nullptr && pending->pending() && pending->is_whole(y) ? pending : nullptr;
}

// A fresh output in x's layout whose normalize pass is `pending`.
Tensor make_pending_output(const Tensor& like, std::shared_ptr<PendingBatchNorm> pending) {
  register_deferred_write(pending);
  like.impl().storage.defer(std::move(pending));
  return like;
}
}  // namespace

namespace detail {
void defer_batch_norm_output(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                             const Tensor& save_mean, const Tensor& save_invstd, bool training) {
  // The writer's handle shares the memory but not the hook (detach() copies the storage before defer()).
  make_pending_output(y, std::make_shared<PendingBatchNorm>(y.detach(), x, weight, bias, save_mean,
                                                            save_invstd, Tensor(), training, nullptr));
}

bool batch_norm_defers_forward(const Tensor& x, bool training) {
#if LIFTOFF_WITH_CUDA
  return training && x.device().is_cuda() && cuda::batch_norm_one_launch(x);
#else
  (void)x;
  (void)training;
  return false;
#endif
}

void defer_batch_norm_forward(const Tensor& y, const Tensor& x, const Tensor& weight, const Tensor& bias,
                              const Tensor& running_mean, const Tensor& running_var, double momentum,
                              double eps, const Tensor& batches_tracked, const Tensor& save_mean,
                              const Tensor& save_invstd) {
  // The running statistics and the batch count get a hook: a read of any of them issues the statistics.
  // Touching them first issues a previous forward's statistics still pending; the statistics then hold them
  // through handles without the hook (detach() copies the storage as it is), so the hook's owner does not
  // own itself.
  const std::vector<Tensor> hooked{running_mean, running_var, batches_tracked};
  std::vector<Tensor> unhooked;
  for (const Tensor& t : hooked) {
    if (t.defined()) t.raw_data();
    unhooked.push_back(t.defined() ? t.detach() : Tensor());
  }
  auto stats = std::make_shared<PendingStatistics>(x, weight, bias, unhooked[0], unhooked[1], unhooked[2],
                                                   momentum, eps, save_mean, save_invstd);
  make_pending_output(y, std::make_shared<PendingBatchNorm>(y.detach(), x, weight, bias, save_mean,
                                                            save_invstd, Tensor(), true, stats));
  register_deferred_write(stats);
  for (const Tensor& t : hooked) {
    if (t.defined()) t.impl().storage.defer(stats);
  }
}

void record_batch_norm_node(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& residual, const Tensor& save_mean, const Tensor& save_invstd,
                            bool training, bool relu, double relu_cap) {
  std::vector<Tensor> inputs{x, weight, bias};
  if (residual.defined()) inputs.push_back(residual);
  if (!should_record(inputs)) return;
  const MemoryFormat format =
      x.is_channels_last() && !x.is_contiguous() ? MemoryFormat::channels_last : MemoryFormat::contiguous;
  // With the ReLU fused, backward needs the output (its mask), which the node keeps instead of an extra
  // pre-activation tensor.
  const char* name = !relu                    ? "batch_norm2d"
                     : relu_cap == kNoReluCap ? "batch_norm2d_relu"
                                              : "batch_norm2d_relu6";
  // Without a residual the bias lets CUDA recompute the ReLU's mask from x (ops/batch_norm2d/kernels.h).
  const Tensor b_mask = relu && !residual.defined() ? bias.detach() : Tensor();
  record(out, name, inputs,
         [x_saved = x.detach(), w_saved = weight.detach(), b_mask, y_saved = relu ? out.detach() : Tensor(),
          save_mean, save_invstd, training, relu_cap, format](const Tensor& gy, const NeedsGrad& needs) {
           const Tensor grad_y = gy.to(x_saved.dtype()).contiguous(format);
           Tensor gx, gw, gb, gres;
           if (needs[0]) gx = Tensor::empty(x_saved.shape(), x_saved.dtype(), x_saved.device(), format);
           if (needs[1]) gw = Tensor::empty(w_saved.shape(), w_saved.dtype(), w_saved.device());
           if (needs[2]) gb = Tensor::empty(w_saved.shape(), w_saved.dtype(), w_saved.device());
           if (needs.size() > 3 && needs[3])
             gres = Tensor::empty(x_saved.shape(), x_saved.dtype(), x_saved.device(), format);
           LIFTOFF_DISPATCH(x_saved.device(), batch_norm_backward, x_saved, grad_y, w_saved, b_mask,
                            save_mean, save_invstd, training, y_saved, relu_cap, gx, gw, gb, gres);
           std::vector<Tensor> grads{gx, gw, gb};
           if (needs.size() > 3) grads.push_back(gres);
           return grads;
         });
}
}  // namespace detail

namespace {
Tensor fold_capped_relu(const Tensor& y, double relu_cap) {
  const PendingBatchNorm* pending = pending_batch_norm(y);
  if (pending == nullptr) return Tensor();
  const Tensor& x = pending->x;
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), op_memory_format(x));
  pending->normalize_into(out, true, relu_cap);
  detail::record_batch_norm_node(out, x, pending->weight, pending->bias, pending->residual,
                                 pending->save_mean, pending->save_invstd, pending->training, true, relu_cap);
  return out;
}
}  // namespace

Tensor fold_relu_into_batch_norm(const Tensor& y) {
  return fold_capped_relu(y, kNoReluCap);
}

Tensor fold_relu6_into_batch_norm(const Tensor& y) {
  return fold_capped_relu(y, 6.0);
}

Tensor fold_add_into_batch_norm(const Tensor& a, const Tensor& b, double alpha) {
  if (alpha != 1.0) return Tensor();
  const PendingBatchNorm* pending = pending_batch_norm(a);
  const Tensor* other = &b;
  if (pending == nullptr || pending->residual.defined()) {
    pending = pending_batch_norm(b);
    other = &a;
  }
  if (pending == nullptr || pending->residual.defined()) return Tensor();
  const Tensor& x = pending->x;
  const Tensor& o = *other;
  // The other operand becomes the residual: same shape, dtype and device, and not y itself (y + y).
  if (!o.defined() || o.shape() != x.shape() || o.dtype() != x.dtype() || o.device() != x.device() ||
      o.storage().deferred() == static_cast<const DeferredWrite*>(pending))
    return Tensor();
  const Tensor residual = o.contiguous(op_memory_format(x));
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device(), op_memory_format(x));
  auto fused =
      std::make_shared<PendingBatchNorm>(out.detach(), x, pending->weight, pending->bias, pending->save_mean,
                                         pending->save_invstd, residual, pending->training, pending->stats);
  detail::record_batch_norm_node(out, x, pending->weight, pending->bias, residual, pending->save_mean,
                                 pending->save_invstd, pending->training, false, kNoReluCap);
  return make_pending_output(out, std::move(fused));
}

}  // namespace liftoff
