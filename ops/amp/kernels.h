// Kernels behind ops/amp: arguments checked by the front. One-element tensors are passed as tensors (their
// raw_data() points at the element); gradient lists are non-empty, contiguous, one dtype, one device.
#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

struct UpdateScaleArgs {
  double growth_factor, backoff_factor;
  int64_t growth_interval;
};

namespace cpu {
void scale_by_forward(const Tensor& x, const Tensor& factor, const Tensor& y);
void unscale_and_check(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf);
void inverse_scale(const Tensor& scale, const Tensor& inv_scale);
void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  const UpdateScaleArgs& args, const Tensor& skipped_steps);
}  // namespace cpu
namespace cuda {
void scale_by_forward(const Tensor& x, const Tensor& factor, const Tensor& y);
void unscale_and_check(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf);
void inverse_scale(const Tensor& scale, const Tensor& inv_scale);
void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  const UpdateScaleArgs& args, const Tensor& skipped_steps);
}  // namespace cuda
}  // namespace liftoff
