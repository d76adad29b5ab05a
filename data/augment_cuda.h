// The CUDA augmentation kernel: uint8 batch [B, C, H, W] on the device -> model input [B, C, H, W] (NCHW) of
// f32, bf16 or f16, in one kernel: random crop with zero padding, horizontal flip, normalisation by mean/std,
// optional random erasing. Per-sample parameters come from augment_params(seed, epoch, sample index) on the
// device (data/augment_params.h), and normalisation uses the same float formula as normalize_pixel with
// explicitly rounded operations, so f32 results equal the CPU twin (data/augment.h) bit for bit and 16-bit
// results are the f32 value rounded to nearest even. (NHWC output is a later option.)
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "data/augment_launch.h"
#include "data/augment_params.h"
#include "runtime/tensor.h"

namespace liftoff::cuda {

// Launches the kernel on `stream` (the current device must be the data's). Arguments are not checked here.
void launch_augment(const AugmentLaunch& args, cudaStream_t stream);

// Checked convenience on tensors: images_u8 u8 [B, C, H, W] on a CUDA device, indices on the host (copied to
// the device synchronously, so not for the training hot path: the DataLoader stages them with the batch).
// Runs on the device's compute stream; returns [B, C, H, W] of out_dtype on the same device.
Tensor augment_batch_cuda(const Tensor& images_u8, const std::vector<int64_t>& indices, uint64_t seed,
                          int64_t epoch, const AugmentConfig& config, const std::vector<float>& mean,
                          const std::vector<float>& stddev, DType out_dtype = DType::f32,
                          bool augment = true);

}  // namespace liftoff::cuda
