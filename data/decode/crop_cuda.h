// The fused ImageNet-style crop kernel: one launch per batch reads the decoded images (variable sizes, in
// one device arena) through per-image descriptors (data/decode/crop.h) and writes the model input: resized
// crop (bilinear), horizontal flip, normalisation, cast to f32/bf16/f16, channels-last or NCHW. Per pixel it
// runs crop_pixel, the CPU twin's function, with explicitly rounded float operations, so f32 output equals
// resized_crop_batch bit for bit and 16-bit output is that value rounded to nearest even.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "data/decode/crop.h"
#include "runtime/tensor.h"

namespace liftoff::cuda {

struct CropLaunch {
  const uint8_t* pixels = nullptr;  // device arena; image b at pixels + descs[b].offset
  const CropDesc* descs = nullptr;  // device [batch]
  void* out = nullptr;              // device [B, C, H, W] of out_dtype in `format`
  DType out_dtype = DType::f32;     // f32, bf16, f16
  MemoryFormat format = MemoryFormat::channels_last;
  int64_t batch = 0, channels = 3, height = 0, width = 0;
  float mean[3] = {}, stddev[3] = {};
};

// Launches on `stream`; arguments are not checked here.
void launch_resized_crop(const CropLaunch& args, cudaStream_t stream);

// Checked convenience for tests: `pixels` a u8 CUDA tensor holding the arena, descriptors from the host
// (copied synchronously). Returns [B, C, out_height, out_width] of out_dtype on the device, in `format`.
Tensor resized_crop_batch_cuda(const Tensor& pixels, const std::vector<CropDesc>& descs, int64_t out_height,
                               int64_t out_width, int64_t out_channels, const std::vector<float>& mean,
                               const std::vector<float>& stddev, DType out_dtype = DType::f32,
                               MemoryFormat format = MemoryFormat::channels_last);

}  // namespace liftoff::cuda
