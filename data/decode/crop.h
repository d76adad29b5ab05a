// ImageNet-style crops of decoded images of any size, shared by the CUDA kernel (data/decode/crop_cuda.h)
// and its CPU twin (resized_crop_batch below), so both compute the same pixels from the same parameters.
//
// Training: torchvision's RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip(p); evaluation:
// Resize(resize_side) (shorter side) + CenterCrop(size). Then bilinear resampling (half-pixel centres, as
// PyTorch's interpolate(align_corners=False) without antialiasing: torchvision's tensor path with
// antialias=False; PIL's default antialiases when shrinking), normalisation (v / 255 - mean) / std, a cast to
// the output dtype. Every random draw comes from Philox(seed, epoch, sample index), so results do not depend
// on batch composition or worker timing:
//   key = seed XOR kCropKeyTag; counter = (block, index low 32 bits, index high 32 bits, epoch low 32 bits)
//   block 0: v0 -> flip; block 1 + a (attempt a): v0 -> scale, v1 -> log aspect ratio, v2 -> top, v3 -> left
// Uniforms are the top 24 bits / 2^24; integer draws in [0, n) are v % n.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "data/exact_math.h"
#include "runtime/macros.h"
#include "runtime/tensor.h"

namespace liftoff {

constexpr uint64_t kCropKeyTag = 0x5252435230303031ull;  // "RRCR0001"

struct ResizedCropConfig {
  int64_t out_height = 224, out_width = 224;
  float scale_min = 0.08f, scale_max = 1.0f;               // crop area / image area
  float ratio_min = 3.0f / 4.0f, ratio_max = 4.0f / 3.0f;  // crop width / height, drawn log-uniformly
  int32_t attempts = 10;
  float flip_prob = 0.5f;
  // Evaluation: the shorter side is resized to this, then the centre out_height x out_width is taken.
  // 0: round(max(out) * 256 / 224), ImageNet's 256 -> 224.
  int64_t resize_side = 0;
};

// Throws ValueError naming the field (sizes in [1, 16384], 0 < scale_min <= scale_max <= 1 (larger scales
// are torchvision-legal but unused here), 0 < ratio_min <= ratio_max <= 100, attempts in [1, 1000], flip
// probability in [0, 1], resize_side 0 or >= the output sides).
void validate_crop_config(const ResizedCropConfig& config);
int64_t eval_resize_side(const ResizedCropConfig& config);

// A crop window in source pixels (integers, as torchvision's get_params returns).
struct CropWindow {
  int32_t top = 0, left = 0, height = 0, width = 0;
};

// torchvision.transforms.RandomResizedCrop.get_params for an image of height x width, its random numbers
// from the stream above: `attempts` tries of (scale, log-ratio) -> w = round(sqrt(area * r)), h =
// round(sqrt(area / r)) (Python's round: halves to even), accepted when 0 < w <= width and 0 < h <= height,
// top/left uniform; then the centre fallback (whole image, clamped to the ratio range).
CropWindow random_resized_crop_window(uint64_t seed, int64_t epoch, int64_t index, int32_t height,
                                      int32_t width, const ResizedCropConfig& config);
bool random_flip(uint64_t seed, int64_t epoch, int64_t index, float flip_prob);

// Where output pixel (oy, ox) samples its source (in the decoded image's pixel coordinates):
//   sy = clamp((oy + 0.5) * scale_y + origin_y, clamp_y0, clamp_y1)   (ox: flipped first when flip)
// then bilinear between floor(sy) and min(floor(sy) + 1, clamp_y1). `offset` is the byte offset of the
// decoded image (interleaved HWC, `channels` 1 or 3) in the batch's pixel arena.
struct CropDesc {
  int64_t offset = 0;
  int32_t height = 0, width = 0, channels = 3;
  int32_t flip = 0;
  float origin_y = 0.0f, origin_x = 0.0f, scale_y = 1.0f, scale_x = 1.0f;
  float clamp_y0 = 0.0f, clamp_y1 = 0.0f, clamp_x0 = 0.0f, clamp_x1 = 0.0f;
};

// The descriptor of one sample of a full_height x full_width image (the file's size) decoded at
// decoded_height x decoded_width (smaller when decoded with DCT scaling; the window scales with it).
// train: random resized crop + flip from (seed, epoch, index); otherwise resize + centre crop.
CropDesc make_crop_desc(bool train, uint64_t seed, int64_t epoch, int64_t index, int32_t full_height,
                        int32_t full_width, int32_t decoded_height, int32_t decoded_width,
                        const ResizedCropConfig& config);
// The source region the descriptor reads, in full-size pixels (for choosing a DCT scale before decoding):
// its height and width.
void crop_source_extent(bool train, uint64_t seed, int64_t epoch, int64_t index, int32_t full_height,
                        int32_t full_width, const ResizedCropConfig& config, double* height, double* width);

namespace crop_detail {
// Explicitly rounded (data/exact_math.h): the CPU twin must match the kernel bit for bit.
using exact::add;
using exact::div;
using exact::mul;
using exact::sub;
LIFTOFF_HD float clampf(float v, float lo, float hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}
}  // namespace crop_detail

// The normalised output of one output pixel: `out` gets out_channels values (1: luma 0.299 R + 0.587 G +
// 0.114 B of a 3-channel source, or the gray value; 3: RGB, a gray source replicated). mean/std per output
// channel. Same arithmetic on the host and the device.
LIFTOFF_HD void crop_pixel(const uint8_t* image, const CropDesc& d, int oy, int ox, int out_width,
                           int out_channels, const float* mean, const float* stddev, float* out) {
  namespace c = crop_detail;
  const int x = d.flip ? out_width - 1 - ox : ox;
  const float sy =
      c::clampf(c::add(c::mul(static_cast<float>(oy) + 0.5f, d.scale_y), d.origin_y), d.clamp_y0, d.clamp_y1);
  const float sx =
      c::clampf(c::add(c::mul(static_cast<float>(x) + 0.5f, d.scale_x), d.origin_x), d.clamp_x0, d.clamp_x1);
  const int y0 = static_cast<int>(sy), x0 = static_cast<int>(sx);
  const int y1 = y0 + 1 <= static_cast<int>(d.clamp_y1) ? y0 + 1 : y0;
  const int x1 = x0 + 1 <= static_cast<int>(d.clamp_x1) ? x0 + 1 : x0;
  const float wy = c::sub(sy, static_cast<float>(y0)), wx = c::sub(sx, static_cast<float>(x0));
  const int ch = d.channels;
  const uint8_t* r0 = image + (static_cast<int64_t>(y0) * d.width) * ch;
  const uint8_t* r1 = image + (static_cast<int64_t>(y1) * d.width) * ch;
  float v[3];
  for (int k = 0; k < ch; ++k) {
    const float top = c::add(c::mul(static_cast<float>(r0[x0 * ch + k]), c::sub(1.0f, wx)),
                             c::mul(static_cast<float>(r0[x1 * ch + k]), wx));
    const float bottom = c::add(c::mul(static_cast<float>(r1[x0 * ch + k]), c::sub(1.0f, wx)),
                                c::mul(static_cast<float>(r1[x1 * ch + k]), wx));
    v[k] = c::add(c::mul(top, c::sub(1.0f, wy)), c::mul(bottom, wy));
  }
  if (ch == 1) v[1] = v[2] = v[0];
  if (out_channels == 1 && ch == 3) {
    v[0] = c::add(c::add(c::mul(v[0], 0.299f), c::mul(v[1], 0.587f)), c::mul(v[2], 0.114f));
  }
  for (int k = 0; k < out_channels; ++k) out[k] = c::div(c::sub(c::div(v[k], 255.0f), mean[k]), stddev[k]);
}

// The CPU twin of the CUDA kernel: sample b reads the image at pixels + descs[b].offset. Returns f32
// [B, C, out_height, out_width] (contiguous NCHW) on the CPU. C: out_channels (1 or 3), mean/std C values.
Tensor resized_crop_batch(const uint8_t* pixels, const std::vector<CropDesc>& descs, int64_t out_height,
                          int64_t out_width, int64_t out_channels, const std::vector<float>& mean,
                          const std::vector<float>& stddev);

}  // namespace liftoff
