// The cuDNN path of scaled_dot_product_attention (path.h says when it runs): cuDNN's fused flash attention,
// reached through its graph (backend) API as the operation graphs its runtime fusion engine recognises
// (cudnn_sdpa_graph.cpp). The forward saves the output and the row logsumexp ("stats", f32); the backward
// recomputes the weights from them. q, k, v [batch..., L|S, E] map to cuDNN's [b, h, s, d] with their own
// strides when the batch dims collapse to two (vit_tiny's permuted projections do); otherwise, or when a
// batch dim is broadcast, the operand is copied once. Execution plans are built once per (device, dtype,
// shapes, strides, causal, scale, direction) and cached; a shape whose plan does not build is remembered
// and the call returns undefined (the caller falls back to Liftoff's own kernels). LIFTOFF_CUDNN_LOG=1
// prints each plan (engine, workspace) and each failure with cuDNN's reason, once per shape.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/tensor.h"

namespace liftoff {

// Whether this process can run cuDNN's attention: a CUDA build with cuDNN >= 9.16 loaded (older 9.x
// backwards need workarounds for key lengths that are not multiples of 128). False in a build without CUDA.
bool cudnn_sdpa_available();

// Forward and backward calls that ran on cuDNN since the process started (tests and the bench use it to
// tell that the path really ran).
int64_t cudnn_sdpa_executions();
// Why plans failed to build, one line per shape and direction (empty when none did).
std::string cudnn_sdpa_failures();

// out [batch..., L, E] recorded for autograd, or an undefined Tensor when cuDNN cannot take the call (its
// plan did not build, now or earlier; or the shape is met for the first time inside a CUDA graph capture,
// where a plan cannot be built). Call only where path.h's choice is cudnn.
Tensor cudnn_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Shape& batch, double scale,
                       bool is_causal);

}  // namespace liftoff
