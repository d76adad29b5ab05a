// Per-sample augmentation parameters, shared by the CPU augmentation and the (later) CUDA kernel.
// Everything here is LIFTOFF_HD, throws nothing and uses only arithmetic that rounds identically on the host
// and the device (explicitly rounded mul/add/div/sqrt, own exp/log), so both backends derive bit-identical
// parameters from the same (seed, epoch, sample index).
//
// Philox layout (Philox4x32-10, runtime/philox.h):
//   key     = seed XOR kAugmentKeyTag (keeps these streams apart from Generator streams with the same seed)
//   counter = (c0 = block, c1 = sample_index low 32 bits, c2 = sample_index high 32 bits, c3 = epoch low 32
//   bits) block 0: v0 -> dx, v1 -> dy, v2 -> flip, v3 -> erase or not block 1 + a (a < erase_attempts): erase
//   attempt a: v0 -> area, v1 -> aspect ratio, v2 -> top, v3 -> left
// Integer draws are v % range; probabilities compare the 24-bit uniform philox_uniform(v) < p.
#pragma once
#include <cmath>
#include <cstdint>

#include "data/exact_math.h"
#include "runtime/macros.h"
#include "runtime/philox.h"

namespace liftoff {

constexpr uint64_t kAugmentKeyTag = 0x4155474D454E5431ull;  // "AUGMENT1"

// torchvision order: RandomCrop(size, padding=pad) -> RandomHorizontalFlip(flip_prob) -> ToTensor ->
// Normalize
// -> RandomErasing(erase_prob, scale=[erase_area_min, erase_area_max], ratio=[erase_ratio_min,
// erase_ratio_max], value=0). Erased pixels are 0 in the normalised output (all channels).
struct AugmentConfig {
  int32_t pad = 2;          // zero padding (uint8 0) of the random crop; 0 disables the crop
  float flip_prob = 0.5f;   // horizontal flip probability
  float erase_prob = 0.0f;  // random erasing probability; 0 disables erasing
  float erase_area_min = 0.02f;
  float erase_area_max = 0.33f;
  float erase_ratio_min = 0.3f;  // erase height / width, drawn log-uniformly
  float erase_ratio_max = 3.3f;
  int32_t erase_attempts = 10;  // torchvision's retry count; no erase when no attempt fits
};

// Output pixel (y, x) reads input (y + dy - pad, xs + dx - pad) with xs = flip ? W-1-x : x; outside is uint8
// 0. Then pixels in rows [erase_y, erase_y + erase_h) and columns [erase_x, erase_x + erase_w) become 0.
struct AugmentParams {
  int32_t dx = 0;  // in [0, 2*pad]; dx == pad is no shift
  int32_t dy = 0;
  bool flip = false;
  bool erase = false;
  int32_t erase_y = 0;
  int32_t erase_x = 0;
  int32_t erase_h = 0;
  int32_t erase_w = 0;
};

namespace augment_detail {

using exact::add;
using exact::div;
using exact::mul;
using exact::sqrt_rn;

constexpr double kLn2 = 0.69314718055994530942;

// Natural log for x > 0: x = m * 2^k with m in [0.707, 1.414], then 2*atanh((m-1)/(m+1)) as a series.
LIFTOFF_HD double log_pos(double x) {
  int k = 0;
  for (int i = 0; i < 2100 && x > 1.4142135623730951; ++i, ++k) x = mul(x, 0.5);
  for (int i = 0; i < 2100 && x < 0.7071067811865476; ++i, --k) x = mul(x, 2.0);
  const double z = div(add(x, -1.0), add(x, 1.0));
  const double z2 = mul(z, z);
  double term = z;
  double sum = 0.0;
  for (int n = 1; n <= 23; n += 2) {
    sum = add(sum, div(term, static_cast<double>(n)));
    term = mul(term, z2);
  }
  return add(mul(2.0, sum), mul(static_cast<double>(k), kLn2));
}

// exp(x) for moderate |x|: x = k*ln2 + r with |r| <= ln2/2, Taylor series for exp(r), then scale by 2^k.
LIFTOFF_HD double exp_small(double x) {
  const double kd = mul(x, 1.0 / kLn2);
  const int k = static_cast<int>(kd >= 0.0 ? add(kd, 0.5) : add(kd, -0.5));
  const double r = add(x, -mul(static_cast<double>(k), kLn2));
  double term = 1.0;
  double sum = 1.0;
  for (int n = 1; n <= 16; ++n) {
    term = div(mul(term, r), static_cast<double>(n));
    sum = add(sum, term);
  }
  for (int i = 0; i < k && i < 1100; ++i) sum = mul(sum, 2.0);
  for (int i = 0; i < -k && i < 1100; ++i) sum = mul(sum, 0.5);
  return sum;
}

// Uniform in [0, 1) from the top 24 bits, exact in double.
LIFTOFF_HD double uniform(uint32_t bits) {
  return static_cast<double>(bits >> 8) * (1.0 / 16777216.0);
}

LIFTOFF_HD Philox4 block(uint64_t seed, uint64_t epoch, uint64_t sample_index, uint32_t block_index) {
  const uint64_t key = seed ^ kAugmentKeyTag;
  return philox4x32(block_index, static_cast<uint32_t>(sample_index),
                    static_cast<uint32_t>(sample_index >> 32), static_cast<uint32_t>(epoch),
                    static_cast<uint32_t>(key), static_cast<uint32_t>(key >> 32));
}

}  // namespace augment_detail

// The parameters for one sample of an image of height x width. The config must be valid
// (validate_augment_config in data/augment.h); this function never fails.
LIFTOFF_HD AugmentParams augment_params(uint64_t seed, uint64_t epoch, uint64_t sample_index, int32_t height,
                                        int32_t width, const AugmentConfig& config) {
  namespace d = augment_detail;
  AugmentParams p;
  const Philox4 b0 = d::block(seed, epoch, sample_index, 0);
  const uint32_t range = static_cast<uint32_t>(2 * (config.pad > 0 ? config.pad : 0) + 1);
  p.dx = static_cast<int32_t>(b0.v[0] % range);
  p.dy = static_cast<int32_t>(b0.v[1] % range);
  p.flip = d::uniform(b0.v[2]) < static_cast<double>(config.flip_prob);
  if (!(d::uniform(b0.v[3]) < static_cast<double>(config.erase_prob))) return p;

  const double image_area = static_cast<double>(height) * static_cast<double>(width);
  const double log_rmin = d::log_pos(static_cast<double>(config.erase_ratio_min));
  const double log_rmax = d::log_pos(static_cast<double>(config.erase_ratio_max));
  const double amin = static_cast<double>(config.erase_area_min);
  const double amax = static_cast<double>(config.erase_area_max);
  for (int32_t attempt = 0; attempt < config.erase_attempts; ++attempt) {
    const Philox4 r = d::block(seed, epoch, sample_index, 1u + static_cast<uint32_t>(attempt));
    const double area = d::mul(image_area, d::add(amin, d::mul(d::add(amax, -amin), d::uniform(r.v[0]))));
    const double ratio =
        d::exp_small(d::add(log_rmin, d::mul(d::add(log_rmax, -log_rmin), d::uniform(r.v[1]))));
    // Rounded to nearest (halves up); torchvision rounds halves to even, a difference of no consequence.
    const int32_t h = static_cast<int32_t>(d::add(d::sqrt_rn(d::mul(area, ratio)), 0.5));
    const int32_t w = static_cast<int32_t>(d::add(d::sqrt_rn(d::div(area, ratio)), 0.5));
    if (h < 1 || w < 1 || h >= height || w >= width) continue;
    p.erase = true;
    p.erase_h = h;
    p.erase_w = w;
    p.erase_y = static_cast<int32_t>(r.v[2] % static_cast<uint32_t>(height - h + 1));
    p.erase_x = static_cast<int32_t>(r.v[3] % static_cast<uint32_t>(width - w + 1));
    return p;
  }
  return p;
}

// The normalised value of a uint8 pixel: (p / 255 - mean) / std in float, exactly as written (division and
// subtraction only, so host and device agree bit for bit).
LIFTOFF_HD float normalize_pixel(uint8_t value, float mean, float std_dev) {
  return (static_cast<float>(value) / 255.0f - mean) / std_dev;
}

}  // namespace liftoff
