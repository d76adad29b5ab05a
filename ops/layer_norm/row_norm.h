// The part of the layer_norm and group_norm fronts they share: run the row kernels (kernels.h) and record
// the backward. Internal to ops/layer_norm and ops/group_norm.
#pragma once
#include "ops/layer_norm/kernels.h"
#include "runtime/tensor.h"

namespace liftoff {

// input: the caller's tensor (autograd edges), x: its contiguous copy; weight, bias: the caller's (any
// shape of s.affine_size() values) or undefined, same dtype and device as x (checked by the caller).
// Returns y of x's shape in `format` (a channels-last request converts the contiguous result).
Tensor row_norm(const char* op, const Tensor& input, const Tensor& x, const Tensor& weight,
                const Tensor& bias, const RowNormShape& s, MemoryFormat format);

// Checks weight/bias dtype and device against x (shapes are the caller's to check).
void check_affine(const char* op, const Tensor& x, const Tensor& t, const char* what);

}  // namespace liftoff
