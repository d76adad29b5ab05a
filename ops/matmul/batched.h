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
// [batch..., M, N]. Operands are read in place where their strides allow (row-major or transposed matrices;
// batch dims with any strides, 0 for a broadcast batch, such as the heads of a permuted [N, L, H, D] view);
// others are copied first. Callers check shapes. Adds 2*M*N*K*batch to a live FlopCounter
// (runtime/profile/flops.h).
Tensor batched_matmul(const Tensor& a, const Tensor& b, double alpha = 1.0, const Shape& batch = {});
// The same product written into `out` [batch..., M, N] (a and b broadcast to its batch), which may be any
// view: a permuted one (attention's output in its query's memory order) is written in place.
void batched_matmul_into(const Tensor& a, const Tensor& b, const Tensor& out, double alpha = 1.0);
// How many operands were copied before a GEMM so far (their strides fit none), all threads (tests).
int64_t operand_copies();
// A fresh (uninitialised) tensor of `shape` laid out in like's memory order: its dims but the last ordered
// by like's strides, the last innermost, where like has `shape` in all but its last dim (else contiguous).
// Attention's output and gradients in the order of the projections they come from, so that joining the
// heads again ([N, H, L, D] -> [N, L, H * D]) is a view, as PyTorch's fused attention does.
Tensor empty_in_order_of(const Shape& shape, const Tensor& like, DType dtype, Device device);

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
