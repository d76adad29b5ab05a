// Autocast: the mixed-precision policy of --amp. Inside an AutocastGuard, Conv2d and Linear run in the half
// dtype (f16/bf16, f32 accumulation in cuDNN/cuBLAS) on half copies of their f32 master weights; batch-norm
// statistics, the loss and the optimizer stay f32. The half copies are made once per optimizer step (the
// trainer calls advance_weight_version() after each step), not once per micro-batch.
#pragma once
#include <cstdint>

#include "runtime/tensor.h"

namespace liftoff {

class AutocastGuard {
 public:
  // dtype f16 or bf16 turns autocast on for this thread; f32 turns it off.
  explicit AutocastGuard(DType dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool previous_enabled_;
  DType previous_dtype_;
};

// True (and the half dtype in *dtype) when autocast is on for this thread.
bool autocast_enabled(DType* dtype = nullptr);

// Marks every cached half weight stale (call after each optimizer step).
void advance_weight_version();

// A half copy of an f32 parameter, reused while the weight version is unchanged. Each call returns a fresh
// autograd node (gradients flow back to the f32 master as f32), so one cached copy serves many micro-batches.
class HalfWeightCache {
 public:
  // format: the copy's layout (channels_last for a 4-D conv weight that meets channels-last activations).
  Tensor get(const Tensor& master, DType dtype, MemoryFormat format = MemoryFormat::contiguous);

 private:
  Tensor half_;
  uint64_t version_ = ~uint64_t{0};
  DType dtype_ = DType::f32;
  MemoryFormat format_ = MemoryFormat::contiguous;
  const void* master_data_ = nullptr;
};

}  // namespace liftoff
