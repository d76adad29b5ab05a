// Leaf gradients converted in one batch at the end of a backward. Autocast hands each f32 master weight its
// gradient in the half copy's dtype and layout (runtime/autocast.cpp); on CUDA the leaf's accumulator does
// not convert it at once (one cast or transpose kernel per weight: 26 a step on ResNet-18, 56 on
// MobileNetV2) but queues it on the backward's batch, which run_backward flushes with one kernel per 96
// weights (runtime/cuda/grad_cast.h) before it returns (earlier when the queued gradients pass 256 MiB). A
// leaf with gradient-ready hooks (DDP's all-reduce) is converted at once, since its hook reads .grad; so is
// everything on the CPU, and everything under LIFTOFF_GRAD_CAST=each. Internal to the autograd engine.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff::detail {

class LeafGradBatch {
 public:
  LeafGradBatch();   // the calling thread's current batch until destroyed; flushes the enclosing ones
  ~LeafGradBatch();  // converts what is still queued (an exception unwound the backward); never throws
  LeafGradBatch(const LeafGradBatch&) = delete;
  LeafGradBatch& operator=(const LeafGradBatch&) = delete;

  // Runs the queued conversions; the leaves' .grad hold their final values (in stream order) afterwards.
  void flush();

  // Queues g for `leaf` on the calling thread's current batch: allocates the leaf's .grad if it has none
  // (else g is added to it at the flush). False, with nothing changed: no current batch, not a half
  // gradient of an f32 CUDA leaf that the batched kernel converts, another device than the batch's, or
  // LIFTOFF_GRAD_CAST=each.
  static bool defer(const Tensor& leaf, const Tensor& g);

  // Gradients queued by every batch of the process so far (tests: that the batch path ran).
  static int64_t deferred_total();

 private:
  std::vector<Tensor> srcs_, dsts_;
  std::vector<bool> accumulate_;
  int64_t queued_bytes_ = 0;
  bool enabled_;  // LIFTOFF_GRAD_CAST=batched, read once a backward rather than once a weight
  LeafGradBatch* previous_;
};

}  // namespace liftoff::detail
