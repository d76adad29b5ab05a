// The memory layout an op computes in. CUDA kernels of the layout-preserving ops (conv2d, conv_transpose2d,
// batch_norm2d[_relu], group_norm, relu, the unary activations, add, cast, cat, pad, flip, max_pool2d,
// avg_pool2d, global_avg_pool2d, interpolate, adaptive_avg_pool2d) handle channels-last (NHWC) tensors
// directly, so a channels-last CUDA input keeps its layout through them; every CPU kernel is NCHW (the CPU
// stays the simple reference), so CPU inputs are made contiguous. An op given inputs of mixed layouts
// converts them to the first input's. Ops that need row-major memory convert (reshape/flatten, dropout,
// whose mask is defined by the NCHW element index, scale): in a conv net that is the flatten before the
// classifier, or a dropout between convolutions.
#pragma once
#include "runtime/autocast.h"
#include "runtime/tensor.h"

namespace liftoff {

inline MemoryFormat op_memory_format(const Tensor& x) {
  return x.is_cuda() ? x.memory_format() : MemoryFormat::contiguous;
}

// The layout a convolution computes in, chosen by the runtime rather than the model: a 4-D CUDA input in
// f32, f16 or bf16 runs channels-last (cuDNN's NHWC engines, our NHWC batch-norm and depthwise kernels; the
// conversion of an NCHW input happens once, at the first convolution, and the layout-preserving ops above
// carry it on). Measured on the H200 (docs/perf.md, session 11), f32 without autocast, against keeping NCHW:
// MobileNetV2 2.1x, ResNet-18 1.5x, the strided CNN 1.5x images/s. f64 (no cuDNN NHWC paths) and the CPU run
// NCHW.
// LIFTOFF_CONV_LAYOUT (runtime/config) overrides the rule for A/B measurements.
MemoryFormat conv_memory_format(const Tensor& x);
// LIFTOFF_CONV_LAYOUT=input: convolutions keep their input's layout (an NCHW model stays NCHW).
bool conv_layout_follows_input();

}  // namespace liftoff
