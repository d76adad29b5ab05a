// data/decode/crop.h: torchvision's RandomResizedCrop.get_params logic (hand-computed cases, the fallback,
// Python's half-to-even rounding, ranges over many draws), Resize + CenterCrop for evaluation, and the CPU
// twin of the crop kernel on hand-computed pixels.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <vector>

#include "data/decode/crop.h"
#include "runtime/error.h"

namespace liftoff {
namespace {

ResizedCropConfig fixed_scale(float scale, float ratio_min, float ratio_max) {
  ResizedCropConfig c;
  c.scale_min = c.scale_max = scale;
  c.ratio_min = ratio_min;
  c.ratio_max = ratio_max;
  return c;
}

TEST(DecodeCrop, WholeSquareImageWhenScaleAndRatioAreOne) {
  const ResizedCropConfig c = fixed_scale(1.0f, 1.0f, 1.0f);
  for (int64_t index = 0; index < 20; ++index) {
    const CropWindow w = random_resized_crop_window(7, 0, index, 40, 40, c);
    EXPECT_EQ(w.top, 0);
    EXPECT_EQ(w.left, 0);
    EXPECT_EQ(w.height, 40);
    EXPECT_EQ(w.width, 40);
  }
}

TEST(DecodeCrop, FallbackCutsAWideImageToTheLargestRatio) {
  // 100 wide x 50 high, area 5000 at ratio 1: w = h = round(70.71) = 71 > 50 on every attempt. Fallback:
  // in_ratio 2 > max ratio 1 -> h = 50, w = round(50 * 1) = 50, centred: left = (100 - 50) // 2 = 25.
  const CropWindow w = random_resized_crop_window(1, 2, 3, 50, 100, fixed_scale(1.0f, 1.0f, 1.0f));
  EXPECT_EQ(w.top, 0);
  EXPECT_EQ(w.left, 25);
  EXPECT_EQ(w.height, 50);
  EXPECT_EQ(w.width, 50);
}

TEST(DecodeCrop, FallbackCutsATallImageToTheSmallestRatio) {
  // 50 wide x 100 high, scale 1, ratio [3/4, 4/3]: w = sqrt(5000 r) >= 61 > 50 always. Fallback: in_ratio 0.5
  // < 3/4 -> w = 50, h = round(50 / 0.75) = round(66.67) = 67, top = (100 - 67) // 2 = 16.
  const CropWindow w =
      random_resized_crop_window(9, 0, 0, 100, 50, fixed_scale(1.0f, 3.0f / 4.0f, 4.0f / 3.0f));
  EXPECT_EQ(w.top, 16);
  EXPECT_EQ(w.left, 0);
  EXPECT_EQ(w.height, 67);
  EXPECT_EQ(w.width, 50);
}

TEST(DecodeCrop, SidesRoundHalvesToEvenAsPythonDoes) {
  // 5x5 at scale 1/4: area 6.25, side sqrt = 2.5 -> round() = 2 (half up would give 3). 7x7: 12.25 -> 3.5
  // -> 4.
  for (int64_t index = 0; index < 10; ++index) {
    const CropWindow a = random_resized_crop_window(3, 0, index, 5, 5, fixed_scale(0.25f, 1.0f, 1.0f));
    EXPECT_EQ(a.height, 2);
    EXPECT_EQ(a.width, 2);
    EXPECT_LE(a.top, 3);
    EXPECT_LE(a.left, 3);
    const CropWindow b = random_resized_crop_window(3, 0, index, 7, 7, fixed_scale(0.25f, 1.0f, 1.0f));
    EXPECT_EQ(b.height, 4);
    EXPECT_EQ(b.width, 4);
  }
}

TEST(DecodeCrop, DefaultWindowsStayInsideTheirRanges) {
  const ResizedCropConfig c;  // scale (0.08, 1), ratio (3/4, 4/3)
  const int32_t height = 300, width = 200;
  std::set<int32_t> tops;
  int fallbacks = 0;
  for (int64_t index = 0; index < 2000; ++index) {
    const CropWindow w = random_resized_crop_window(11, 4, index, height, width, c);
    ASSERT_GE(w.top, 0);
    ASSERT_GE(w.left, 0);
    ASSERT_GE(w.height, 1);
    ASSERT_GE(w.width, 1);
    ASSERT_LE(w.top + w.height, height) << "index " << index;
    ASSERT_LE(w.left + w.width, width) << "index " << index;
    tops.insert(w.top);
    if (w.height == height && w.width == width) {
      ++fallbacks;
      continue;
    }
    // Rounded sides: the area and ratio drawn are within their ranges up to the rounding of each side.
    const double area = static_cast<double>(w.height) * w.width / (height * width);
    EXPECT_GE(area, 0.08 * 0.8) << "index " << index;
    EXPECT_LE(area, 1.0) << "index " << index;
    const double ratio = static_cast<double>(w.width) / w.height;
    EXPECT_GE(ratio, 0.75 * 0.9) << "index " << index;
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.1) << "index " << index;
  }
  EXPECT_GT(tops.size(), 100u) << "the top offset should vary";
  EXPECT_LT(fallbacks, 20) << "10 attempts rarely all fail on a 3:2 image";
}

TEST(DecodeCrop, SameSampleSameWindowOtherEpochOtherWindow) {
  const ResizedCropConfig c;
  int differ = 0;
  for (int64_t index = 0; index < 50; ++index) {
    const CropWindow a = random_resized_crop_window(5, 1, index, 480, 640, c);
    const CropWindow b = random_resized_crop_window(5, 1, index, 480, 640, c);
    const CropWindow e = random_resized_crop_window(5, 2, index, 480, 640, c);
    EXPECT_EQ(a.top, b.top);
    EXPECT_EQ(a.left, b.left);
    EXPECT_EQ(a.height, b.height);
    EXPECT_EQ(a.width, b.width);
    differ += (a.top != e.top || a.height != e.height) ? 1 : 0;
  }
  EXPECT_GT(differ, 40);
}

TEST(DecodeCrop, FlipProbability) {
  int flips = 0;
  for (int64_t index = 0; index < 2000; ++index) flips += random_flip(1, 0, index, 0.5f) ? 1 : 0;
  EXPECT_GT(flips, 850);
  EXPECT_LT(flips, 1150);
  for (int64_t index = 0; index < 100; ++index) {
    EXPECT_FALSE(random_flip(1, 0, index, 0.0f));
    EXPECT_TRUE(random_flip(1, 0, index, 1.0f));
  }
}

TEST(DecodeCrop, EvaluationResizesTheShorterSideThenCropsTheCentre) {
  // 300 high x 400 wide, Resize(256) -> 256 x int(256 * 400 / 300) = 256 x 341; CenterCrop(224): top =
  // round(32 / 2) = 16, left = round(117 / 2 = 58.5) = 58 (half to even). Source pixels per output pixel:
  // 300 / 256 down, 400 / 341 across.
  ResizedCropConfig c;
  EXPECT_EQ(eval_resize_side(c), 256);
  const CropDesc d = make_crop_desc(false, 0, 0, 0, 300, 400, 300, 400, c);
  EXPECT_FLOAT_EQ(d.scale_y, 300.0f / 256.0f);
  EXPECT_FLOAT_EQ(d.scale_x, 400.0f / 341.0f);
  EXPECT_FLOAT_EQ(d.origin_y, static_cast<float>(16.0 * 300.0 / 256.0 - 0.5));
  EXPECT_FLOAT_EQ(d.origin_x, static_cast<float>(58.0 * 400.0 / 341.0 - 0.5));
  EXPECT_EQ(d.clamp_y0, 0.0f);
  EXPECT_EQ(d.clamp_y1, 299.0f);
  EXPECT_EQ(d.clamp_x1, 399.0f);
  EXPECT_EQ(d.flip, 0);
}

TEST(DecodeCrop, TrainingDescriptorClampsToTheWindow) {
  const ResizedCropConfig c;
  for (int64_t index = 0; index < 20; ++index) {
    const CropWindow w = random_resized_crop_window(2, 3, index, 200, 300, c);
    const CropDesc d = make_crop_desc(true, 2, 3, index, 200, 300, 200, 300, c);
    EXPECT_EQ(d.clamp_y0, static_cast<float>(w.top));
    EXPECT_EQ(d.clamp_y1, static_cast<float>(w.top + w.height - 1));
    EXPECT_EQ(d.clamp_x0, static_cast<float>(w.left));
    EXPECT_EQ(d.clamp_x1, static_cast<float>(w.left + w.width - 1));
    EXPECT_FLOAT_EQ(d.origin_y, static_cast<float>(w.top) - 0.5f);
    EXPECT_FLOAT_EQ(d.scale_y, static_cast<float>(w.height) / 224.0f);
    EXPECT_EQ(d.flip, random_flip(2, 3, index, 0.5f) ? 1 : 0);
  }
}

TEST(DecodeCrop, ReducedDecodeScalesTheWindow) {
  const ResizedCropConfig c;
  const CropDesc full = make_crop_desc(false, 0, 0, 0, 400, 600, 400, 600, c);
  const CropDesc half = make_crop_desc(false, 0, 0, 0, 400, 600, 200, 300, c);
  EXPECT_FLOAT_EQ(half.scale_y, full.scale_y / 2.0f);
  EXPECT_FLOAT_EQ(half.origin_y + 0.5f, (full.origin_y + 0.5f) / 2.0f);
  EXPECT_EQ(half.clamp_y1, 199.0f);
  EXPECT_EQ(half.height, 200);
}

// An HWC RGB image with R = 10y + 2x, G = R + 1, B = R + 2.
std::vector<uint8_t> ramp(int height, int width) {
  std::vector<uint8_t> hwc(static_cast<size_t>(height * width * 3));
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c)
        hwc[static_cast<size_t>((y * width + x) * 3 + c)] = static_cast<uint8_t>(10 * y + 2 * x + c);
    }
  }
  return hwc;
}

TEST(DecodeCropTwin, SameSizeEvaluationCopiesNormalisedPixels) {
  ResizedCropConfig c;
  c.out_height = c.out_width = 4;
  c.resize_side = 4;
  const std::vector<uint8_t> image = ramp(4, 4);
  const CropDesc d = make_crop_desc(false, 0, 0, 0, 4, 4, 4, 4, c);
  const Tensor out =
      resized_crop_batch(image.data(), {d}, 4, 4, 3, {0.5f, 0.5f, 0.5f}, {0.25f, 0.25f, 0.25f});
  ASSERT_EQ(out.shape(), (Shape{1, 3, 4, 4}));
  const float* v = out.data<float>();
  for (int ch = 0; ch < 3; ++ch) {
    for (int y = 0; y < 4; ++y) {
      for (int x = 0; x < 4; ++x) {
        const float expected = (static_cast<float>(10 * y + 2 * x + ch) / 255.0f - 0.5f) / 0.25f;
        EXPECT_EQ(v[(ch * 4 + y) * 4 + x], expected) << "c " << ch << " y " << y << " x " << x;
      }
    }
  }
}

TEST(DecodeCropTwin, HalfSizeAveragesTwoByTwoBlocks) {
  // Resize(2) of a 4x4 image: sample centres at 0.5 and 2.5, so each output is its 2x2 block's mean.
  ResizedCropConfig c;
  c.out_height = c.out_width = 2;
  c.resize_side = 2;
  const std::vector<uint8_t> image = ramp(4, 4);
  const CropDesc d = make_crop_desc(false, 0, 0, 0, 4, 4, 4, 4, c);
  const Tensor out = resized_crop_batch(image.data(), {d}, 2, 2, 3, {0, 0, 0}, {1, 1, 1});
  const float* v = out.data<float>();
  // R block means: (0 + 2 + 10 + 12) / 4 = 6, then 10, 26, 30.
  EXPECT_EQ(v[0], 6.0f / 255.0f);
  EXPECT_EQ(v[1], 10.0f / 255.0f);
  EXPECT_EQ(v[2], 26.0f / 255.0f);
  EXPECT_EQ(v[3], 30.0f / 255.0f);
  EXPECT_EQ(v[4 + 0], 7.0f / 255.0f);  // G = R + 1
}

TEST(DecodeCropTwin, FlipMirrorsTheOutput) {
  ResizedCropConfig c = fixed_scale(1.0f, 1.0f, 1.0f);
  c.out_height = c.out_width = 4;
  c.flip_prob = 1.0f;
  const std::vector<uint8_t> image = ramp(4, 4);
  const CropDesc d = make_crop_desc(true, 0, 0, 0, 4, 4, 4, 4, c);
  ASSERT_EQ(d.flip, 1);
  const Tensor out = resized_crop_batch(image.data(), {d}, 4, 4, 3, {0, 0, 0}, {1, 1, 1});
  const float* v = out.data<float>();
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 4; ++x) EXPECT_EQ(v[y * 4 + x], static_cast<float>(10 * y + 2 * (3 - x)) / 255.0f);
  }
}

TEST(DecodeCropTwin, OneChannelIsLuma) {
  ResizedCropConfig c;
  c.out_height = c.out_width = 2;
  c.resize_side = 2;
  std::vector<uint8_t> image(2 * 2 * 3);
  for (size_t i = 0; i < image.size(); i += 3) {
    image[i] = 200;
    image[i + 1] = 100;
    image[i + 2] = 50;
  }
  const CropDesc d = make_crop_desc(false, 0, 0, 0, 2, 2, 2, 2, c);
  const Tensor out = resized_crop_batch(image.data(), {d}, 2, 2, 1, {0.0f}, {1.0f});
  ASSERT_EQ(out.shape(), (Shape{1, 1, 2, 2}));
  EXPECT_NEAR(out.data<float>()[3], (0.299 * 200 + 0.587 * 100 + 0.114 * 50) / 255.0, 1e-6);
}

TEST(DecodeCropTwin, ConfigAndChannelErrorsNameTheField) {
  ResizedCropConfig c;
  c.scale_min = 0.0f;
  EXPECT_THROW(validate_crop_config(c), ValueError);
  c = ResizedCropConfig();
  c.resize_side = 100;  // smaller than the 224 output
  try {
    validate_crop_config(c);
    FAIL() << "a resize side below the output size must be refused";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("resize side 100"), std::string::npos) << e.what();
  }
  EXPECT_THROW(resized_crop_batch(nullptr, {}, 2, 2, 2, {0, 0}, {1, 1}), ValueError);
  EXPECT_THROW(resized_crop_batch(nullptr, {}, 2, 2, 3, {0}, {1}), ShapeError);
}

}  // namespace
}  // namespace liftoff
