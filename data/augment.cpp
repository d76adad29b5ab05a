#include "data/augment.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "runtime/parallel.h"

namespace liftoff {

namespace {

void check_inputs(const char* op, const Tensor& images_u8, const std::vector<float>& mean,
                  const std::vector<float>& stddev) {
  LIFTOFF_CHECK(images_u8.defined(), ValueError, op, ": the image batch is an undefined tensor");
  LIFTOFF_CHECK(images_u8.dtype() == DType::u8, DTypeError, op, ": expected u8 images, got ",
                dtype_name(images_u8.dtype()));
  LIFTOFF_CHECK(images_u8.dim() == 4, ShapeError, op, ": expected images [B, C, H, W], got ",
                shape_str(images_u8.shape()));
  LIFTOFF_CHECK(images_u8.device().is_cpu(), DeviceError, op, ": images must be on the CPU, got ",
                images_u8.device().str(), "; the CUDA augmentation kernel takes device batches");
  const int64_t channels = images_u8.size(1);
  LIFTOFF_CHECK(
      static_cast<int64_t>(mean.size()) == channels && static_cast<int64_t>(stddev.size()) == channels,
      ShapeError, op, ": images have ", channels, " channels but mean has ", mean.size(), " and std has ",
      stddev.size(), " values");
  for (size_t c = 0; c < stddev.size(); ++c) {
    LIFTOFF_CHECK(std::isfinite(mean[c]) && std::isfinite(stddev[c]) && stddev[c] > 0.0f, ValueError, op,
                  ": channel ", c, " has mean ", mean[c], " and std ", stddev[c],
                  "; std must be finite and > 0");
  }
}

// One lookup table per channel: normalize_pixel for each of the 256 uint8 values.
std::vector<std::array<float, 256>> make_tables(const std::vector<float>& mean,
                                                const std::vector<float>& stddev) {
  std::vector<std::array<float, 256>> tables(mean.size());
  for (size_t c = 0; c < mean.size(); ++c) {
    for (int v = 0; v < 256; ++v) tables[c][v] = normalize_pixel(static_cast<uint8_t>(v), mean[c], stddev[c]);
  }
  return tables;
}

// Samples per parallel chunk: enough pixels that threading pays off.
int64_t grain_for(int64_t sample_pixels) {
  return std::max<int64_t>(1, 32768 / std::max<int64_t>(1, sample_pixels));
}

void augment_sample(const uint8_t* src, float* dst, int64_t channels, int64_t height, int64_t width,
                    int64_t pad, const AugmentParams& p, const std::vector<std::array<float, 256>>& tables) {
  for (int64_t c = 0; c < channels; ++c) {
    const uint8_t* plane = src + c * height * width;
    float* out = dst + c * height * width;
    const std::array<float, 256>& table = tables[static_cast<size_t>(c)];
    for (int64_t y = 0; y < height; ++y) {
      const int64_t sy = y + p.dy - pad;
      float* row = out + y * width;
      if (sy < 0 || sy >= height) {
        std::fill(row, row + width, table[0]);
        continue;
      }
      const uint8_t* src_row = plane + sy * width;
      for (int64_t x = 0; x < width; ++x) {
        const int64_t sx = (p.flip ? width - 1 - x : x) + p.dx - pad;
        row[x] = (sx >= 0 && sx < width) ? table[src_row[sx]] : table[0];
      }
    }
    if (p.erase) {
      for (int64_t y = p.erase_y; y < p.erase_y + p.erase_h; ++y) {
        std::fill(out + y * width + p.erase_x, out + y * width + p.erase_x + p.erase_w, 0.0f);
      }
    }
  }
}

}  // namespace

void validate_augment_config(const AugmentConfig& c) {
  LIFTOFF_CHECK(c.pad >= 0 && c.pad <= 4096, ValueError, "augmentation: pad ", c.pad,
                " is outside [0, 4096]");
  LIFTOFF_CHECK(c.flip_prob >= 0.0f && c.flip_prob <= 1.0f, ValueError, "augmentation: flip probability ",
                c.flip_prob, " is outside [0, 1]");
  LIFTOFF_CHECK(c.erase_prob >= 0.0f && c.erase_prob <= 1.0f, ValueError, "augmentation: erase probability ",
                c.erase_prob, " is outside [0, 1]");
  LIFTOFF_CHECK(c.erase_area_min > 0.0f && c.erase_area_min <= c.erase_area_max && c.erase_area_max <= 1.0f,
                ValueError, "augmentation: erase area range [", c.erase_area_min, ", ", c.erase_area_max,
                "] must satisfy 0 < min <= max <= 1");
  LIFTOFF_CHECK(
      c.erase_ratio_min > 0.0f && c.erase_ratio_min <= c.erase_ratio_max && c.erase_ratio_max <= 1000.0f,
      ValueError, "augmentation: erase aspect ratio range [", c.erase_ratio_min, ", ", c.erase_ratio_max,
      "] must satisfy 0 < min <= max <= 1000");
  LIFTOFF_CHECK(c.erase_attempts >= 1 && c.erase_attempts <= 1000, ValueError,
                "augmentation: erase attempts ", c.erase_attempts, " is outside [1, 1000]");
}

void augment_batch_into(const Tensor& images_u8, const std::vector<int64_t>& indices, uint64_t seed,
                        int64_t epoch, const AugmentConfig& config, const std::vector<float>& mean,
                        const std::vector<float>& stddev, const Tensor& out) {
  check_inputs("augment_batch", images_u8, mean, stddev);
  validate_augment_config(config);
  const int64_t batch = images_u8.size(0), channels = images_u8.size(1);
  const int64_t height = images_u8.size(2), width = images_u8.size(3);
  LIFTOFF_CHECK(height <= 1 << 30 && width <= 1 << 30, ShapeError, "augment_batch: image size ", height, "x",
                width, " is too large");
  LIFTOFF_CHECK(static_cast<int64_t>(indices.size()) == batch, ShapeError, "augment_batch: ", indices.size(),
                " sample indices for a batch of ", batch);
  LIFTOFF_CHECK(out.defined() && out.dtype() == DType::f32 && out.device().is_cpu() && out.is_contiguous() &&
                    out.shape() == images_u8.shape(),
                ShapeError, "augment_batch: the output must be a contiguous f32 CPU tensor of shape ",
                shape_str(images_u8.shape()));
  for (int64_t index : indices) {
    LIFTOFF_CHECK(index >= 0, ValueError, "augment_batch: negative sample index ", index);
  }
  const Tensor src = images_u8.contiguous();
  const uint8_t* in = src.data<uint8_t>();
  float* dst = out.data<float>();
  const auto tables = make_tables(mean, stddev);
  const int64_t sample = channels * height * width;
  parallel_for(0, batch, grain_for(sample), [&](int64_t lo, int64_t hi) {
    for (int64_t b = lo; b < hi; ++b) {
      const AugmentParams p = augment_params(
          seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(indices[static_cast<size_t>(b)]),
          static_cast<int32_t>(height), static_cast<int32_t>(width), config);
      augment_sample(in + b * sample, dst + b * sample, channels, height, width, config.pad, p, tables);
    }
  });
}

Tensor augment_batch(const Tensor& images_u8, const std::vector<int64_t>& indices, uint64_t seed,
                     int64_t epoch, const AugmentConfig& config, const std::vector<float>& mean,
                     const std::vector<float>& stddev) {
  check_inputs("augment_batch", images_u8, mean, stddev);
  Tensor out = Tensor::empty(images_u8.shape(), DType::f32, Device::cpu());
  augment_batch_into(images_u8, indices, seed, epoch, config, mean, stddev, out);
  return out;
}

Tensor normalize_batch(const Tensor& images_u8, const std::vector<float>& mean,
                       const std::vector<float>& stddev) {
  check_inputs("normalize_batch", images_u8, mean, stddev);
  const Tensor src = images_u8.contiguous();
  Tensor out = Tensor::empty(src.shape(), DType::f32, Device::cpu());
  const int64_t channels = src.size(1);
  const int64_t plane = src.size(2) * src.size(3);
  const uint8_t* in = src.data<uint8_t>();
  float* dst = out.data<float>();
  const auto tables = make_tables(mean, stddev);
  // Over (sample, channel) planes: each plane uses one table.
  parallel_for(0, src.size(0) * channels, grain_for(plane), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const std::array<float, 256>& table = tables[static_cast<size_t>(i % channels)];
      for (int64_t k = i * plane; k < (i + 1) * plane; ++k) dst[k] = table[in[k]];
    }
  });
  return out;
}

}  // namespace liftoff
