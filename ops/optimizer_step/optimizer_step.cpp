#include "ops/optimizer_step/optimizer_step.h"

#include <cmath>
#include <map>

#include "ops/optimizer_step/kernels.h"
#include "runtime/dispatch.h"

namespace liftoff {

namespace {
std::string describe(const Tensor& t) {
  return str_cat(shape_str(t.shape()), " ", dtype_name(t.dtype()), " on ", t.device().str());
}

bool is_half(DType d) {
  return d == DType::f16 || d == DType::bf16;
}

struct CheckedLists {
  std::vector<Tensor> params, grads;
  std::vector<std::vector<Tensor>> states;
};

// Validates the lists and drops entries without a gradient. `states` are named by `state_names`.
CheckedLists check_lists(const char* op, const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                         const std::vector<const std::vector<Tensor>*>& states,
                         const std::vector<const char*>& state_names) {
  LIFTOFF_CHECK(grads.size() == params.size(), ValueError, op, ": ", params.size(), " parameters but ",
                grads.size(), " gradients");
  for (size_t s = 0; s < states.size(); ++s) {
    LIFTOFF_CHECK(states[s]->size() == params.size(), ValueError, op, ": ", params.size(), " parameters but ",
                  states[s]->size(), " ", state_names[s]);
  }
  CheckedLists out;
  out.states.resize(states.size());
  const Tensor* first_param = nullptr;
  const Tensor* first_grad = nullptr;
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    const Tensor& g = grads[i];
    LIFTOFF_CHECK(p.defined(), ValueError, op, ": parameter ", i, " is undefined");
    if (!g.defined()) continue;
    LIFTOFF_CHECK(p.dtype() == DType::f32 || p.dtype() == DType::f64, DTypeError, op, ": parameter ", i, " ",
                  describe(p), " must be f32 or f64 (keep f32 master weights under AMP)");
    LIFTOFF_CHECK(p.is_contiguous(p.memory_format()), ValueError, op, ": parameter ", i, " ", describe(p),
                  " must be dense, contiguous or channels-last (it is updated in place)");
    LIFTOFF_CHECK(g.shape() == p.shape(), ShapeError, op, ": gradient ", i, " ", describe(g),
                  " does not match parameter ", describe(p));
    LIFTOFF_CHECK(g.device() == p.device(), DeviceError, op, ": gradient ", i, " ", describe(g),
                  " is not on the device of parameter ", describe(p));
    const bool half_grad_ok = p.device().is_cuda() && p.dtype() == DType::f32 && is_half(g.dtype());
    LIFTOFF_CHECK(g.dtype() == p.dtype() || half_grad_ok, DTypeError, op, ": gradient ", i, " ", describe(g),
                  " must have the dtype of parameter ", describe(p),
                  " (f16/bf16 gradients are accepted only for f32 parameters on CUDA)");
    if (first_param == nullptr) {
      first_param = &p;
      first_grad = &g;
    } else {
      LIFTOFF_CHECK(p.device() == first_param->device(), DeviceError, op, ": parameter ", i, " ", describe(p),
                    " is not on the device of the first parameter ", describe(*first_param));
      LIFTOFF_CHECK(p.dtype() == first_param->dtype() && g.dtype() == first_grad->dtype(), DTypeError, op,
                    ": parameter ", i, " ", describe(p), " with gradient ", describe(g),
                    " differs in dtype from the first parameter ", describe(*first_param), " with gradient ",
                    describe(*first_grad), " (one fused step needs one dtype pair)");
    }
    for (size_t s = 0; s < states.size(); ++s) {
      const Tensor& st = (*states[s])[i];
      LIFTOFF_CHECK(st.defined(), ValueError, op, ": ", state_names[s], " ", i, " is undefined");
      LIFTOFF_CHECK(st.shape() == p.shape() && st.dtype() == p.dtype() && st.device() == p.device(),
                    ShapeError, op, ": ", state_names[s], " ", i, " ", describe(st),
                    " does not match parameter ", describe(p));
      LIFTOFF_CHECK(same_dense_order(st, p), ValueError, op, ": ", state_names[s], " ", i, " ", describe(st),
                    " must be dense in the layout of parameter ", describe(p),
                    " (both are updated in place, element by element)");
      out.states[s].push_back(st);
    }
    out.params.push_back(p);
    out.grads.push_back(same_dense_order(g, p) ? g : g.contiguous(p.memory_format()));
  }
  return out;
}

// Validates the optional skip flag against the checked lists; true when the CPU step must be skipped (the
// host read is free there). CUDA leaves the decision to the kernels.
bool check_skip_flag(const char* op, const Tensor& flag, const Tensor& first_param) {
  if (!flag.defined()) return false;
  LIFTOFF_CHECK(flag.dtype() == DType::f32 && flag.numel() == 1, DTypeError, op, ": skip_if_nonzero ",
                describe(flag), " must be a one-element f32 tensor");
  LIFTOFF_CHECK(flag.device() == first_param.device(), DeviceError, op, ": skip_if_nonzero ", describe(flag),
                " is not on the device of the parameters ", describe(first_param));
  if (flag.device().is_cuda()) return false;
  const float value = flag.contiguous().data<float>()[0];
  return value != 0.0f;  // NaN counts as set, as on the device
}
}  // namespace

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              const std::vector<Tensor>& momentum_buffers, const SgdHyper& hyper,
              const Tensor& skip_if_nonzero) {
  LIFTOFF_CHECK(hyper.lr >= 0.0, ValueError, "sgd_step: learning rate ", hyper.lr, " is negative");
  LIFTOFF_CHECK(hyper.momentum >= 0.0, ValueError, "sgd_step: momentum ", hyper.momentum, " is negative");
  LIFTOFF_CHECK(hyper.weight_decay >= 0.0, ValueError, "sgd_step: weight_decay ", hyper.weight_decay,
                " is negative");
  LIFTOFF_CHECK(!hyper.nesterov || hyper.momentum > 0.0, ValueError, "sgd_step: nesterov needs momentum > 0");
  const bool use_momentum = hyper.momentum != 0.0;
  CheckedLists lists = use_momentum
                           ? check_lists("sgd_step", params, grads, {&momentum_buffers}, {"momentum buffer"})
                           : check_lists("sgd_step", params, grads, {}, {});
  if (lists.params.empty()) return;
  if (check_skip_flag("sgd_step", skip_if_nonzero, lists.params[0])) return;
  double lr = hyper.lr;
  if (hyper.lr_tensor.defined()) {
    const Tensor& t = hyper.lr_tensor;
    LIFTOFF_CHECK(t.dtype() == DType::f32 && t.numel() == 1, DTypeError, "sgd_step: lr_tensor ", describe(t),
                  " must be a one-element f32 tensor");
    LIFTOFF_CHECK(t.device() == lists.params[0].device(), DeviceError, "sgd_step: lr_tensor ", describe(t),
                  " is not on the device of the parameters ", describe(lists.params[0]));
    // The CPU kernel takes the value (free to read there); CUDA kernels read the tensor on the device.
    if (t.device().is_cpu()) lr = static_cast<double>(t.contiguous().data<float>()[0]);
  }
  const std::vector<Tensor> buffers = use_momentum ? lists.states[0] : std::vector<Tensor>{};
  const SgdScalars s{
      lr,
      hyper.momentum,
      hyper.weight_decay,
      hyper.nesterov,
      skip_if_nonzero,
      hyper.lr_tensor.defined() && hyper.lr_tensor.device().is_cuda() ? hyper.lr_tensor : Tensor()};
  LIFTOFF_DISPATCH(lists.params[0].device(), sgd_step, lists.params, lists.grads, buffers, s);
}

AdamWScalars adamw_scalars(double lr, double beta1, double beta2, double eps, double weight_decay,
                           int64_t t) {
  AdamWScalars s{};
  s.lr = lr;
  s.beta1 = beta1;
  s.beta2 = beta2;
  s.eps = eps;
  s.weight_decay = weight_decay;
  s.decay = std::fma(-lr, weight_decay, 1.0);  // explicit: the kernels compute it the same way
  s.step_size = lr / (1.0 - std::pow(beta1, static_cast<double>(t)));
  s.bias_correction2_sqrt = std::sqrt(1.0 - std::pow(beta2, static_cast<double>(t)));
  return s;
}

namespace {
// The counts of the entries that have a gradient (check_lists' order), checked against their parameters.
std::vector<Tensor> checked_step_counts(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                                        const std::vector<Tensor>& counts) {
  LIFTOFF_CHECK(counts.size() == params.size(), ValueError, "adamw_step: ", params.size(), " parameters but ",
                counts.size(), " step counts");
  std::vector<Tensor> out;
  for (size_t i = 0; i < params.size(); ++i) {
    if (!grads[i].defined()) continue;
    const Tensor& c = counts[i];
    LIFTOFF_CHECK(c.defined() && c.dtype() == DType::i64 && c.numel() == 1 && c.is_contiguous(), DTypeError,
                  "adamw_step: step count ", i, c.defined() ? " " + describe(c) : std::string(" (undefined)"),
                  " must be a one-element i64 tensor (updated in place)");
    LIFTOFF_CHECK(c.device() == params[i].device(), DeviceError, "adamw_step: step count ", i, " ",
                  describe(c), " is not on the device of parameter ", describe(params[i]));
    out.push_back(c);
  }
  return out;
}

// The learning rate to use: the f64 tensor's value when given (read on the host only for the CPU).
double checked_adamw_lr(const AdamWHyper& hyper, const Tensor& first_param) {
  const Tensor& t = hyper.lr_tensor;
  if (!t.defined()) return hyper.lr;
  LIFTOFF_CHECK(t.dtype() == DType::f64 && t.numel() == 1, DTypeError, "adamw_step: lr_tensor ", describe(t),
                " must be a one-element f64 tensor");
  LIFTOFF_CHECK(t.device() == first_param.device(), DeviceError, "adamw_step: lr_tensor ", describe(t),
                " is not on the device of the parameters ", describe(first_param));
  return t.device().is_cpu() ? t.contiguous().data<double>()[0] : hyper.lr;
}

// The CPU with step counts: each count advances on the host, and the parameters at one count share a pass.
void cpu_adamw_with_counts(const CheckedLists& lists, const std::vector<Tensor>& counts, const AdamWHyper& h,
                           double lr) {
  std::map<int64_t, std::vector<size_t>> by_count;
  for (size_t i = 0; i < counts.size(); ++i) by_count[++counts[i].data<int64_t>()[0]].push_back(i);
  for (const auto& [count, indices] : by_count) {
    std::vector<Tensor> p, g, m, v;
    for (size_t i : indices) {
      p.push_back(lists.params[i]);
      g.push_back(lists.grads[i]);
      m.push_back(lists.states[0][i]);
      v.push_back(lists.states[1][i]);
    }
    cpu::adamw_step(p, g, m, v, adamw_scalars(lr, h.beta1, h.beta2, h.eps, h.weight_decay, count));
  }
}
}  // namespace

void adamw_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const AdamWHyper& hyper, const Tensor& skip_if_nonzero) {
  LIFTOFF_CHECK(hyper.lr >= 0.0, ValueError, "adamw_step: learning rate ", hyper.lr, " is negative");
  LIFTOFF_CHECK(hyper.beta1 >= 0.0 && hyper.beta1 < 1.0 && hyper.beta2 >= 0.0 && hyper.beta2 < 1.0,
                ValueError, "adamw_step: betas (", hyper.beta1, ", ", hyper.beta2, ") must lie in [0, 1)");
  LIFTOFF_CHECK(hyper.eps >= 0.0, ValueError, "adamw_step: eps ", hyper.eps, " is negative");
  LIFTOFF_CHECK(hyper.weight_decay >= 0.0, ValueError, "adamw_step: weight_decay ", hyper.weight_decay,
                " is negative");
  const bool counted = !hyper.step_counts.empty();
  LIFTOFF_CHECK(counted || hyper.step >= 1, ValueError, "adamw_step: step ", hyper.step,
                " must be >= 1 (1-based)");
  CheckedLists lists =
      check_lists("adamw_step", params, grads, {&exp_avg, &exp_avg_sq}, {"exp_avg", "exp_avg_sq"});
  const std::vector<Tensor> counts =
      counted ? checked_step_counts(params, grads, hyper.step_counts) : std::vector<Tensor>{};
  if (lists.params.empty()) return;
  const Tensor& first = lists.params[0];
  const double lr = checked_adamw_lr(hyper, first);
  if (check_skip_flag("adamw_step", skip_if_nonzero, first)) return;  // the CPU: no count advances either
  if (counted && first.device().is_cpu()) {
    cpu_adamw_with_counts(lists, counts, hyper, lr);
    return;
  }
  AdamWScalars s =
      adamw_scalars(lr, hyper.beta1, hyper.beta2, hyper.eps, hyper.weight_decay, counted ? 1 : hyper.step);
  s.skip_if_nonzero = skip_if_nonzero;
  if (first.device().is_cuda()) {
    s.lr_tensor = hyper.lr_tensor;
    s.step_counts = counts;
  }
  LIFTOFF_DISPATCH(first.device(), adamw_step, lists.params, lists.grads, lists.states[0], lists.states[1],
                   s);
}

void accumulate_gradients(const std::vector<Tensor>& sums, const std::vector<Tensor>& grads) {
  LIFTOFF_CHECK(sums.size() == grads.size(), ValueError, "accumulate_gradients: ", sums.size(), " sums but ",
                grads.size(), " gradients");
  std::vector<Tensor> dst, src;
  for (size_t i = 0; i < sums.size(); ++i) {
    if (!sums[i].defined() || !grads[i].defined()) continue;
    const Tensor& s = sums[i];
    const Tensor& g = grads[i];
    LIFTOFF_CHECK(s.shape() == g.shape() && s.dtype() == g.dtype() && s.device() == g.device(), ValueError,
                  "accumulate_gradients: entry ", i, ": sum ", describe(s), " vs gradient ", describe(g));
    const MemoryFormat format = s.memory_format();
    LIFTOFF_CHECK(s.is_contiguous(format) && g.is_contiguous(format), ValueError,
                  "accumulate_gradients: entry ", i, ": sum ", describe(s), " and gradient ", describe(g),
                  " must be dense in one layout");
    if (!dst.empty()) {
      LIFTOFF_CHECK(s.dtype() == dst[0].dtype() && s.device() == dst[0].device(), ValueError,
                    "accumulate_gradients: entry ", i, " ", describe(s),
                    " differs from entry 0's dtype or device (", describe(dst[0]), ")");
    }
    dst.push_back(s);
    src.push_back(g);
  }
  if (dst.empty()) return;
  if (dst[0].device().is_cuda()) {
#if LIFTOFF_WITH_CUDA
    cuda::accumulate_gradients(dst, src);
#else
    throw DeviceError("accumulate_gradients: built without CUDA");
#endif
    return;
  }
  for (size_t i = 0; i < dst.size(); ++i) accumulate_into(dst[i], src[i]);  // the CPU's one-tensor add
}

}  // namespace liftoff
