#include "data/image_folder.h"

#include <gtest/gtest.h>
#include <stb/stb_image_write.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "data/loader.h"

namespace liftoff {
namespace {

namespace fs = std::filesystem;

class ImageFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("liftoff_folder_" + std::to_string(::getpid()) + "_" +
                                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string dir(const std::string& name) {
    fs::create_directories(root_ / name);
    return (root_ / name).string();
  }
  // Interleaved HWC pixels through stb_image_write directly (the library's writer is tested separately).
  static void write(const std::string& path, int w, int h, int comp, const std::vector<uint8_t>& hwc) {
    int ok = 0;
    const std::string ext = fs::path(path).extension().string();
    if (ext == ".png") ok = stbi_write_png(path.c_str(), w, h, comp, hwc.data(), w * comp);
    if (ext == ".bmp") ok = stbi_write_bmp(path.c_str(), w, h, comp, hwc.data());
    if (ext == ".jpg") ok = stbi_write_jpg(path.c_str(), w, h, comp, hwc.data(), 95);
    ASSERT_NE(ok, 0) << path;
  }
  static std::vector<uint8_t> pattern(int w, int h, int comp, int seed) {
    std::vector<uint8_t> v(static_cast<size_t>(w * h * comp));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<uint8_t>((i * 37 + static_cast<size_t>(seed) * 11) % 251);
    return v;
  }
  static std::vector<uint8_t> smooth(int w, int h, int comp) {
    std::vector<uint8_t> v(static_cast<size_t>(w * h * comp));
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < comp; ++c)
          v[static_cast<size_t>((y * w + x) * comp + c)] = static_cast<uint8_t>(40 + 4 * x + 3 * y + 20 * c);
    return v;
  }
  static void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  static std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  // CHW value of sample `index` after load().
  static std::vector<uint8_t> load(const ImageFolder& f, int64_t index) {
    std::vector<uint8_t> out(static_cast<size_t>(f.channels() * f.height() * f.width()));
    EXPECT_TRUE(f.load(index, out.data()));
    return out;
  }

  fs::path root_;
};

TEST_F(ImageFolderTest, ClassesSortedFormatsAndExactLosslessPixels) {
  const auto cat = pattern(5, 4, 3, 1), ant = pattern(5, 4, 3, 2), bee = smooth(5, 4, 3);
  write(dir("cat") + "/x.png", 5, 4, 3, cat);
  write(dir("ant") + "/y.bmp", 5, 4, 3, ant);
  write(dir("bee") + "/z.jpg", 5, 4, 3, bee);
  write_bytes(root_.string() + "/bee/notes.png.bak", {1, 2, 3});  // not an image extension: ignored
  ImageFolder f(root_.string());
  EXPECT_EQ(f.class_names(), (std::vector<std::string>{"ant", "bee", "cat"}));
  ASSERT_EQ(f.size(), 3);
  EXPECT_EQ(f.channels(), 3);
  EXPECT_EQ(f.height(), 4);
  EXPECT_EQ(f.width(), 5);
  EXPECT_EQ(f.label(0), 0);
  EXPECT_EQ(f.label(2), 2);
  EXPECT_EQ(f.mean().size(), 3u);
  const auto chw = [](const std::vector<uint8_t>& hwc) {
    std::vector<uint8_t> out(hwc.size());
    for (int c = 0; c < 3; ++c)
      for (int i = 0; i < 20; ++i) out[static_cast<size_t>(c * 20 + i)] = hwc[static_cast<size_t>(i * 3 + c)];
    return out;
  };
  EXPECT_EQ(load(f, 0), chw(ant));  // BMP: lossless
  EXPECT_EQ(load(f, 2), chw(cat));  // PNG: lossless
  const auto jpeg = load(f, 1), expected = chw(bee);
  double err = 0;
  for (size_t i = 0; i < jpeg.size(); ++i) err += std::abs(int(jpeg[i]) - int(expected[i]));
  EXPECT_LT(err / static_cast<double>(jpeg.size()), 6.0);  // lossy, but close on a smooth image
}

TEST_F(ImageFolderTest, GrayAndRgbConversions) {
  write(dir("a") + "/gray.png", 3, 2, 1, {0, 50, 100, 150, 200, 250});
  write(dir("b") + "/rgb.png", 3, 2, 3, pattern(3, 2, 3, 5));
  ImageFolder auto_gray(root_.string());
  EXPECT_EQ(auto_gray.channels(), 1);  // from the first image
  ImageFolderOptions o;
  o.channels = 3;
  ImageFolder rgb(root_.string(), o);
  const auto g = load(rgb, 0);
  for (int c = 0; c < 3; ++c) EXPECT_EQ(g[static_cast<size_t>(c * 6 + 4)], 200);  // gray replicated
  const auto p = pattern(3, 2, 3, 5);
  const auto luma = load(auto_gray, 1);
  // stb_image's RGB -> gray: (77 r + 150 g + 29 b) >> 8.
  for (int i = 0; i < 6; ++i) {
    const int r = p[static_cast<size_t>(3 * i)], gg = p[static_cast<size_t>(3 * i + 1)],
              b = p[static_cast<size_t>(3 * i + 2)];
    EXPECT_EQ(luma[static_cast<size_t>(i)], (77 * r + 150 * gg + 29 * b) >> 8) << i;
  }
}

TEST_F(ImageFolderTest, BilinearResizeAndCenterCrop) {
  // 4x4 gray: downscaling by 2 with half-pixel centres averages each 2x2 block.
  std::vector<uint8_t> big(16);
  for (int i = 0; i < 16; ++i) big[static_cast<size_t>(i)] = static_cast<uint8_t>(i * 10);
  write(dir("a") + "/big.png", 4, 4, 1, big);
  write(dir("a") + "/small.png", 2, 2, 1, {10, 20, 30, 40});
  ImageFolderOptions o;
  o.height = 2;
  o.width = 2;
  ImageFolder resized(root_.string(), o);
  // big: blocks (0,10,40,50) -> 25, (20,30,60,70) -> 45, (80,90,120,130) -> 105, (100,110,140,150) -> 125.
  EXPECT_EQ(load(resized, 0), (std::vector<uint8_t>{25, 45, 105, 125}));
  EXPECT_EQ(load(resized, 1), (std::vector<uint8_t>{10, 20, 30, 40}));  // same size: copied
  o.height = 4;
  o.width = 4;
  ImageFolder up(root_.string(), o);
  const auto u = load(up, 1);
  EXPECT_EQ(u[0], 10);  // corners clamp to the source corners
  EXPECT_EQ(u[15], 40);
  EXPECT_EQ(u[1], 13);  // x: 0.25 of the way from 10 to 20 = 12.5 -> 13 (round half away from zero)
  o.resize = ResizeMode::center_crop;
  o.height = 2;
  o.width = 2;
  ImageFolder crop(root_.string(), o);
  EXPECT_EQ(load(crop, 0), (std::vector<uint8_t>{50, 60, 90, 100}));  // centre window of the 4x4
  o.height = 4;
  o.width = 4;
  ImageFolder pad(root_.string(), o);
  EXPECT_EQ(load(pad, 1), (std::vector<uint8_t>{0, 0, 0, 0, 0, 10, 20, 0, 0, 30, 40, 0, 0, 0, 0, 0}));
}

TEST_F(ImageFolderTest, FolderErrors) {
  EXPECT_THROW(ImageFolder((root_ / "missing").string()), IOError);
  EXPECT_THROW(ImageFolder(root_.string()), IOError);  // no class folders
  write(dir("a") + "/x.png", 2, 2, 1, {1, 2, 3, 4});
  dir("empty");
  try {
    ImageFolder f(root_.string());
    FAIL() << "an empty class folder must be an error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
  }
  EXPECT_EQ(parse_bad_sample_policy("skip"), BadSamplePolicy::skip);
  EXPECT_THROW(parse_bad_sample_policy("ignore"), ValueError);
}

std::vector<uint8_t> png_with_header(uint32_t width, uint32_t height) {
  std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  const auto put32 = [&](std::vector<uint8_t>& v, uint32_t x) {
    for (int s = 24; s >= 0; s -= 8) v.push_back(static_cast<uint8_t>(x >> s));
  };
  const auto chunk = [&](const char* type, const std::vector<uint8_t>& data) {
    put32(png, static_cast<uint32_t>(data.size()));
    std::vector<uint8_t> body(type, type + 4);
    body.insert(body.end(), data.begin(), data.end());
    png.insert(png.end(), body.begin(), body.end());
    put32(png, static_cast<uint32_t>(crc32(0, body.data(), static_cast<uInt>(body.size()))));
  };
  std::vector<uint8_t> ihdr;
  put32(ihdr, width);
  put32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit RGB, deflate, no filter method, no interlace
  chunk("IHDR", ihdr);
  chunk("IDAT", {0x78, 0x9C, 0x03, 0x00});  // a few bytes: the decoder must never get this far
  chunk("IEND", {});
  return png;
}

TEST_F(ImageFolderTest, HostileHeaderIsRejectedBeforeDecoding) {
  const std::string huge = dir("a") + "/huge.png";
  write_bytes(huge, png_with_header(100000, 100000));
  try {
    read_image_info(huge);
    FAIL() << "a 100000x100000 header must be rejected";
  } catch (const IOError& e) {
    // Our bounds check (which runs on the header alone) produced the message, not a failed decode.
    EXPECT_NE(std::string(e.what()).find("100000x100000"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("huge.png"), std::string::npos) << e.what();
  }
  EXPECT_THROW(decode_image_file(huge, 3), IOError);
  // A header stb_image itself accepts: only our side bound rejects it.
  const std::string wide = dir("c") + "/wide.png";
  write_bytes(wide, png_with_header(20000, 1));
  try {
    read_image_info(wide);
    FAIL() << "a 20000-pixel side must be rejected";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("20000x1"), std::string::npos) << e.what();
  }
  fs::remove_all(root_ / "c");
  ImageFolderOptions o;
  o.height = 8;
  o.width = 8;
  o.channels = 3;
  ImageFolder f(root_.string(), o);
  std::vector<uint8_t> out(3 * 8 * 8);
  EXPECT_THROW(f.load(0, out.data()), IOError);
  // The pixel-count bound, separately from the side bound.
  write(dir("b") + "/p.png", 11, 10, 1, std::vector<uint8_t>(110, 7));
  ImageLimits small;
  small.max_pixels = 100;
  EXPECT_THROW(read_image_info((root_ / "b" / "p.png").string(), small), IOError);
  EXPECT_EQ(read_image_info((root_ / "b" / "p.png").string()).width, 11);
  EXPECT_THROW(read_image_info((root_ / "a" / "missing.png").string()), IOError);
}

TEST_F(ImageFolderTest, CorruptAndTruncatedFilesAreIOErrorsNamingTheFile) {
  const std::string a = dir("a");
  write(a + "/good.png", 16, 16, 3, pattern(16, 16, 3, 1));
  write(a + "/good.jpg", 16, 16, 3, smooth(16, 16, 3));
  auto png = read_bytes(a + "/good.png");
  auto jpg = read_bytes(a + "/good.jpg");
  write_bytes(a + "/trunc.png",
              std::vector<uint8_t>(png.begin(), png.begin() + static_cast<long>(png.size() / 2)));
  write_bytes(a + "/trunc.jpg", std::vector<uint8_t>(jpg.begin(), jpg.begin() + 100));
  write_bytes(a + "/garbage.jpg", std::vector<uint8_t>(300, 0x5A));
  write_bytes(a + "/empty.bmp", {});
  for (const char* name : {"trunc.png", "trunc.jpg", "garbage.jpg", "empty.bmp"}) {
    try {
      decode_image_file(a + "/" + name, 3);
      ADD_FAILURE() << name << " decoded";
    } catch (const IOError& e) {
      EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
    }
  }
}

TEST_F(ImageFolderTest, SkipPolicyCountsBadFilesOnce) {
  const std::string a = dir("a"), b = dir("b");
  for (int i = 0; i < 4; ++i)
    write(a + "/" + std::to_string(i) + ".png", 4, 4, 1, std::vector<uint8_t>(16, static_cast<uint8_t>(i)));
  write_bytes(b + "/bad.png", {1, 2, 3});
  write(b + "/ok.png", 4, 4, 1, std::vector<uint8_t>(16, 9));
  ImageFolderOptions o;
  ImageFolder strict(root_.string(), o);
  std::vector<uint8_t> out(16);
  EXPECT_THROW(strict.load(4, out.data()), IOError);
  o.on_bad_sample = BadSamplePolicy::skip;
  auto lenient = std::make_shared<ImageFolder>(root_.string(), o);
  EXPECT_FALSE(lenient->load(4, out.data()));
  EXPECT_FALSE(lenient->load(4, out.data()));
  EXPECT_TRUE(lenient->load(5, out.data()));
  EXPECT_EQ(lenient->skipped_count(), 1);
  ASSERT_EQ(lenient->skipped_files().size(), 1u);
  EXPECT_NE(lenient->skipped_files()[0].find("bad.png"), std::string::npos);

  LoaderOptions lo;
  lo.batch = 2;
  lo.workers = 3;
  lo.augment = AugmentMode::none;
  lo.shuffle = false;
  DataLoader loader(lenient, lo);
  loader.start_epoch(0);
  Batch batch;
  int64_t images = 0;
  std::vector<int64_t> seen;
  while (loader.next(batch)) {
    images += batch.input.size(0);
    EXPECT_EQ(batch.labels.size(0), static_cast<int64_t>(batch.indices.size()));
    seen.insert(seen.end(), batch.indices.begin(), batch.indices.end());
  }
  EXPECT_EQ(images, 5);
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3, 5}));
  EXPECT_EQ(loader.stats().skipped_samples, 1);
  const ImageDataset all = lenient->load_all();
  EXPECT_EQ(all.size(), 5);
}

TEST_F(ImageFolderTest, LibraryWriterRoundTrip) {
  std::vector<uint8_t> chw(3 * 3 * 2);
  for (size_t i = 0; i < chw.size(); ++i) chw[i] = static_cast<uint8_t>(i * 13);
  const std::string a = dir("a");
  write_image_file(a + "/w.png", chw.data(), 3, 3, 2, ImageFormat::png);
  write_image_file(a + "/w.bmp", chw.data(), 3, 3, 2, parse_image_format("bmp"));
  ImageFolder f(root_.string());
  EXPECT_EQ(load(f, 0), chw);
  EXPECT_EQ(load(f, 1), chw);
  EXPECT_THROW(parse_image_format("gif"), ValueError);
  EXPECT_THROW(
      write_image_file((root_ / "no" / "dir" / "x.png").string(), chw.data(), 3, 3, 2, ImageFormat::png),
      IOError);
}

// Issue 25: decoded image memory is bounded, per image and across the workers decoding at once.
TEST_F(ImageFolderTest, DecodeMemoryInFlightIsBounded) {
  const std::string a = dir("train/a"), b = dir("train/b");
  for (int i = 0; i < 6; ++i) {
    write(a + "/" + std::to_string(i) + ".png", 64, 48, 3, pattern(64, 48, 3, i));
    write(b + "/" + std::to_string(i) + ".png", 64, 48, 3, pattern(64, 48, 3, i + 6));
  }
  const int64_t one = decode_bytes_estimate(ImageInfo{64, 48, 3}, 3);
  ImageFolderOptions o;
  o.max_decode_bytes_in_flight = one + one / 2;  // room for one image at a time, not two
  ImageFolder folder((fs::path(dir("train"))).string(), o);
  std::vector<std::thread> threads;
  std::vector<std::vector<uint8_t>> out(4, std::vector<uint8_t>(3 * 48 * 64));
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = t; i < folder.size(); i += 4)
        EXPECT_TRUE(folder.load(i, out[static_cast<size_t>(t)].data()));
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(folder.peak_decode_bytes_in_flight(), one);

  // An image that alone needs more than the limit is refused naming it, not decoded.
  o.max_decode_bytes_in_flight = one - 1;
  ImageFolder tight((fs::path(dir("train"))).string(), o);
  std::vector<uint8_t> dst(3 * 48 * 64);
  try {
    tight.load(0, dst.data());
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(tight.path(0)), std::string::npos) << what;
    EXPECT_NE(what.find("decoding its 64x48 pixels takes about"), std::string::npos) << what;
    EXPECT_NE(what.find("--decode-memory-mb"), std::string::npos) << what;
  }
  EXPECT_EQ(tight.peak_decode_bytes_in_flight(), 0);
}

TEST_F(ImageFolderTest, PixelsPerImageLimitNamesTheFile) {
  const std::string a = dir("train/a");
  write(a + "/big.png", 300, 200, 1, pattern(300, 200, 1, 1));
  ImageFolderOptions o;
  o.height = o.width = 8;
  o.channels = 3;                       // nothing read at construction
  o.limits.max_pixels = 300 * 200 - 1;  // train: --max-image-pixels
  ImageFolder folder(dir("train"), o);
  std::vector<uint8_t> dst(8 * 8 * 3);
  try {
    folder.load(0, dst.data());
    ADD_FAILURE() << "no error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "big.png': 300x200 = 60000 pixels exceed the limit of 59999; shrink the image or raise "
                  "the limit (train: --max-image-pixels)"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace liftoff
