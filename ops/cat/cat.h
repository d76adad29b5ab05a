#pragma once
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// torch.cat(tensors, dim): joins one or more tensors along an existing dim (negative counts from the end).
// All shapes match except along dim; all on one device. Any dtype on both devices; mixed dtypes promote as
// PyTorch (the widest float, f16 + bf16 -> f32; integers to the widest integer; integer + float -> the
// float), through the differentiable cast(). Inputs may have any strides. 1-D empty tensors ([0]) are
// skipped, as PyTorch's legacy rule. The result is contiguous, or channels-last when the first input is a
// channels-last CUDA tensor. On CUDA one kernel launch copies up to 16 inputs. Backward: each input's
// gradient is the slice of gy along dim (a view, no copy).
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
// torch.stack(tensors, dim): tensors of one shape joined along a new dim in [-(n+1), n]. Same dtypes, devices
// and backward as cat (a select of gy per input).
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);

}  // namespace liftoff
