// Kernels behind the unary family (ops/unary/unary.h): inputs are checked by the front, outputs allocated;
// all tensors dense in one layout (contiguous, or channels-last on CUDA), so the kernels run over the storage
// linearly. Backward computes grad_x = grad_y * f'(saved), saved being the input or the output (functors.h
// says which per op; for Saved::none the front passes grad_y, which the derivative ignores).
#pragma once
#include "ops/unary/functors.h"
#include "runtime/tensor.h"

namespace liftoff {
namespace cpu {
void unary_forward(unary::UnaryOp op, const unary::UnaryParams& params, const Tensor& x, const Tensor& y);
void unary_backward(unary::UnaryOp op, const unary::UnaryParams& params, const Tensor& saved,
                    const Tensor& grad_y, const Tensor& grad_x);
}  // namespace cpu
namespace cuda {
void unary_forward(unary::UnaryOp op, const unary::UnaryParams& params, const Tensor& x, const Tensor& y);
void unary_backward(unary::UnaryOp op, const unary::UnaryParams& params, const Tensor& saved,
                    const Tensor& grad_y, const Tensor& grad_x);
}  // namespace cuda
}  // namespace liftoff
