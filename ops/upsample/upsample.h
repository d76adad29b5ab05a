#pragma once
#include <optional>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// Resizes a 4-D [N, C, H, W] input as PyTorch's F.interpolate(input, size, scale_factor, mode, align_corners)
// with recompute_scale_factor = None. Give exactly one of size ({out} or {out_h, out_w}) and scale_factor
// ({s} or {s_h, s_w}, > 0; output = floor(in * s), and the coordinate mapping uses 1 / s as PyTorch does).
// mode "nearest": source = min(floor(dst * scale), in - 1) with PyTorch's float scale (the legacy
// 'nearest', not 'nearest-exact'). mode "bilinear": align_corners = true maps corner pixel centres onto each
// other (scale = (in - 1) / (out - 1)); false (the default) maps pixel areas (src = (dst + 0.5) * scale -
// 0.5, clamped at 0). align_corners with "nearest" is a ValueError, as in PyTorch. Dtypes: f32/f64 on the
// CPU, also f16/bf16 on CUDA (f32 arithmetic). A channels-last CUDA input gives a channels-last output (and
// gradient). Backward: the adjoint of the interpolation (each output's gradient spread over the input pixels
// it read, with the same weights); on CUDA a gather per input pixel (no atomics, deterministic), on the CPU a
// scatter.
Tensor interpolate(const Tensor& input, const std::vector<int64_t>& size = {},
                   const std::vector<double>& scale_factor = {}, const std::string& mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt);

}  // namespace liftoff
