#include "data/decode/crop.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"
#include "runtime/parallel.h"
#include "runtime/philox.h"

namespace liftoff {

namespace {

Philox4 crop_block(uint64_t seed, int64_t epoch, int64_t index, uint32_t block) {
  const uint64_t key = seed ^ kCropKeyTag;
  const auto i = static_cast<uint64_t>(index);
  return philox4x32(block, static_cast<uint32_t>(i), static_cast<uint32_t>(i >> 32),
                    static_cast<uint32_t>(static_cast<uint64_t>(epoch)), static_cast<uint32_t>(key),
                    static_cast<uint32_t>(key >> 32));
}

double uniform24(uint32_t bits) {
  return static_cast<double>(bits >> 8) * (1.0 / 16777216.0);
}

// Python's round() of a float: halves to even (nearbyint in the default rounding mode).
int64_t round_half_even(double v) {
  return static_cast<int64_t>(std::nearbyint(v));
}

}  // namespace

void validate_crop_config(const ResizedCropConfig& c) {
  LIFTOFF_CHECK(c.out_height >= 1 && c.out_height <= 16384 && c.out_width >= 1 && c.out_width <= 16384,
                ValueError, "crop: output size ", c.out_height, "x", c.out_width, " must be in [1, 16384]");
  LIFTOFF_CHECK(c.scale_min > 0.0f && c.scale_min <= c.scale_max && c.scale_max <= 1.0f, ValueError,
                "crop: scale range [", c.scale_min, ", ", c.scale_max, "] must satisfy 0 < min <= max <= 1");
  LIFTOFF_CHECK(c.ratio_min > 0.0f && c.ratio_min <= c.ratio_max && c.ratio_max <= 100.0f, ValueError,
                "crop: aspect ratio range [", c.ratio_min, ", ", c.ratio_max,
                "] must satisfy 0 < min <= max <= 100");
  LIFTOFF_CHECK(c.attempts >= 1 && c.attempts <= 1000, ValueError, "crop: attempts ", c.attempts,
                " is outside [1, 1000]");
  LIFTOFF_CHECK(c.flip_prob >= 0.0f && c.flip_prob <= 1.0f, ValueError, "crop: flip probability ",
                c.flip_prob, " is outside [0, 1]");
  LIFTOFF_CHECK(
      c.resize_side == 0 || (c.resize_side >= std::max(c.out_height, c.out_width) && c.resize_side <= 65536),
      ValueError, "crop: evaluation resize side ", c.resize_side, " must be 0 or in [",
      std::max(c.out_height, c.out_width), ", 65536] (at least the output size)");
}

int64_t eval_resize_side(const ResizedCropConfig& c) {
  if (c.resize_side > 0) return c.resize_side;
  return round_half_even(static_cast<double>(std::max(c.out_height, c.out_width)) * 256.0 / 224.0);
}

CropWindow random_resized_crop_window(uint64_t seed, int64_t epoch, int64_t index, int32_t height,
                                      int32_t width, const ResizedCropConfig& config) {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_rmin = std::log(static_cast<double>(config.ratio_min));
  const double log_rmax = std::log(static_cast<double>(config.ratio_max));
  const double smin = config.scale_min, smax = config.scale_max;
  for (int32_t attempt = 0; attempt < config.attempts; ++attempt) {
    const Philox4 r = crop_block(seed, epoch, index, 1u + static_cast<uint32_t>(attempt));
    const double target_area = area * (smin + (smax - smin) * uniform24(r.v[0]));
    const double aspect = std::exp(log_rmin + (log_rmax - log_rmin) * uniform24(r.v[1]));
    const int64_t w = round_half_even(std::sqrt(target_area * aspect));
    const int64_t h = round_half_even(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      CropWindow c;
      c.height = static_cast<int32_t>(h);
      c.width = static_cast<int32_t>(w);
      c.top = static_cast<int32_t>(r.v[2] % static_cast<uint32_t>(height - h + 1));
      c.left = static_cast<int32_t>(r.v[3] % static_cast<uint32_t>(width - w + 1));
      return c;
    }
  }
  // torchvision's fallback: the whole image, cut to the nearest allowed aspect ratio, centred.
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  int64_t w = width, h = height;
  if (in_ratio < static_cast<double>(config.ratio_min)) {
    h = round_half_even(static_cast<double>(w) / static_cast<double>(config.ratio_min));
  } else if (in_ratio > static_cast<double>(config.ratio_max)) {
    w = round_half_even(static_cast<double>(h) * static_cast<double>(config.ratio_max));
  }
  h = std::clamp<int64_t>(h, 1, height);
  w = std::clamp<int64_t>(w, 1, width);
  CropWindow c;
  c.height = static_cast<int32_t>(h);
  c.width = static_cast<int32_t>(w);
  c.top = static_cast<int32_t>((height - h) / 2);
  c.left = static_cast<int32_t>((width - w) / 2);
  return c;
}

bool random_flip(uint64_t seed, int64_t epoch, int64_t index, float flip_prob) {
  return uniform24(crop_block(seed, epoch, index, 0).v[0]) < static_cast<double>(flip_prob);
}

namespace {

// The evaluation window in full-size pixels (fractional): torchvision's Resize(side) gives the shorter side
// `side` and the longer int(side * long / short); CenterCrop then starts at int(round((resized - out) / 2)).
void eval_window(int32_t height, int32_t width, const ResizedCropConfig& config, double* top, double* left,
                 double* scale_y, double* scale_x) {
  const int64_t side = eval_resize_side(config);
  int64_t rh = side, rw = side;
  if (height <= width) {
    rw = static_cast<int64_t>(static_cast<double>(side) * width / height);
  } else {
    rh = static_cast<int64_t>(static_cast<double>(side) * height / width);
  }
  const int64_t crop_top = round_half_even(static_cast<double>(rh - config.out_height) / 2.0);
  const int64_t crop_left = round_half_even(static_cast<double>(rw - config.out_width) / 2.0);
  *scale_y = static_cast<double>(height) / static_cast<double>(rh);
  *scale_x = static_cast<double>(width) / static_cast<double>(rw);
  *top = static_cast<double>(crop_top) * *scale_y;
  *left = static_cast<double>(crop_left) * *scale_x;
}

}  // namespace

void crop_source_extent(bool train, uint64_t seed, int64_t epoch, int64_t index, int32_t full_height,
                        int32_t full_width, const ResizedCropConfig& config, double* height, double* width) {
  if (train) {
    const CropWindow w = random_resized_crop_window(seed, epoch, index, full_height, full_width, config);
    *height = w.height;
    *width = w.width;
    return;
  }
  double top = 0, left = 0, sy = 1, sx = 1;
  eval_window(full_height, full_width, config, &top, &left, &sy, &sx);
  *height = static_cast<double>(config.out_height) * sy;
  *width = static_cast<double>(config.out_width) * sx;
}

CropDesc make_crop_desc(bool train, uint64_t seed, int64_t epoch, int64_t index, int32_t full_height,
                        int32_t full_width, int32_t decoded_height, int32_t decoded_width,
                        const ResizedCropConfig& config) {
  // Window in full-size pixels: origin (top, left), source pixels per output pixel, clamp range.
  double top = 0, left = 0, sy = 1, sx = 1, lo_y = 0, lo_x = 0, hi_y = 0, hi_x = 0;
  CropDesc d;
  if (train) {
    const CropWindow w = random_resized_crop_window(seed, epoch, index, full_height, full_width, config);
    top = w.top;
    left = w.left;
    sy = static_cast<double>(w.height) / static_cast<double>(config.out_height);
    sx = static_cast<double>(w.width) / static_cast<double>(config.out_width);
    // resized_crop crops first: samples clamp to the window's edges, not the image's.
    lo_y = w.top;
    lo_x = w.left;
    hi_y = w.top + w.height;
    hi_x = w.left + w.width;
    d.flip = random_flip(seed, epoch, index, config.flip_prob) ? 1 : 0;
  } else {
    eval_window(full_height, full_width, config, &top, &left, &sy, &sx);
    hi_y = full_height;
    hi_x = full_width;
  }
  // To decoded pixels: a reduced decode scales every coordinate by decoded / full.
  const double fy = static_cast<double>(decoded_height) / static_cast<double>(full_height);
  const double fx = static_cast<double>(decoded_width) / static_cast<double>(full_width);
  d.height = decoded_height;
  d.width = decoded_width;
  d.scale_y = static_cast<float>(sy * fy);
  d.scale_x = static_cast<float>(sx * fx);
  d.origin_y = static_cast<float>(top * fy - 0.5);
  d.origin_x = static_cast<float>(left * fx - 0.5);
  d.clamp_y0 = static_cast<float>(std::floor(lo_y * fy));
  d.clamp_x0 = static_cast<float>(std::floor(lo_x * fx));
  d.clamp_y1 = static_cast<float>(std::clamp(std::ceil(hi_y * fy) - 1.0, 0.0, decoded_height - 1.0));
  d.clamp_x1 = static_cast<float>(std::clamp(std::ceil(hi_x * fx) - 1.0, 0.0, decoded_width - 1.0));
  d.clamp_y0 = std::min(d.clamp_y0, d.clamp_y1);
  d.clamp_x0 = std::min(d.clamp_x0, d.clamp_x1);
  return d;
}

Tensor resized_crop_batch(const uint8_t* pixels, const std::vector<CropDesc>& descs, int64_t out_height,
                          int64_t out_width, int64_t out_channels, const std::vector<float>& mean,
                          const std::vector<float>& stddev) {
  LIFTOFF_CHECK(out_channels == 1 || out_channels == 3, ValueError, "resized_crop_batch: ", out_channels,
                " output channels; 1 or 3 are supported");
  LIFTOFF_CHECK(static_cast<int64_t>(mean.size()) == out_channels &&
                    static_cast<int64_t>(stddev.size()) == out_channels,
                ShapeError, "resized_crop_batch: ", out_channels, " channels but ", mean.size(), " mean and ",
                stddev.size(), " std values");
  const auto batch = static_cast<int64_t>(descs.size());
  Tensor out = Tensor::empty({batch, out_channels, out_height, out_width}, DType::f32, Device::cpu());
  float* dst = out.data<float>();
  const int64_t plane = out_height * out_width;
  parallel_for(0, batch, 1, [&](int64_t lo, int64_t hi) {
    float value[3];
    for (int64_t b = lo; b < hi; ++b) {
      const CropDesc& d = descs[static_cast<size_t>(b)];
      for (int64_t y = 0; y < out_height; ++y) {
        for (int64_t x = 0; x < out_width; ++x) {
          crop_pixel(pixels + d.offset, d, static_cast<int>(y), static_cast<int>(x),
                     static_cast<int>(out_width), static_cast<int>(out_channels), mean.data(), stddev.data(),
                     value);
          for (int64_t c = 0; c < out_channels; ++c)
            dst[(b * out_channels + c) * plane + y * out_width + x] = value[c];
        }
      }
    }
  });
  return out;
}

}  // namespace liftoff
