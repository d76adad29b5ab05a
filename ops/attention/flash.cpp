#include "ops/attention/flash.h"

#include <atomic>
#include <cmath>

#include "ops/attention/path.h"
#include "ops/common/broadcast.h"
#include "runtime/autograd.h"
#include "runtime/config.h"

namespace liftoff {

namespace {
constexpr const char* kOp = "scaled_dot_product_attention";

#if LIFTOFF_WITH_CUDA
// The kernels read rows with 16-byte vector loads: the last dim dense, every other stride a multiple of 8
// elements and the data 16-byte aligned. A permute of a [B, L, H, D] projection (vit_tiny's q, k, v)
// qualifies as it is; anything else is copied once.
bool vector_ready(const Tensor& t) {
  if (t.strides().back() != 1 || reinterpret_cast<uintptr_t>(t.raw_data()) % 16 != 0) return false;
  for (int64_t d = 0; d + 1 < t.dim(); ++d) {
    if (t.shape()[static_cast<size_t>(d)] > 1 && t.strides()[static_cast<size_t>(d)] % 8 != 0) return false;
  }
  return true;
}

Tensor vector_ready_copy(const Tensor& t) {
  return vector_ready(t) ? t : t.clone();
}

FlashOperand operand_of(const Tensor& t, const Shape& batch) {
  FlashOperand operand;
  operand.data = t.raw_data();
  operand.row = t.strides()[static_cast<size_t>(t.dim() - 2)];
  const int64_t skipped = static_cast<int64_t>(batch.size()) - (t.dim() - 2);  // leading dims t lacks
  for (size_t d = 0; d < batch.size(); ++d) {
    const int64_t own = static_cast<int64_t>(d) - skipped;
    operand.batch_strides[d] =
        own < 0 || t.shape()[static_cast<size_t>(own)] == 1 ? 0 : t.strides()[static_cast<size_t>(own)];
  }
  return operand;
}

FlashProblem problem_of(const Tensor& q, const Tensor& k, const Tensor& v, const Shape& batch, double scale,
                        bool is_causal) {
  FlashProblem p;
  p.q = operand_of(q, batch);
  p.k = operand_of(k, batch);
  p.v = operand_of(v, batch);
  p.batch_ndim = static_cast<int>(batch.size());
  for (size_t d = 0; d < batch.size(); ++d) p.batch_sizes[d] = batch[d];
  p.batch = shape_numel(batch);
  p.l = q.size(-2);
  p.s = k.size(-2);
  p.head_dim = static_cast<int>(q.size(-1));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale / std::log(2.0));
  p.causal = is_causal;
  p.pipelined = flash_pipelined_applies(p.l, p.s);
  return p;
}

Shape with_rows(Shape batch, int64_t rows, int64_t cols) {
  batch.push_back(rows);
  batch.push_back(cols);
  return batch;
}
#endif
}  // namespace

namespace {
std::atomic<FlashKernels> g_flash_kernels{FlashKernels::automatic};
// Below this many queries or keys a sequence is one or two simple tiles and the pipelined kernels' larger
// tiles and deeper prologue buy nothing (ViT-tiny's L = 65).
constexpr int64_t kPipelinedMinLength = 128;
}  // namespace

void set_flash_kernels(FlashKernels kernels) {
  g_flash_kernels.store(kernels);
}

FlashKernels flash_kernels() {
  return g_flash_kernels.load();
}

bool flash_pipelined_applies(int64_t l, int64_t s) {
  switch (flash_kernels()) {
    case FlashKernels::simple:
      return false;
    case FlashKernels::pipelined:
      return true;
    case FlashKernels::automatic:
      break;
  }
  return l >= kPipelinedMinLength && s >= kPipelinedMinLength;
}

bool flash_attention_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                             double dropout_p) {
  return flash_takes(attention_call_facts(q, k, v, attn_mask, dropout_p)) &&
         config::get_bool(config::Knob::attention_fused).value_or(true);
}

Tensor flash_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Shape& batch, double scale,
                       bool is_causal) {
#if LIFTOFF_WITH_CUDA
  const Tensor qr = vector_ready_copy(q.detach()), kr = vector_ready_copy(k.detach()),
               vr = vector_ready_copy(v.detach());
  const FlashProblem p = problem_of(qr, kr, vr, batch, scale, is_causal);
  const Shape out_shape = with_rows(batch, p.l, p.head_dim);
  const Tensor out = Tensor::empty(out_shape, q.dtype(), q.device());
  const Tensor lse = Tensor::empty({p.batch, p.l}, DType::f32, q.device());
  cuda::flash_forward(p, out, lse);
  if (!should_record({q, k, v})) return out;
  record(out, kOp, {q, k, v},
         [qr, kr, vr, batch, scale, is_causal, out_saved = out.detach(), lse, out_shape,
          shapes = std::vector<Shape>{q.shape(), k.shape(), v.shape()}](const Tensor& gy,
                                                                        const NeedsGrad& needs) {
           const FlashProblem p = problem_of(qr, kr, vr, batch, scale, is_causal);
           const Tensor g = vector_ready_copy(gy.to(qr.dtype()).contiguous());  // read as [batch, L, D]
           const Device device = qr.device();
           const Shape key_shape = with_rows(batch, p.s, p.head_dim);
           const Tensor delta = Tensor::empty({p.batch, p.l}, DType::f32, device);
           const Tensor grad_q_acc = Tensor::empty(out_shape, DType::f32, device);
           const Tensor gq = Tensor::empty(out_shape, qr.dtype(), device);
           const Tensor gk = Tensor::empty(key_shape, qr.dtype(), device);
           const Tensor gv = Tensor::empty(key_shape, qr.dtype(), device);
           cuda::flash_backward(p, out_saved, lse, g, delta, grad_q_acc, gq, gk, gv);
           return std::vector<Tensor>{needs[0] ? sum_to_shape(gq, shapes[0]) : Tensor(),
                                      needs[1] ? sum_to_shape(gk, shapes[1]) : Tensor(),
                                      needs[2] ? sum_to_shape(gv, shapes[2]) : Tensor()};
         });
  return out;
#else
  (void)q, (void)k, (void)v, (void)batch, (void)scale, (void)is_causal;
  throw DeviceError(str_cat(kOp, ": the fused path needs a build with CUDA"));
#endif
}

}  // namespace liftoff
