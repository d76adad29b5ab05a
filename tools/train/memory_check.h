// Host memory of a training step on the CPU, estimated before the first step: a run that cannot fit ends with
// the numbers and the flags that help, instead of being killed by the kernel's OOM killer (or a bad_alloc
// under `ulimit -v`) in the middle of its first step.
#pragma once
#include <cstdint>
#include <string>

#include "models/nn/module.h"
#include "tools/train/data_setup.h"
#include "tools/train/flags.h"

namespace liftoff::tools {

struct StepMemoryEstimate {
  int64_t activations_per_image = 0;  // measured: heap growth of a forward at a small batch, per image
  int64_t batch = 0;                  // images per micro-batch: --batch, or the whole set when smaller
  int64_t activations = 0;            // per image x batch x 1.5 (what backward adds, measured 1.0-1.2)
  int64_t loader = 0;                 // batches in flight: uint8 images + the f32 input, per --prefetch slot
  int64_t training_state = 0;         // gradients + optimizer state (the weights exist already)
  int64_t total() const { return activations + loader + training_state; }
};

// Runs one forward at batch min(2, --batch) in eval mode (no running statistics or generator touched; the
// model's state is unchanged) on zeros of the input's shape, measuring the heap. Returns all zero when the C
// library cannot report its heap.
StepMemoryEstimate estimate_cpu_step_memory(Module& model, const Flags& f, const TrainData& data);

// On the CPU: throws OutOfMemoryError when the estimate exceeds the memory this process may still take
// (platform::host_memory_budget), naming both and the flags that help. No-op on CUDA devices (their memory
// is checked by the caching allocator) or when nothing can be measured.
void check_host_memory(Module& model, const Flags& f, Device device, const TrainData& data);

}  // namespace liftoff::tools
