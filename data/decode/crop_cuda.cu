#include "data/decode/crop_cuda.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {

struct Norm {
  float mean[3];
  float stddev[3];
};

// One thread per output pixel (all its channels), grid-stride over the batch.
template <class Out, bool kChannelsLast>
__global__ void resized_crop_kernel(const uint8_t* __restrict__ pixels, const CropDesc* __restrict__ descs,
                                    Out* __restrict__ out, int64_t batch, int channels, int height, int width,
                                    Norm norm) {
  const int64_t plane = static_cast<int64_t>(height) * width;
  const int64_t total = batch * plane;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = i / plane;
    const int64_t p = i - b * plane;
    const int y = static_cast<int>(p / width), x = static_cast<int>(p - static_cast<int64_t>(y) * width);
    const CropDesc d = descs[b];
    float value[3];
    crop_pixel(pixels + d.offset, d, y, x, width, channels, norm.mean, norm.stddev, value);
    for (int c = 0; c < channels; ++c) {
      const int64_t at = kChannelsLast ? i * channels + c : (b * channels + c) * plane + p;
      out[at] = convert<Out>(value[c]);
    }
  }
}

}  // namespace

void launch_resized_crop(const CropLaunch& a, cudaStream_t stream) {
  if (a.batch == 0) return;
  Norm norm{};
  for (int64_t c = 0; c < a.channels && c < 3; ++c) {
    norm.mean[c] = a.mean[c];
    norm.stddev[c] = a.stddev[c];
  }
  const unsigned grid = grid_for(a.batch * a.height * a.width);
  const auto run = [&](auto tag) {
    using Out = decltype(tag);
    auto* out = static_cast<Out*>(a.out);
    const int c = static_cast<int>(a.channels), h = static_cast<int>(a.height), w = static_cast<int>(a.width);
    if (a.format == MemoryFormat::channels_last) {
      resized_crop_kernel<Out, true>
          <<<grid, kBlock, 0, stream>>>(a.pixels, a.descs, out, a.batch, c, h, w, norm);
    } else {
      resized_crop_kernel<Out, false>
          <<<grid, kBlock, 0, stream>>>(a.pixels, a.descs, out, a.batch, c, h, w, norm);
    }
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
      throw DTypeError(str_cat("resized crop: output dtype ", dtype_name(a.out_dtype),
                               " is not supported (f32, bf16, f16)"));
  }
  LIFTOFF_LAUNCH_CHECK();
}

Tensor resized_crop_batch_cuda(const Tensor& pixels, const std::vector<CropDesc>& descs, int64_t out_height,
                               int64_t out_width, int64_t out_channels, const std::vector<float>& mean,
                               const std::vector<float>& stddev, DType out_dtype, MemoryFormat format) {
  const char* op = "resized_crop_batch_cuda";
  LIFTOFF_CHECK(pixels.defined() && pixels.dtype() == DType::u8 && pixels.is_cuda() && pixels.is_contiguous(),
                DeviceError, op, ": pixels must be a contiguous u8 CUDA tensor");
  LIFTOFF_CHECK(out_channels == 1 || out_channels == 3, ValueError, op, ": ", out_channels,
                " output channels; 1 or 3 are supported");
  LIFTOFF_CHECK(static_cast<int64_t>(mean.size()) == out_channels &&
                    static_cast<int64_t>(stddev.size()) == out_channels,
                ShapeError, op, ": ", out_channels, " channels but ", mean.size(), " mean and ",
                stddev.size(), " std values");
  for (const CropDesc& d : descs) {
    const int64_t bytes = static_cast<int64_t>(d.height) * d.width * d.channels;
    LIFTOFF_CHECK(d.offset >= 0 && d.height >= 1 && d.width >= 1 && (d.channels == 1 || d.channels == 3) &&
                      d.offset + bytes <= pixels.numel(),
                  ValueError, op, ": a descriptor (offset ", d.offset, ", ", d.height, "x", d.width, "x",
                  d.channels, ") reads outside the ", pixels.numel(), "-byte arena");
  }
  const Device device = pixels.device();
  DeviceGuard guard(device.index);
  const auto batch = static_cast<int64_t>(descs.size());
  Tensor out = Tensor::empty({batch, out_channels, out_height, out_width}, out_dtype, device, format);
  if (batch == 0) return out;
  Tensor d_descs = Tensor::empty({batch * static_cast<int64_t>(sizeof(CropDesc))}, DType::u8, device);
  // Pageable source: staged before the call returns, ordered before the kernel on the same stream.
  LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(d_descs.raw_data(), descs.data(), descs.size() * sizeof(CropDesc),
                                     cudaMemcpyHostToDevice, compute_stream(device.index)));
  CropLaunch a;
  a.pixels = pixels.data<uint8_t>();
  a.descs = static_cast<const CropDesc*>(d_descs.raw_data());
  a.out = out.raw_data();
  a.out_dtype = out_dtype;
  a.format = format;
  a.batch = batch;
  a.channels = out_channels;
  a.height = out_height;
  a.width = out_width;
  for (int64_t c = 0; c < out_channels; ++c) {
    a.mean[c] = mean[static_cast<size_t>(c)];
    a.stddev[c] = stddev[static_cast<size_t>(c)];
  }
  launch_resized_crop(a, compute_stream(device.index));
  return out;
}

}  // namespace liftoff::cuda
