#include <cmath>

#include "data/augment.h"
#include "data/augment_cuda.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {

struct Norm {
  float mean[kAugmentMaxChannels];
  float stddev[kAugmentMaxChannels];
};

// normalize_pixel with every operation explicitly rounded: immune to --use_fast_math and FMA contraction,
// so it equals the host's IEEE float result.
__device__ __forceinline__ float normalize_rn(int value, float mean, float stddev) {
  return __fdiv_rn(__fsub_rn(__fdiv_rn(static_cast<float>(value), 255.0f), mean), stddev);
}

// grid.x: one (sample, channel) plane per block row; grid.y: tiles of the plane. Thread 0 derives the
// sample's parameters, all threads build the channel's 256-entry table, then each thread writes pixels.
template <class Out>
__global__ void augment_kernel(const uint8_t* __restrict__ images, const int64_t* __restrict__ indices,
                               Out* __restrict__ out, int channels, int height, int width, uint64_t seed,
                               uint64_t epoch, AugmentConfig config, bool augment, Norm norm) {
  __shared__ float table[256];
  // AugmentParams has member initialisers, which __shared__ variables may not have: keep its fields as ints.
  __shared__ int32_t params[8];
  const int64_t plane_index = blockIdx.x;  // b * channels + c
  const int c = static_cast<int>(plane_index % channels);
  const int64_t b = plane_index / channels;
  if (threadIdx.x == 0) {
    const AugmentParams q =
        augment ? augment_params(seed, epoch, static_cast<uint64_t>(indices[b]), height, width, config)
                : AugmentParams{};
    params[0] = q.dx;
    params[1] = q.dy;
    params[2] = q.flip ? 1 : 0;
    params[3] = q.erase ? 1 : 0;
    params[4] = q.erase_y;
    params[5] = q.erase_x;
    params[6] = q.erase_h;
    params[7] = q.erase_w;
  }
  for (int v = threadIdx.x; v < 256; v += blockDim.x)
    table[v] = normalize_rn(v, norm.mean[c], norm.stddev[c]);
  __syncthreads();

  const int dx = params[0], dy = params[1];
  const bool flip = params[2] != 0, erase = params[3] != 0;
  const int ey = params[4], ex = params[5], eh = params[6], ew = params[7];
  const int pad = augment ? config.pad : 0;
  const int64_t plane = static_cast<int64_t>(height) * width;
  const uint8_t* src = images + plane_index * plane;
  Out* dst = out + plane_index * plane;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; i < plane; i += stride) {
    const int y = static_cast<int>(i / width);
    const int x = static_cast<int>(i - static_cast<int64_t>(y) * width);
    float value;
    if (erase && y >= ey && y < ey + eh && x >= ex && x < ex + ew) {
      value = 0.0f;
    } else {
      const int sy = y + dy - pad;
      const int sx = (flip ? width - 1 - x : x) + dx - pad;
      const bool inside = sy >= 0 && sy < height && sx >= 0 && sx < width;
      value = table[inside ? src[static_cast<int64_t>(sy) * width + sx] : 0];
    }
    dst[i] = convert<Out>(value);
  }
}

}  // namespace

void launch_augment(const AugmentLaunch& a, cudaStream_t stream) {
  if (a.batch == 0) return;
  Norm norm{};
  for (int64_t c = 0; c < a.channels && c < kAugmentMaxChannels; ++c) {
    norm.mean[c] = a.mean[c];
    norm.stddev[c] = a.stddev[c];
  }
  const int64_t plane = a.height * a.width;
  // About 8 pixels per thread; the y dimension is limited to 65535 tiles.
  const int64_t tiles =
      std::min<int64_t>(65535, std::max<int64_t>(1, (plane + kBlock * 8 - 1) / (kBlock * 8)));
  const dim3 grid(static_cast<unsigned>(a.batch * a.channels), static_cast<unsigned>(tiles));
  const auto run = [&](auto tag) {
    using Out = decltype(tag);
    augment_kernel<Out><<<grid, kBlock, 0, stream>>>(
        a.images, a.indices, static_cast<Out*>(a.out), static_cast<int>(a.channels),
        static_cast<int>(a.height), static_cast<int>(a.width), a.seed, static_cast<uint64_t>(a.epoch),
        a.config, a.augment, norm);
  };
  switch (a.out_dtype) {
    case DType::f32:
      run(float{});
      break;
    case DType::bf16:
      run(__nv_bfloat16{});
      break;
    case DType::f16:
      run(__half{});
      break;
    default:
      throw DTypeError(str_cat("augmentation: output dtype ", dtype_name(a.out_dtype),
                               " is not supported (f32, bf16, f16)"));
  }
  LIFTOFF_LAUNCH_CHECK();
}

void launch_augment(const AugmentLaunch& a, const Stream& stream) {
  DeviceGuard guard(stream.device().index);
  launch_augment(a, static_cast<cudaStream_t>(stream.native()));
}

Tensor augment_batch_cuda(const Tensor& images_u8, const std::vector<int64_t>& indices, uint64_t seed,
                          int64_t epoch, const AugmentConfig& config, const std::vector<float>& mean,
                          const std::vector<float>& stddev, DType out_dtype, bool augment) {
  const char* op = "augment_batch_cuda";
  LIFTOFF_CHECK(images_u8.defined() && images_u8.dtype() == DType::u8 && images_u8.dim() == 4, ShapeError, op,
                ": expected u8 images [B, C, H, W]");
  LIFTOFF_CHECK(images_u8.is_cuda(), DeviceError, op, ": images must be on a CUDA device, got ",
                images_u8.device().str(), "; use augment_batch (data/augment.h) on the CPU");
  LIFTOFF_CHECK(out_dtype == DType::f32 || out_dtype == DType::bf16 || out_dtype == DType::f16, DTypeError,
                op, ": output dtype ", dtype_name(out_dtype), " is not supported (f32, bf16, f16)");
  const int64_t batch = images_u8.size(0), channels = images_u8.size(1);
  const int64_t height = images_u8.size(2), width = images_u8.size(3);
  LIFTOFF_CHECK(channels >= 1 && channels <= kAugmentMaxChannels, ShapeError, op, ": ", channels,
                " channels; at most ", kAugmentMaxChannels, " are supported");
  LIFTOFF_CHECK(height >= 1 && width >= 1 && height * width <= (int64_t{1} << 30), ShapeError, op,
                ": image size ", height, "x", width, " is out of range");
  LIFTOFF_CHECK(static_cast<int64_t>(indices.size()) == batch, ShapeError, op, ": ", indices.size(),
                " sample indices for a batch of ", batch);
  LIFTOFF_CHECK(
      static_cast<int64_t>(mean.size()) == channels && static_cast<int64_t>(stddev.size()) == channels,
      ShapeError, op, ": images have ", channels, " channels but mean has ", mean.size(), " and std has ",
      stddev.size(), " values");
  for (size_t c = 0; c < stddev.size(); ++c) {
    LIFTOFF_CHECK(std::isfinite(mean[c]) && std::isfinite(stddev[c]) && stddev[c] > 0.0f, ValueError, op,
                  ": channel ", c, " has mean ", mean[c], " and std ", stddev[c],
                  "; std must be finite and > 0");
  }
  for (int64_t index : indices) LIFTOFF_CHECK(index >= 0, ValueError, op, ": negative sample index ", index);
  if (augment) validate_augment_config(config);

  const Device device = images_u8.device();
  DeviceGuard guard(device.index);
  const Tensor src = images_u8.contiguous();
  const Tensor device_indices = Tensor::from_vector(indices, {batch}, device);
  Tensor out = Tensor::empty(images_u8.shape(), out_dtype, device);
  AugmentLaunch a;
  a.images = src.data<uint8_t>();
  a.indices = device_indices.data<int64_t>();
  a.out = out.raw_data();
  a.out_dtype = out_dtype;
  a.batch = batch;
  a.channels = channels;
  a.height = height;
  a.width = width;
  a.seed = seed;
  a.epoch = epoch;
  a.config = config;
  a.augment = augment;
  for (int64_t c = 0; c < channels; ++c) {
    a.mean[c] = mean[static_cast<size_t>(c)];
    a.stddev[c] = stddev[static_cast<size_t>(c)];
  }
  launch_augment(a, compute_stream(device.index));
  return out;
}

}  // namespace liftoff::cuda
