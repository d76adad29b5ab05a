// data/decode/image_decode.h: the host-side checks every file passes before a decoder (nvJPEG, libjpeg-turbo,
// stb_image) sees it, the routing of JPEG kinds to nvJPEG's engines, libjpeg-turbo against stb_image on every
// kind of JPEG (pixel difference bounds), DCT-scaled decoding, and a fuzz-style run over mutated files.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "data/decode/image_decode.h"
#include "decode_test_util.h"
#include "runtime/error.h"

namespace liftoff {
namespace {

using namespace decode_test;

class ImageDecodeFiles : public TempDirTest {};

struct Diff {
  int max = 0;
  double mean = 0.0;
};

Diff compare(const DecodedImage& a, const DecodedImage& b) {
  Diff d;
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  if (a.pixels.size() != b.pixels.size()) return Diff{255, 255.0};
  double sum = 0.0;
  for (size_t i = 0; i < a.pixels.size(); ++i) {
    const int e = std::abs(int{a.pixels[i]} - int{b.pixels[i]});
    d.max = std::max(d.max, e);
    sum += e;
  }
  d.mean = sum / static_cast<double>(a.pixels.size());
  return d;
}

TEST(ImageDecode, RoutesEachJpegKindToTheDecoderThatTakesIt) {
  const struct {
    const char* file;
    GpuRoute route;
  } cases[] = {
      {"baseline-420.jpg", GpuRoute::hardware},
      {"baseline-422.jpg", GpuRoute::hardware},
      {"baseline-440.jpg", GpuRoute::hardware},
      {"baseline-444.jpg", GpuRoute::hardware},
      {"gray.jpg", GpuRoute::hardware},
      {"restart-420.jpg", GpuRoute::hardware},
      {"optimized-420.jpg", GpuRoute::hardware},
      {"progressive-420.jpg", GpuRoute::nvjpeg},
      {"progressive-gray.jpg", GpuRoute::nvjpeg},
      {"scan-per-component-420.jpg", GpuRoute::nvjpeg},
      {"cmyk.jpg", GpuRoute::cpu},
  };
  for (const auto& c : cases) {
    const EncodedImage image = read_encoded_image(jpeg_fixture(c.file));
    EXPECT_EQ(gpu_route_name(image.route), std::string(gpu_route_name(c.route))) << c.file;
    EXPECT_EQ(image.info.width, 31) << c.file;
    EXPECT_EQ(image.info.height, 23) << c.file;
    EXPECT_TRUE(image.jpeg.is_jpeg);
  }
}

TEST_F(ImageDecodeFiles, PngGoesToTheCpu) {
  write_image_file(path("a.png"), picture(5, 7, 0).data(), 3, 5, 7, ImageFormat::png);
  const EncodedImage image = read_encoded_image(path("a.png"));
  EXPECT_FALSE(image.jpeg.is_jpeg);
  EXPECT_EQ(image.route, GpuRoute::cpu);
  const DecodedImage d = decode_encoded_image(path("a.png"), image, CpuJpegDecoder::auto_);
  EXPECT_EQ(d.width, 7);
  EXPECT_EQ(d.height, 5);
  EXPECT_EQ(d.channels, 3);
}

TEST(ImageDecode, TurboMatchesStbOnEveryJpegKind) {
  if (!turbojpeg_available()) GTEST_SKIP() << "built without libjpeg-turbo (LIFTOFF_TURBOJPEG)";
  for (const std::string& name : valid_jpegs()) {
    const EncodedImage image = read_encoded_image(jpeg_fixture(name));
    const DecodedImage turbo = decode_encoded_image(name, image, CpuJpegDecoder::turbo);
    const DecodedImage stb = decode_encoded_image(name, image, CpuJpegDecoder::stb);
    ASSERT_EQ(turbo.channels, 3);
    const Diff d = compare(turbo, stb);
    std::printf("%-30s turbo vs stb: max %d, mean %.3f\n", name.c_str(), d.max, d.mean);
    // Both use an exact integer IDCT; their colour conversions round differently: measured max 3, mean 0.06
    // (textured), 0 on these.
    EXPECT_LE(d.max, 4) << name << ": libjpeg-turbo and stb_image differ by up to " << d.max;
    EXPECT_LE(d.mean, 0.25) << name << ": mean difference " << d.mean;
  }
}

TEST_F(ImageDecodeFiles, TurboMatchesStbOnATexturedPicture) {
  if (!turbojpeg_available()) GTEST_SKIP() << "built without libjpeg-turbo (LIFTOFF_TURBOJPEG)";
  // stb_image_write's encoder (4:2:0 at quality 90), 97x131, with hard edges.
  write_image_file(path("p.jpg"), picture(97, 131, 3).data(), 3, 97, 131, ImageFormat::jpg, 90);
  const EncodedImage image = read_encoded_image(path("p.jpg"));
  const Diff d = compare(decode_encoded_image("p.jpg", image, CpuJpegDecoder::turbo),
                         decode_encoded_image("p.jpg", image, CpuJpegDecoder::stb));
  std::printf("textured 97x131 turbo vs stb: max %d, mean %.3f\n", d.max, d.mean);
  EXPECT_LE(d.max, 4);
  EXPECT_LE(d.mean, 0.25);
}

TEST(ImageDecode, ScaledDecodeIsASmallerPictureOfTheSameImage) {
  if (!turbojpeg_available()) GTEST_SKIP() << "built without libjpeg-turbo (LIFTOFF_TURBOJPEG)";
  const EncodedImage image = read_encoded_image(jpeg_fixture("baseline-444.jpg"));
  const DecodedImage half = decode_encoded_image("baseline-444.jpg", image, CpuJpegDecoder::turbo, 4);
  ASSERT_EQ(half.width, 16);   // ceil(31 / 2)
  ASSERT_EQ(half.height, 12);  // ceil(23 / 2)
  // The pattern 16 + 2x + 2y + 40c, sampled at pixel centres 2x + 0.5: about 16 + 4x + 4y + 2 + 40c.
  for (int y = 0; y < 11; ++y) {
    for (int x = 0; x < 15; ++x) {
      for (int c = 0; c < 3; ++c) {
        const int v = half.pixels[static_cast<size_t>((y * 16 + x) * 3 + c)];
        EXPECT_NEAR(v, 16 + 4 * x + 4 * y + 2 + 40 * c, 6) << "x " << x << " y " << y << " c " << c;
      }
    }
  }
}

TEST(ImageDecode, ScaleIsTheSmallestThatStillCoversTheOutput) {
  EXPECT_EQ(jpeg_scale_eighths(1000, 1000, 224, 224), 2);  // 250 >= 224
  EXPECT_EQ(jpeg_scale_eighths(500, 500, 224, 224), 4);    // 250; 3/8 gives 187
  EXPECT_EQ(jpeg_scale_eighths(224, 224, 224, 224), 8);
  EXPECT_EQ(jpeg_scale_eighths(100, 100, 224, 224), 8);   // upsampled anyway: full size
  EXPECT_EQ(jpeg_scale_eighths(2000, 300, 224, 224), 6);  // the narrow side decides
}

void expect_io_error(const std::string& path, const std::string& fragment) {
  try {
    read_encoded_image(path);
    FAIL() << path << " should be refused";
  } catch (const IOError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path), std::string::npos) << "the error must name the file: " << what;
    EXPECT_NE(what.find(fragment), std::string::npos) << "expected '" << fragment << "' in: " << what;
  }
}

TEST_F(ImageDecodeFiles, BadFilesAreIOErrorsNamingTheFile) {
  const Bytes good = read_bytes(jpeg_fixture("baseline-420.jpg"));
  write_bytes(path("truncated.jpg"), Bytes(good.begin(), good.end() - 20));  // inside the scan
  expect_io_error(path("truncated.jpg"), "without an end-of-image marker");
  write_bytes(path("text.jpg"), Bytes{'h', 'e', 'l', 'l', 'o', ' ', 'j', 'p', 'e', 'g'});
  expect_io_error(path("text.jpg"), "not a readable PNG, JPEG or BMP header");
  write_bytes(path("empty.jpg"), Bytes{});
  expect_io_error(path("empty.jpg"), "empty");
  // Huge declared size: the SOF0 frame header claims 60000 x 60000 pixels.
  Bytes huge = good;
  for (size_t i = 0; i + 8 < huge.size(); ++i) {
    if (huge[i] == 0xFF && huge[i + 1] == 0xC0) {
      huge[i + 5] = 0xEA;  // height 0xEA60 = 60000
      huge[i + 6] = 0x60;
      huge[i + 7] = 0xEA;
      huge[i + 8] = 0x60;
      break;
    }
  }
  write_bytes(path("huge.jpg"), huge);
  expect_io_error(path("huge.jpg"), "60000");
  // Corrupt structure: the first DHT segment's marker overwritten (scans then use an undefined table).
  Bytes corrupt = good;
  for (size_t i = 0; i + 1 < corrupt.size(); ++i) {
    if (corrupt[i] == 0xFF && corrupt[i + 1] == 0xC4) {
      corrupt[i + 1] = 0xE4;
      break;
    }
  }
  write_bytes(path("corrupt.jpg"), corrupt);
  expect_io_error(path("corrupt.jpg"), "Huffman table");
  expect_io_error(path("missing.jpg"), "cannot open");
}

// Fuzz-style: random byte changes and cuts of every fixture. The host-side checks either refuse a file
// (IOError) or pass one whose header is within the limits and whose route is consistent; decoding what
// passed never crashes (AddressSanitizer builds turn a stray access into a failure).
TEST(ImageDecode, MutatedFilesAreRefusedOrDecodedNeverCrash) {
  std::mt19937 rng(1234);
  ImageLimits limits;
  limits.max_side = 4096;
  limits.max_pixels = 1 << 20;
  int refused = 0, passed = 0;
  for (const std::string& name : valid_jpegs()) {
    const Bytes original = read_bytes(jpeg_fixture(name));
    ASSERT_FALSE(original.empty()) << jpeg_fixture(name) << ": fixture missing (run from the build folder)";
    for (int round = 0; round < 150; ++round) {
      Bytes b = original;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % b.size();
        switch (rng() % 4) {
          case 0:
            b[at] = static_cast<uint8_t>(rng());
            break;
          case 1:
            b[at] ^= static_cast<uint8_t>(1u << (rng() % 8));
            break;
          case 2:
            b[at] = 0xFF;
            break;
          default:
            b.resize(std::max<size_t>(1, at));
            break;
        }
      }
      EncodedImage image;
      try {
        image = inspect_encoded_image(name, b, limits);
      } catch (const IOError&) {
        ++refused;
        continue;
      }
      ++passed;
      ASSERT_TRUE(image.info.width >= 1 && image.info.width <= limits.max_side) << name << " round " << round;
      ASSERT_TRUE(image.info.height >= 1 && image.info.height <= limits.max_side)
          << name << " round " << round;
      if (image.route != GpuRoute::cpu) {
        ASSERT_TRUE(image.jpeg.components == 1 || image.jpeg.components == 3);
      }
      for (const CpuJpegDecoder decoder : {CpuJpegDecoder::stb, CpuJpegDecoder::auto_}) {
        try {
          const DecodedImage d = decode_encoded_image(name, image, decoder);
          EXPECT_EQ(d.pixels.size(), static_cast<size_t>(d.width * d.height * 3));
        } catch (const IOError&) {
        }
      }
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(passed, 0);
}

TEST(ImageDecode, DecoderNamesParse) {
  EXPECT_EQ(parse_cpu_jpeg_decoder("stb"), CpuJpegDecoder::stb);
  EXPECT_EQ(parse_cpu_jpeg_decoder("turbo"), CpuJpegDecoder::turbo);
  EXPECT_THROW(parse_cpu_jpeg_decoder("pil"), ValueError);
  EXPECT_EQ(resolve_cpu_jpeg_decoder(CpuJpegDecoder::auto_),
            turbojpeg_available() ? CpuJpegDecoder::turbo : CpuJpegDecoder::stb);
}

}  // namespace
}  // namespace liftoff
