// CPU image augmentation: uint8 batch [B, C, H, W] -> f32 model input [B, C, H, W]. The CUDA kernel (later)
// implements the same function from data/augment_params.h, so both backends give the same pixels.
#pragma once
#include <cstdint>
#include <vector>

#include "data/augment_params.h"
#include "runtime/tensor.h"

namespace liftoff {

// Throws ValueError naming the field when a value is out of range (pad in [0, 4096], probabilities in [0, 1],
// 0 < area_min <= area_max <= 1, 0 < ratio_min <= ratio_max <= 1000, attempts in [1, 1000]).
void validate_augment_config(const AugmentConfig& config);

// Training path. Sample b of the batch is dataset sample indices[b]; its crop, flip and erase come only from
// augment_params(seed, epoch, indices[b], H, W, config), so the result does not depend on which other samples
// share the batch. Steps per pixel: read the cropped/flipped uint8 value (0 outside the image), normalise
// with normalize_pixel(value, mean[c], stddev[c]), then set erased pixels to 0. images_u8: u8 [B, C, H, W] on
// the CPU; mean/stddev: C values each. Returns f32 [B, C, H, W] on the CPU.
Tensor augment_batch(const Tensor& images_u8, const std::vector<int64_t>& indices, uint64_t seed,
                     int64_t epoch, const AugmentConfig& config, const std::vector<float>& mean,
                     const std::vector<float>& stddev);
// Same, writing into out (f32 [B, C, H, W], contiguous, CPU), e.g. a reused host buffer.
void augment_batch_into(const Tensor& images_u8, const std::vector<int64_t>& indices, uint64_t seed,
                        int64_t epoch, const AugmentConfig& config, const std::vector<float>& mean,
                        const std::vector<float>& stddev, const Tensor& out);

// Evaluation path: normalise only (normalize_pixel per pixel). Returns f32 [B, C, H, W] on the CPU.
Tensor normalize_batch(const Tensor& images_u8, const std::vector<float>& mean,
                       const std::vector<float>& stddev);

}  // namespace liftoff
