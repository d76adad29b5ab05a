// JPEG structure checks of data/image_io.cpp (data/jpeg_check.h): files stb_image would mis-handle are
// IOErrors with a clear message, and valid JPEGs of every common kind decode exactly as stb_image decodes
// them.
#include <gtest/gtest.h>
#include <stb/stb_image.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "data/image_io.h"
#include "data/jpeg_check.h"
#include "runtime/error.h"
#include "tests/data/decode_test_util.h"

namespace liftoff {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

using decode_test::read_bytes;
using decode_test::source_path;

Bytes fixture(const std::string& name) {
  return read_bytes(source_path("tests/data/jpeg/" + name));
}


// make_jpegs.cpp's pixels: 16 + 2x + 2y + 40c.
int pattern(int x, int y, int c) {
  return 16 + 2 * x + 2 * y + 40 * c;
}

// What decoding a `stored`-channel file to `channels` should give: gray replicated, or stb's luma weights.
int expected(int stored, int channels, int x, int y, int c) {
  if (stored == 1) return pattern(x, y, 0);
  if (channels == 3) return pattern(x, y, c);
  return (77 * pattern(x, y, 0) + 150 * pattern(x, y, 1) + 29 * pattern(x, y, 2)) >> 8;
}

class ImageIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("liftoff_image_io_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const Bytes& bytes) const {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  fs::path dir_;
};

// stb_image on its own, for comparison: the checks must not change a single decoded byte.
Bytes stb_decode(const Bytes& bytes, int channels) {
  int w = 0, h = 0, c = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c, channels),
      stbi_image_free);
  if (pixels == nullptr) return {};
  return Bytes(pixels.get(), pixels.get() + static_cast<size_t>(w) * h * channels);
}

// Expects both entry points to throw exactly `message` (the path is prepended as "image '<path>': ").
void expect_rejected(const std::string& path, const std::string& message) {
  const std::string expected = "image '" + path + "': " + message;
  for (const auto& call : std::vector<std::function<void()>>{[&] { read_image_info(path); },
                                                             [&] { decode_image_file(path, 3); }}) {
    try {
      call();
      ADD_FAILURE() << path << " was accepted";
    } catch (const IOError& e) {
      EXPECT_EQ(e.what(), expected);
    }
  }
}

size_t find_marker(const Bytes& bytes, uint8_t code, size_t from = 0) {
  for (size_t i = from; i + 1 < bytes.size(); ++i) {
    if (bytes[i] == 0xFF && bytes[i + 1] == code) return i;
  }
  ADD_FAILURE() << "no marker 0xFF" << std::hex << int(code);
  return 0;
}

TEST_F(ImageIoTest, ValidJpegVariantsDecodeExactlyAsStbImage) {
  for (const std::string& name : decode_test::valid_jpegs()) {
    SCOPED_TRACE(name);
    const Bytes bytes = fixture(name);
    const std::string path = write(name, bytes);
    const ImageInfo info = read_image_info(path);
    EXPECT_EQ(info.width, 31);
    EXPECT_EQ(info.height, 23);
    for (int channels : {1, 3}) {
      const DecodedImage image = decode_image_file(path, channels);
      EXPECT_EQ(image.pixels, stb_decode(bytes, channels));
      if (std::string(name) == "cmyk.jpg") continue;  // stb's CMYK-to-RGB, not the stored values
      // And the decode is the image that was encoded (lossy, chroma subsampled, but a smooth pattern).
      double err = 0;
      for (int y = 0; y < 23; ++y) {
        for (int x = 0; x < 31; ++x) {
          for (int c = 0; c < channels; ++c) {
            err += std::abs(image.pixels[static_cast<size_t>((y * 31 + x) * channels + c)] -
                            expected(info.channels, channels, x, y, c));
          }
        }
      }
      EXPECT_LT(err / (23 * 31 * channels), 3.0) << channels << " channels";
    }
  }
}

TEST_F(ImageIoTest, StbImageWriteJpegsDecode) {
  // What tools/export_images writes: stb_image_write's baseline JPEG (4:2:0 up to quality 90, then 4:4:4).
  for (int channels : {1, 3}) {
    for (int quality : {1, 50, 90, 91, 100}) {
      for (const auto& [h, w] : std::vector<std::pair<int, int>>{{1, 1}, {5, 7}, {16, 16}, {17, 33}}) {
        std::vector<uint8_t> chw(static_cast<size_t>(channels * h * w));
        for (size_t i = 0; i < chw.size(); ++i) chw[i] = static_cast<uint8_t>(i * 29 % 256);
        const std::string path = (dir_ / "w.jpg").string();
        write_image_file(path, chw.data(), channels, h, w, ImageFormat::jpg, quality);
        const DecodedImage image = decode_image_file(path, channels);
        EXPECT_EQ(image.pixels, stb_decode(read_bytes(path), channels)) << channels << " q" << quality;
        EXPECT_EQ(image.width, w);
      }
    }
  }
}

TEST_F(ImageIoTest, LenientPartsOfTheFormatStillDecode) {
  // Bytes after EOI, and stray bytes and extra 0xFF fill before the frame header: stb_image accepts these, so
  // the check must too.
  Bytes bytes = fixture("baseline-420.jpg");
  const Bytes original_pixels = stb_decode(bytes, 3);
  bytes.insert(bytes.end(), {'j', 'u', 'n', 'k'});
  const size_t sof = find_marker(bytes, 0xC0);
  bytes.insert(bytes.begin() + static_cast<long>(sof), {0x00, 0x17, 0xFF, 0xFF});
  const std::string path = write("lenient.jpg", bytes);
  EXPECT_EQ(decode_image_file(path, 3).pixels, original_pixels);
  // Not JPEG data at all: left to stb_image's own detection.
  EXPECT_NO_THROW(check_jpeg_structure(path, reinterpret_cast<const uint8_t*>("\x89PNG"), 4));
  EXPECT_NO_THROW(check_jpeg_structure(path, reinterpret_cast<const uint8_t*>("\xFF\x00\xFF"), 3));
}

TEST_F(ImageIoTest, FuzzerCrashUndefinedHuffmanTable) {
  // image_fuzz's SEGV inside stbi__jpeg_decode_block: the DHT segment of AC table 0 became an APP4 segment,
  // so the scan decodes with stb_image's uninitialised table memory.
  const Bytes crash = read_bytes(source_path("tests/fuzz/corpus/image/jpeg-undefined-huffman-table.jpg"));
  ASSERT_EQ(crash.size(), 633u);
  expect_rejected(
      write("bad.jpg", crash),
      "JPEG scan 1 (SOS at byte 609) uses AC Huffman table 0 for component id 1, which no segment "
      "before it defines; the file is corrupt or truncated");
  // The same with a DC table, and a quantization table the frame names but no DQT defines.
  Bytes dc = fixture("baseline-444.jpg");
  const size_t sos = find_marker(dc, 0xDA);
  dc[sos + 8] = 0x31;  // component 2: DC table 3, AC table 1
  expect_rejected(
      write("dc.jpg", dc),
      "JPEG scan 1 (SOS at byte 609) uses DC Huffman table 3 for component id 2, which no segment "
      "before it defines; the file is corrupt or truncated");
  Bytes dqt = fixture("baseline-444.jpg");
  dqt[find_marker(dqt, 0xC0) + 12] = 2;  // component 1 (id, sampling, table) at +10: quantization table 2
  expect_rejected(
      write("dqt.jpg", dqt),
      "JPEG scan 1 (SOS at byte 609) uses quantization table 2 for component id 1, which no segment "
      "before it defines; the file is corrupt or truncated");
}

TEST_F(ImageIoTest, HuffmanTableWithMoreThan256Codes) {
  // stb_image writes such a table past its 256-entry arrays (stb issue #1289).
  Bytes bytes = fixture("baseline-444.jpg");
  Bytes dht = {0xFF, 0xC4, 0x08, 0x0B, 0x10, 0, 0, 0, 0, 0, 0, 0, 0};  // 2059 bytes: AC table 0
  dht.insert(dht.end(), 8, 255);                                       // 255 codes of each length 9..16
  dht.insert(dht.end(), 2040, 0x01);
  bytes.insert(bytes.begin() + 2, dht.begin(), dht.end());
  expect_rejected(
      write("dht.jpg", bytes),
      "JPEG Huffman table at byte 6 (AC 0) lists 2040 codes, at most 256 are allowed; the file is "
      "corrupt or truncated");
}

TEST_F(ImageIoTest, TruncatedJpeg) {
  const Bytes bytes = fixture("baseline-420.jpg");
  expect_rejected(
      write("scan.jpg", Bytes(bytes.begin(), bytes.begin() + 700)),
      "JPEG data ends at byte 700 inside scan 1 without an end-of-image marker; the file is corrupt "
      "or truncated");
  expect_rejected(write("table.jpg", Bytes(bytes.begin(), bytes.begin() + 300)),
                  "JPEG segment DHT (0xFFC4) at byte 210 claims 181 bytes but only 88 follow; the file is "
                  "corrupt or truncated");
}

TEST_F(ImageIoTest, InvalidScanStructure) {
  // A progressive DC refinement scan (Ah=1) before the first DC scan of its component.
  Bytes order = fixture("progressive-gray.jpg");
  const size_t sos = find_marker(order, 0xDA);
  order[sos + 9] = 0x10;
  expect_rejected(
      write("order.jpg", order),
      "JPEG progressive scan 1 (SOS at byte 127) refines component id 1 before its first DC scan; "
      "the file is corrupt or truncated");
  // A DC scan that also claims AC coefficients.
  Bytes band = fixture("progressive-gray.jpg");
  band[sos + 8] = 5;
  expect_rejected(
      write("band.jpg", band),
      "JPEG progressive scan 1 (SOS at byte 127) has spectral selection 0..5, successive "
      "approximation Ah=0 Al=1 over 1 components: not a valid step; the file is corrupt or truncated");
  // The last of three one-component scans names the second component again: the third is never coded.
  Bytes missing = fixture("scan-per-component-420.jpg");
  const size_t second = find_marker(missing, 0xDA, find_marker(missing, 0xDA) + 1);
  const size_t third = find_marker(missing, 0xDA, second + 1);
  missing[third + 5] = 2;
  expect_rejected(write("missing.jpg", missing),
                  "JPEG frame component 3 (id 3) is coded in no scan; the file is corrupt or truncated");
}

TEST_F(ImageIoTest, UnsupportedCodingProcess) {
  expect_rejected(
      write("arith.jpg", fixture("arithmetic-420.jpg")),
      "JPEG marker SOF9 (0xFFC9) means lossless, hierarchical or arithmetic coding, which stb_image "
      "does not decode; re-save the image as a baseline or progressive JPEG, or as PNG");
}

}  // namespace
}  // namespace liftoff
