// Autocast: the mixed-precision policy of --amp. Inside an AutocastGuard, Conv2d and Linear run in the half
// dtype (f16/bf16, f32 accumulation in cuDNN/cuBLAS) on half copies of their f32 master weights; batch-norm
// statistics, the loss and the optimizer stay f32. The half copies are made once per optimizer step (the
// trainer calls advance_weight_version() after each step), not once per micro-batch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

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
// For an op whose floating operands must share one dtype (a convolution's input, weight and bias): true
// (and the half dtype in *dtype) when autocast is on, the first operand is on CUDA, some operand is f32 and
// none is f64, as PyTorch's autocast decides (a bf16 activation meeting an f32 weight included). Undefined
// operands (an absent bias) are ignored.
bool autocast_applies(const std::vector<Tensor>& operands, DType* dtype);

// Marks every cached half weight stale (call after each optimizer step).
void advance_weight_version();

// A half copy of an f32 parameter, reused while the weight version is unchanged. Each call returns a fresh
// autograd node (gradients flow back to the f32 master as f32), so one cached copy serves many micro-batches.
//
// On CUDA the first get() that finds its copy stale refreshes, in one launch on the current stream, every
// registered cache that is stale too: made before (at an earlier version) by this thread, on the same
// device, in the same half dtype, whose master is still the tensor and storage it last cast (each in its own
// layout; others refresh themselves at their own get()). Inside a graph capture the graph keeps the memory
// of every copy and master it casts alive (retain_for_captured_graph). So call advance_weight_version() after
// any change to the weights, not only the optimizer's. Outside a graph capture a stale copy nobody else holds
// is rewritten in place; in a capture, copies are allocated afresh (from the graph's pool), as the first copy
// of a cache always is. LIFTOFF_WEIGHT_CAST=each casts one weight per kernel at its own get(), as the CPU
// always does. Caches register themselves (construction, copy, move) and leave at destruction; a copy shares
// the cached half tensor until either refreshes. The cache never owns its master: it keeps a weak reference.
class HalfWeightCache {
 public:
  HalfWeightCache();
  ~HalfWeightCache();
  HalfWeightCache(const HalfWeightCache& other);
  HalfWeightCache& operator=(const HalfWeightCache& other);
  HalfWeightCache(HalfWeightCache&& other);
  HalfWeightCache& operator=(HalfWeightCache&& other);

  // format: the copy's layout (channels_last for a 4-D conv weight that meets channels-last activations).
  Tensor get(const Tensor& master, DType dtype, MemoryFormat format = MemoryFormat::contiguous);

 private:
  struct Refresh;  // the refresh logic, in autocast.cpp
  void assign_state(const HalfWeightCache& other);
  void clear_state();

  Tensor half_;
  uint64_t version_ = ~uint64_t{0};
  DType dtype_ = DType::f32;
  MemoryFormat format_ = MemoryFormat::contiguous;
  const void* master_data_ = nullptr;
  std::weak_ptr<TensorImpl> master_;  // what a batched refresh started by another cache reads
  std::thread::id refresher_;         // the thread whose stream wrote half_ last
};

// How many HalfWeightCache objects exist (the registry's size; for tests).
size_t half_weight_cache_count();

}  // namespace liftoff
