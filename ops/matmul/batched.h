// Raw (not recorded by autograd) building blocks shared by matmul/bmm, linear and attention: a broadcasting
// batched GEMM that reads transposed and strided operands in place where their strides allow, and the sum of
// a gradient over the dims its input was broadcast along.
#pragma once
#include "runtime/tensor.h"

namespace liftoff::matmul_detail {

// Batch dims (all but the last two) of a [..., R, C] shape.
Shape batch_shape(const Shape& shape);
// NumPy/PyTorch broadcast of two shapes (aligned at the right); false when a pair of sizes differs and
// neither is 1.
bool broadcast_shapes(const Shape& a, const Shape& b, Shape* out);

// A view of t with its last two dims swapped, sharing storage; not recorded by autograd.
Tensor transpose_last2(const Tensor& t);

// alpha * a @ b for a [..., M, K] and b [..., K, N] of one floating dtype and device, with their batch dims
// broadcast against each other and against `batch` (pass {} for none): returns a fresh contiguous
// [batch..., M, N]. Operands whose strides fit a strided-batched GEMM (row-major or transposed matrices, one
// stride per batch, 0 for a broadcast batch) are read in place; others are copied first. Callers check
// shapes. Adds 2*M*N*K*batch to a live FlopCounter (runtime/profile/flops.h).
Tensor batched_matmul(const Tensor& a, const Tensor& b, double alpha = 1.0, const Shape& batch = {});

}  // namespace liftoff::matmul_detail

namespace liftoff::matmul_detail {
// Autocast's rule for matmul/linear/attention inputs: an f32 CUDA tensor is cast (differentiably) to the
// half dtype when autocast is on for this thread; anything else is returned unchanged.
Tensor autocast_input(const Tensor& t);
// "[2, 3] f32 on cpu": a tensor described for error messages.
std::string describe(const Tensor& t);
// DTypeError/DeviceError naming `op` and both tensors when a and b differ in dtype or device.
void check_same_kind(const char* op, const char* name_a, const Tensor& a, const char* name_b,
                     const Tensor& b);
}  // namespace liftoff::matmul_detail
