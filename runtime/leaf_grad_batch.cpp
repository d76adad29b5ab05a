#include "runtime/leaf_grad_batch.h"

#include <atomic>

#include "runtime/config.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/grad_cast.h"
#endif

namespace liftoff::detail {

namespace {
thread_local LeafGradBatch* current_batch = nullptr;
std::atomic<int64_t> deferred_count{0};
// Queued half gradients stay alive until the flush: past this many bytes the batch flushes early.
constexpr int64_t kMaxQueuedBytes = int64_t{256} << 20;
}  // namespace

LeafGradBatch::LeafGradBatch()
    : enabled_(config::get_string(config::Knob::grad_cast).value_or("batched") == "batched"),
      previous_(current_batch) {
  // A backward nested in another (run from a hook): the enclosing batches write their leaves' .grad first,
  // so that the nested one reads and adds to final values.
  for (LeafGradBatch* outer = previous_; outer != nullptr; outer = outer->previous_) outer->flush();
  current_batch = this;
}

LeafGradBatch::~LeafGradBatch() {
  current_batch = previous_;
  try {
    flush();
  } catch (...) {  // NOLINT(bugprone-empty-catch): the exception that unwound the backward is the one to see
  }
}

void LeafGradBatch::flush() {
  if (srcs_.empty()) return;
  std::vector<Tensor> srcs, dsts;
  std::vector<bool> accumulate;
  srcs.swap(srcs_);
  dsts.swap(dsts_);
  accumulate.swap(accumulate_);
  queued_bytes_ = 0;
#if LIFTOFF_WITH_CUDA
  cuda::cast_leaf_grads(srcs, dsts, accumulate);
#endif
}

int64_t LeafGradBatch::deferred_total() {
  return deferred_count.load(std::memory_order_relaxed);
}

bool LeafGradBatch::defer(const Tensor& leaf, const Tensor& g) {
#if LIFTOFF_WITH_CUDA
  LeafGradBatch* batch = current_batch;
  if (batch == nullptr || !batch->enabled_ || !g.defined() || !g.is_cuda() || leaf.dtype() != DType::f32)
    return false;
  if (g.dtype() != DType::f16 && g.dtype() != DType::bf16) return false;
  // One device a batch (one launch's table); a second device converts at once.
  if (!batch->dsts_.empty() && batch->dsts_.front().device() != g.device()) return false;
  TensorImpl& impl = leaf.impl();
  const bool accumulate = impl.grad != nullptr;
  // A first gradient takes the leaf's own layout, as the accumulator's immediate path does.
  const Tensor dst =
      accumulate ? Tensor(impl.grad) : Tensor::empty(g.shape(), DType::f32, g.device(), leaf.memory_format());
  if (!cuda::leaf_grad_cast_supported(g, dst)) return false;
  if (!accumulate) impl.grad = dst.impl_ptr();
  batch->srcs_.push_back(g);
  batch->dsts_.push_back(dst);
  batch->accumulate_.push_back(accumulate);
  deferred_count.fetch_add(1, std::memory_order_relaxed);
  batch->queued_bytes_ += static_cast<int64_t>(g.nbytes());
  if (batch->queued_bytes_ > kMaxQueuedBytes) batch->flush();
  return true;
#else
  (void)leaf;
  (void)g;
  return false;
#endif
}

}  // namespace liftoff::detail
