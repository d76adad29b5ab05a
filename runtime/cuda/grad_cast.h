// Batched conversions of half gradients into their f32 leaves' .grad (autocast's master weights): the
// reverse of weight_cast.h. The backward hands each master its gradient in the half copy's dtype and layout
// (bf16/f16; KRSC for a channels-last conv weight); one launch at the end of the backward casts (and, for a
// channels-last gradient of a contiguous master, transposes) up to 96 of them, or adds them into an existing
// .grad, instead of one small kernel per weight (26 a step on ResNet-18, 56 on MobileNetV2). The table rides
// in the kernel parameters: no host-to-device copy, capturable. Values are bit-identical to Tensor::copy_
// followed by accumulate_into (a half-to-f32 cast is exact; the addition is the same f32 addition).
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace liftoff::cuda {

// True when cast_leaf_grads can write dst from src: src f16/bf16 on a CUDA device, dst f32 of the same shape
// on the same device, both dense in the same layout (contiguous, or both channels-last), or src channels-last
// and dst contiguous (a 4-D conv weight); fewer than 2^31 elements.
bool leaf_grad_cast_supported(const Tensor& src, const Tensor& dst);

// For every i: dsts[i] = f32(srcs[i]), or dsts[i] += f32(srcs[i]) where accumulate[i], in dsts[i]'s layout
// (each pair leaf_grad_cast_supported, all on one device), on the calling thread's compute stream.
void cast_leaf_grads(const std::vector<Tensor>& srcs, const std::vector<Tensor>& dsts,
                     const std::vector<bool>& accumulate);

}  // namespace liftoff::cuda
