#include "data/augment.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "runtime/parallel.h"

namespace liftoff {
namespace {

AugmentConfig plain_config(int32_t pad, float flip_prob, float erase_prob = 0.0f) {
  AugmentConfig c;
  c.pad = pad;
  c.flip_prob = flip_prob;
  c.erase_prob = erase_prob;
  return c;
}

// 1 x 1 x 3 x 3 image with pixels 10 * (1..9).
Tensor three_by_three() {
  return Tensor::from_vector<uint8_t>({10, 20, 30, 40, 50, 60, 70, 80, 90}, {1, 1, 3, 3});
}

std::vector<float> scaled(const std::vector<int>& pixels) {
  std::vector<float> out;
  for (int p : pixels) out.push_back(static_cast<float>(p) / 255.0f);
  return out;
}

// First sample index whose parameters satisfy pred.
template <class Pred>
int64_t find_index(uint64_t seed, int64_t epoch, int32_t h, int32_t w, const AugmentConfig& c, Pred pred) {
  for (int64_t i = 0; i < 100000; ++i) {
    if (pred(augment_params(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(i), h, w, c))) return i;
  }
  ADD_FAILURE() << "no sample index with the wanted parameters";
  return 0;
}

TEST(Augment, NormalizeGivesHandComputedValues) {
  const Tensor x = Tensor::from_vector<uint8_t>({0, 255, 51, 0, 255, 102}, {1, 2, 1, 3});
  const Tensor y = normalize_batch(x, {0.5f, 0.0f}, {0.5f, 1.0f});
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.shape(), (Shape{1, 2, 1, 3}));
  // Channel 0: (p/255 - 0.5)/0.5 -> -1, 1, -0.6; channel 1: p/255.
  const auto v = y.to_vector<float>();
  EXPECT_EQ(v[0], -1.0f);
  EXPECT_EQ(v[1], 1.0f);
  EXPECT_NEAR(v[2], -0.6f, 1e-6);
  EXPECT_EQ(v[3], 0.0f);
  EXPECT_EQ(v[4], 1.0f);
  EXPECT_FLOAT_EQ(v[5], 0.4f);
}

TEST(Augment, FlipReversesRows) {
  const std::vector<float> got =
      augment_batch(three_by_three(), {0}, 1, 0, plain_config(0, 1.0f), {0.0f}, {1.0f}).to_vector<float>();
  EXPECT_EQ(got, scaled({30, 20, 10, 60, 50, 40, 90, 80, 70}));
  const std::vector<float> none =
      augment_batch(three_by_three(), {0}, 1, 0, plain_config(0, 0.0f), {0.0f}, {1.0f}).to_vector<float>();
  EXPECT_EQ(none, scaled({10, 20, 30, 40, 50, 60, 70, 80, 90}));
}

TEST(Augment, CropShiftsAndPadsWithNormalisedZero) {
  const AugmentConfig c = plain_config(1, 0.0f);
  // dy = 2, dx = 0: output (y, x) = input (y + 1, x - 1).
  const int64_t i = find_index(5, 0, 3, 3, c, [](const AugmentParams& p) { return p.dy == 2 && p.dx == 0; });
  const std::vector<float> got =
      augment_batch(three_by_three(), {i}, 5, 0, c, {0.0f}, {1.0f}).to_vector<float>();
  EXPECT_EQ(got, scaled({0, 40, 50, 0, 70, 80, 0, 0, 0}));
  // Padding is uint8 0 normalised: (0 - 0.25) / 0.5 = -0.5.
  const std::vector<float> shifted =
      augment_batch(three_by_three(), {i}, 5, 0, c, {0.25f}, {0.5f}).to_vector<float>();
  EXPECT_EQ(shifted[0], -0.5f);
  EXPECT_EQ(shifted[8], -0.5f);
  EXPECT_EQ(shifted[1], normalize_pixel(40, 0.25f, 0.5f));
}

TEST(Augment, CropThenFlip) {
  const AugmentConfig c = plain_config(1, 0.5f);
  // dy = 1 (no vertical shift), dx = 2, flipped: output (y, x) = input (y, (2 - x) + 1).
  const int64_t i =
      find_index(9, 3, 3, 3, c, [](const AugmentParams& p) { return p.dy == 1 && p.dx == 2 && p.flip; });
  const std::vector<float> got =
      augment_batch(three_by_three(), {i}, 9, 3, c, {0.0f}, {1.0f}).to_vector<float>();
  EXPECT_EQ(got, scaled({0, 30, 20, 0, 60, 50, 0, 90, 80}));
}

TEST(Augment, EraseZeroesTheRectangleAfterNormalising) {
  AugmentConfig c = plain_config(0, 0.0f, 1.0f);
  const Tensor image = Tensor::full({1, 2, 10, 10}, 200.0, DType::u8);
  const int64_t i = find_index(2, 0, 10, 10, c, [](const AugmentParams& p) { return p.erase; });
  const AugmentParams p = augment_params(2, 0, static_cast<uint64_t>(i), 10, 10, c);
  const std::vector<float> got =
      augment_batch(image, {i}, 2, 0, c, {0.1f, 0.2f}, {0.3f, 0.4f}).to_vector<float>();
  for (int ch = 0; ch < 2; ++ch) {
    const float kept = normalize_pixel(200, ch == 0 ? 0.1f : 0.2f, ch == 0 ? 0.3f : 0.4f);
    for (int y = 0; y < 10; ++y) {
      for (int x = 0; x < 10; ++x) {
        const bool inside =
            y >= p.erase_y && y < p.erase_y + p.erase_h && x >= p.erase_x && x < p.erase_x + p.erase_w;
        EXPECT_EQ(got[static_cast<size_t>(ch * 100 + y * 10 + x)], inside ? 0.0f : kept)
            << ch << " " << y << " " << x;
      }
    }
  }
}

TEST(AugmentParams, DeterministicPerSeedEpochIndex) {
  AugmentConfig c = plain_config(2, 0.5f, 0.5f);
  for (uint64_t i = 0; i < 50; ++i) {
    const AugmentParams a = augment_params(11, 4, i, 28, 28, c);
    const AugmentParams b = augment_params(11, 4, i, 28, 28, c);
    EXPECT_EQ(a.dx, b.dx);
    EXPECT_EQ(a.dy, b.dy);
    EXPECT_EQ(a.flip, b.flip);
    EXPECT_EQ(a.erase, b.erase);
    EXPECT_EQ(a.erase_x, b.erase_x);
    EXPECT_EQ(a.erase_y, b.erase_y);
    EXPECT_EQ(a.erase_w, b.erase_w);
    EXPECT_EQ(a.erase_h, b.erase_h);
  }
}

TEST(AugmentParams, EpochsSeedsAndIndicesDiffer) {
  const AugmentConfig c = plain_config(2, 0.5f);
  auto signature = [&](uint64_t seed, uint64_t epoch, uint64_t first) {
    std::vector<int> s;
    for (uint64_t i = first; i < first + 64; ++i) {
      const AugmentParams p = augment_params(seed, epoch, i, 28, 28, c);
      s.push_back(p.dx * 100 + p.dy * 10 + p.flip);
    }
    return s;
  };
  EXPECT_NE(signature(1, 0, 0), signature(1, 1, 0));
  EXPECT_NE(signature(1, 0, 0), signature(2, 0, 0));
  EXPECT_NE(signature(1, 0, 0), signature(1, 0, 64));
  // The high half of a 64-bit sample index and epoch matter too.
  EXPECT_NE(signature(1, 0, 0), signature(1, 0, uint64_t{1} << 32));
}

TEST(AugmentParams, Distributions) {
  AugmentConfig c = plain_config(2, 0.5f, 0.5f);
  const int n = 20000;
  int flips = 0, erases = 0;
  std::vector<int> dx(5, 0), dy(5, 0);
  for (int i = 0; i < n; ++i) {
    const AugmentParams p = augment_params(3, 1, static_cast<uint64_t>(i), 32, 32, c);
    ASSERT_GE(p.dx, 0);
    ASSERT_LE(p.dx, 4);
    ASSERT_GE(p.dy, 0);
    ASSERT_LE(p.dy, 4);
    ++dx[static_cast<size_t>(p.dx)];
    ++dy[static_cast<size_t>(p.dy)];
    flips += p.flip;
    if (!p.erase) continue;
    ++erases;
    ASSERT_GE(p.erase_h, 1);
    ASSERT_GE(p.erase_w, 1);
    ASSERT_GE(p.erase_y, 0);
    ASSERT_GE(p.erase_x, 0);
    ASSERT_LE(p.erase_y + p.erase_h, 32);
    ASSERT_LE(p.erase_x + p.erase_w, 32);
    // Rounding h and w to whole pixels moves area and ratio a little beyond the drawn ranges.
    const double area = double(p.erase_h) * p.erase_w / (32.0 * 32.0);
    EXPECT_GE(area, 0.02 * 0.6);
    EXPECT_LE(area, 0.33 * 1.3);
    const double ratio = double(p.erase_h) / p.erase_w;
    EXPECT_GE(ratio, 0.3 * 0.6);
    EXPECT_LE(ratio, 3.3 / 0.6);
  }
  EXPECT_NEAR(flips / double(n), 0.5, 0.02);
  // Half the samples draw an erase; at this image size all 10 attempts almost never fail.
  EXPECT_NEAR(erases / double(n), 0.5, 0.03);
  for (int k = 0; k < 5; ++k) {
    EXPECT_NEAR(dx[static_cast<size_t>(k)] / double(n), 0.2, 0.02);
    EXPECT_NEAR(dy[static_cast<size_t>(k)] / double(n), 0.2, 0.02);
  }
  AugmentConfig off = plain_config(0, 0.0f, 0.0f);
  for (uint64_t i = 0; i < 200; ++i) {
    const AugmentParams p = augment_params(3, 1, i, 32, 32, off);
    EXPECT_EQ(p.dx, 0);
    EXPECT_EQ(p.dy, 0);
    EXPECT_FALSE(p.flip);
    EXPECT_FALSE(p.erase);
  }
}

TEST(AugmentParams, OwnExpAndLogMatchTheLibrary) {
  for (double x : {0.02, 0.3, 0.5, 1.0, 1.7, 3.3, 1000.0}) {
    EXPECT_NEAR(augment_detail::log_pos(x), std::log(x), 1e-13 * std::max(1.0, std::abs(std::log(x)))) << x;
  }
  for (double x : {-3.0, -1.2, -0.1, 0.0, 0.7, 1.2, 5.0}) {
    EXPECT_NEAR(augment_detail::exp_small(x), std::exp(x), 1e-14 * std::exp(x)) << x;
  }
}

// An independent reference: materialise the zero-padded image, crop, flip, normalise, erase.
std::vector<float> reference(const uint8_t* img, int C, int H, int W, const AugmentParams& p, int pad,
                             const std::vector<float>& mean, const std::vector<float>& sd) {
  const int PH = H + 2 * pad, PW = W + 2 * pad;
  std::vector<float> out(static_cast<size_t>(C * H * W));
  for (int c = 0; c < C; ++c) {
    std::vector<uint8_t> padded(static_cast<size_t>(PH * PW), 0);
    for (int y = 0; y < H; ++y)
      for (int x = 0; x < W; ++x)
        padded[static_cast<size_t>((y + pad) * PW + x + pad)] = img[(c * H + y) * W + x];
    for (int y = 0; y < H; ++y) {
      for (int x = 0; x < W; ++x) {
        const int cx = p.flip ? W - 1 - x : x;
        const uint8_t v = padded[static_cast<size_t>((y + p.dy) * PW + cx + p.dx)];
        float f =
            (static_cast<float>(v) / 255.0f - mean[static_cast<size_t>(c)]) / sd[static_cast<size_t>(c)];
        if (p.erase && y >= p.erase_y && y < p.erase_y + p.erase_h && x >= p.erase_x &&
            x < p.erase_x + p.erase_w)
          f = 0.0f;
        out[static_cast<size_t>((c * H + y) * W + x)] = f;
      }
    }
  }
  return out;
}

Tensor random_images(int64_t b, int64_t c, int64_t h, int64_t w, uint32_t seed) {
  std::vector<uint8_t> v(static_cast<size_t>(b * c * h * w));
  uint32_t s = seed;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<uint8_t>(s >> 24);
  }
  return Tensor::from_vector<uint8_t>(v, {b, c, h, w});
}

TEST(Augment, MatchesReferenceOnRandomBatch) {
  const AugmentConfig c = plain_config(3, 0.5f, 0.5f);
  const Tensor images = random_images(16, 3, 12, 10, 1);
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < 16; ++i) indices.push_back(1000 + 37 * i);
  const std::vector<float> mean = {0.4f, 0.5f, 0.6f}, sd = {0.2f, 0.25f, 0.3f};
  const std::vector<float> got = augment_batch(images, indices, 77, 2, c, mean, sd).to_vector<float>();
  const uint8_t* src = images.data<uint8_t>();
  for (int64_t b = 0; b < 16; ++b) {
    const AugmentParams p =
        augment_params(77, 2, static_cast<uint64_t>(indices[static_cast<size_t>(b)]), 12, 10, c);
    const std::vector<float> want = reference(src + b * 360, 3, 12, 10, p, 3, mean, sd);
    for (size_t k = 0; k < want.size(); ++k)
      ASSERT_EQ(got[static_cast<size_t>(b) * 360 + k], want[k]) << b << " " << k;
  }
}

TEST(Augment, IndependentOfBatchComposition) {
  const AugmentConfig c = plain_config(2, 0.5f, 0.5f);
  const Tensor images = random_images(64, 1, 28, 28, 5);
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < 64; ++i) indices.push_back((i * 7919) % 60000);
  const int saved = num_threads();
  set_num_threads(2);
  const Tensor batch = augment_batch(images, indices, 123, 9, c, {0.286f}, {0.353f});
  set_num_threads(saved);
  for (int64_t b : {0, 17, 63}) {
    const Tensor alone = augment_batch(images.slice(0, b, b + 1), {indices[static_cast<size_t>(b)]}, 123, 9,
                                       c, {0.286f}, {0.353f});
    EXPECT_EQ(alone.to_vector<float>(), batch.slice(0, b, b + 1).to_vector<float>()) << b;
  }
  // The same sample at another position of a different batch.
  const Tensor pair = Tensor::empty({2, 1, 28, 28}, DType::u8);
  pair.slice(0, 0, 1).copy_(images.slice(0, 40, 41));
  pair.slice(0, 1, 2).copy_(images.slice(0, 3, 4));
  const Tensor swapped = augment_batch(pair, {indices[40], indices[3]}, 123, 9, c, {0.286f}, {0.353f});
  EXPECT_EQ(swapped.slice(0, 1, 2).to_vector<float>(), batch.slice(0, 3, 4).to_vector<float>());
  EXPECT_EQ(swapped.slice(0, 0, 1).to_vector<float>(), batch.slice(0, 40, 41).to_vector<float>());
}

TEST(Augment, RejectsBadArguments) {
  const Tensor images = random_images(2, 1, 4, 4, 1);
  EXPECT_THROW(augment_batch(images, {0}, 0, 0, {}, {0.5f}, {0.5f}), ShapeError);
  EXPECT_THROW(augment_batch(images, {0, 1}, 0, 0, {}, {0.5f, 0.5f}, {0.5f, 0.5f}), ShapeError);
  EXPECT_THROW(augment_batch(images, {0, 1}, 0, 0, {}, {0.5f}, {0.0f}), ValueError);
  EXPECT_THROW(augment_batch(images.to(DType::f32), {0, 1}, 0, 0, {}, {0.5f}, {0.5f}), DTypeError);
  EXPECT_THROW(augment_batch(images.view({2, 16}), {0, 1}, 0, 0, {}, {0.5f}, {0.5f}), ShapeError);
  EXPECT_THROW(augment_batch(images, {0, -1}, 0, 0, {}, {0.5f}, {0.5f}), ValueError);
  EXPECT_THROW(augment_batch(images, {0, 1}, 0, 0, plain_config(-1, 0.5f), {0.5f}, {0.5f}), ValueError);
  EXPECT_THROW(augment_batch(images, {0, 1}, 0, 0, plain_config(2, 1.5f), {0.5f}, {0.5f}), ValueError);
  AugmentConfig bad_area;
  bad_area.erase_area_min = 0.5f;
  bad_area.erase_area_max = 0.1f;
  EXPECT_THROW(validate_augment_config(bad_area), ValueError);
  EXPECT_NO_THROW(validate_augment_config(AugmentConfig{}));
}

}  // namespace
}  // namespace liftoff
