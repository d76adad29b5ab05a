// The arguments of the CUDA augmentation kernel (data/augment_cuda.h), and its launch on a Stream, without
// CUDA headers: the DataLoader issues it with no #if. A build without CUDA links data/augment_no_cuda.cpp,
// whose launch throws DeviceError (a CUDA target is refused before, so it is never reached).
#pragma once
#include <cstdint>

#include "data/augment_params.h"
#include "runtime/dtype.h"
#include "runtime/stream.h"

namespace liftoff::cuda {

constexpr int64_t kAugmentMaxChannels = 8;

struct AugmentLaunch {
  const uint8_t* images = nullptr;   // device u8 [B, C, H, W], contiguous
  const int64_t* indices = nullptr;  // device i64 [B]: data set index of each row
  void* out = nullptr;               // device [B, C, H, W] of out_dtype, contiguous
  DType out_dtype = DType::f32;      // f32, bf16 or f16
  int64_t batch = 0, channels = 0, height = 0, width = 0;
  uint64_t seed = 0;
  int64_t epoch = 0;
  AugmentConfig config;  // validated by the caller
  bool augment = true;   // false: normalise only (evaluation)
  float mean[kAugmentMaxChannels] = {};
  float stddev[kAugmentMaxChannels] = {};
};

// Launches the kernel on `stream` (a stream of the data's CUDA device; that device is made current for the
// launch). Arguments are not checked here.
void launch_augment(const AugmentLaunch& args, const Stream& stream);

}  // namespace liftoff::cuda
