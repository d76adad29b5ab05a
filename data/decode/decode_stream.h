// The streams the GPU decode path runs on (decode lanes, nvJPEG's hybrid stream), at the device's highest
// stream priority: their kernels (Huffman/IDCT of the hybrid backend, the crop kernel) are small and the
// training step waits for them. At the default priority they queued behind a saturating model's kernels:
// ResNet-50 from a JPEG folder saw 215 ms per decoded batch against 37 ms alone, and the training stream
// waited for its input 6% of the time (docs/perf.md, session 9).
#pragma once
#include <cuda_runtime.h>

#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"

namespace liftoff::cuda {

inline cudaStream_t create_decode_stream(int device) {
  DeviceGuard guard(device);
  int least = 0, greatest = 0;
  LIFTOFF_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  cudaStream_t stream = nullptr;
  LIFTOFF_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest));
  return stream;
}

}  // namespace liftoff::cuda
