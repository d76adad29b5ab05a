// CPU-vs-CUDA parity: run the same function on CPU tensors (the reference) and on CUDA copies, then compare the
// outputs and the gradients of every input that requires grad, with a tolerance declared per op. New CUDA
// allocations are poisoned (NaN bytes) during the run so an unwritten output cannot pass.
#pragma once
#include <gtest/gtest.h>

#include <vector>

#include "tests/common/gradcheck.h"

namespace liftoff::testing {

struct ParityOptions {
  double atol = 1e-5;
  double rtol = 1e-4;
  DType cuda_dtype = DType::f32;  // inputs are cast to this on the device (f16/bf16 for AMP paths)
  bool check_grads = true;
};

::testing::AssertionResult cuda_parity(const TensorFn& fn, const std::vector<Tensor>& cpu_inputs,
                                       const ParityOptions& options = {});

}  // namespace liftoff::testing
