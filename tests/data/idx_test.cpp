#include "data/idx.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "tests/common/temp_dir.h"

namespace liftoff {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// A fresh directory per test, removed afterwards.
class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("liftoff_idx_test") {}
};

void put_u32(Bytes& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

Bytes idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims, const Bytes& payload) {
  Bytes out;
  put_u32(out, magic);
  for (uint32_t d : dims) put_u32(out, d);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

std::string write(const std::string& path, const Bytes& bytes) {
  const bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  if (gz) {
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (!bytes.empty()) {
      EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), int(bytes.size()));
    }
    EXPECT_EQ(gzclose(f), Z_OK);
  } else {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
  return path;
}

Bytes iota_bytes(size_t n, uint8_t start = 0) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(start + 7 * i);
  return b;
}

// Runs fn, expecting an IOError whose message names path and contains every fragment.
::testing::AssertionResult io_error(const std::function<void()>& fn, const std::string& path,
                                    const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const IOError& e) {
    const std::string what = e.what();
    if (what.find(path) == std::string::npos)
      return ::testing::AssertionFailure() << "message does not name '" << path << "': " << what;
    for (const auto& f : fragments) {
      if (what.find(f) == std::string::npos)
        return ::testing::AssertionFailure() << "message lacks '" << f << "': " << what;
    }
    if (what.find('\n') != std::string::npos)
      return ::testing::AssertionFailure() << "message is not one line: " << what;
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "wrong exception type: " << e.what();
  }
  return ::testing::AssertionFailure() << "no exception";
}

TEST(Idx, RoundTripGzipAndPlain) {
  TempDir dir;
  const Bytes pixels = iota_bytes(3 * 2 * 4);
  const Bytes labels = {4, 0, 9};
  for (const std::string ext : {".gz", ""}) {
    const std::string img = write(dir.file("img" + ext), idx_bytes(kIdxImagesMagic, {3, 2, 4}, pixels));
    const std::string lab = write(dir.file("lab" + ext), idx_bytes(kIdxLabelsMagic, {3}, labels));
    const Tensor images = read_idx_images(img);
    EXPECT_EQ(images.shape(), (Shape{3, 2, 4}));
    EXPECT_EQ(images.dtype(), DType::u8);
    EXPECT_EQ(images.to_vector<uint8_t>(), pixels);
    const Tensor l = read_idx_labels(lab);
    EXPECT_EQ(l.shape(), (Shape{3}));
    EXPECT_EQ(l.to_vector<uint8_t>(), labels);
  }
}

TEST(Idx, GzipIsReallyCompressed) {
  // Guards the test helper: a .gz file must not be read in zlib's transparent (plain) mode by accident.
  TempDir dir;
  const std::string img =
      write(dir.file("img.gz"), idx_bytes(kIdxImagesMagic, {100, 28, 28}, Bytes(78400, 3)));
  EXPECT_LT(fs::file_size(img), 10000u);
  EXPECT_EQ(read_idx_images(img).numel(), 78400);
}

TEST(Idx, RejectsWrongMagic) {
  TempDir dir;
  const std::string p = write(dir.file("bad.gz"), idx_bytes(0x12345678, {1, 1, 1}, {0}));
  EXPECT_TRUE(io_error([&] { read_idx_images(p); }, p, {"magic", "0x12345678", "0x00000803"}));
  // A float IDX file (type 0x0D) is not u8.
  const std::string f = write(dir.file("float"), idx_bytes(0x00000D03, {1, 1, 1}, {0, 0, 0, 0}));
  EXPECT_TRUE(io_error([&] { read_idx_images(f); }, f, {"magic", "0x00000D03"}));
}

TEST(Idx, RejectsWrongDimensionCount) {
  TempDir dir;
  const std::string labels_as_images =
      write(dir.file("labels.gz"), idx_bytes(kIdxLabelsMagic, {3}, {1, 2, 3}));
  EXPECT_TRUE(
      io_error([&] { read_idx_images(labels_as_images); }, labels_as_images, {"has 1 dimensions", "3"}));
  const std::string images_as_labels = write(dir.file("images"), idx_bytes(kIdxImagesMagic, {1, 1, 1}, {5}));
  EXPECT_TRUE(io_error([&] { read_idx_labels(images_as_labels); }, images_as_labels, {"has 3 dimensions"}));
}

TEST(Idx, RejectsTruncatedHeaderAndPayload) {
  TempDir dir;
  for (const std::string ext : {".gz", ""}) {
    Bytes full = idx_bytes(kIdxImagesMagic, {2, 3, 3}, iota_bytes(18));
    const std::string payload = write(dir.file("short" + ext), Bytes(full.begin(), full.end() - 5));
    EXPECT_TRUE(io_error([&] { read_idx_images(payload); }, payload, {"truncated", "18", "13"}));
    const std::string header = write(dir.file("header" + ext), Bytes(full.begin(), full.begin() + 10));
    EXPECT_TRUE(io_error([&] { read_idx_images(header); }, header, {"truncated header", "16", "10"}));
    const std::string empty = write(dir.file("empty" + ext), {});
    EXPECT_TRUE(io_error([&] { read_idx_images(empty); }, empty, {"truncated header"}));
  }
}

TEST(Idx, RejectsTruncatedGzipStream) {
  TempDir dir;
  const std::string whole =
      write(dir.file("whole.gz"), idx_bytes(kIdxImagesMagic, {50, 20, 20}, iota_bytes(20000)));
  std::ifstream in(whole, std::ios::binary);
  Bytes compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string cut =
      write(dir.file("cut.gz.part"), Bytes(compressed.begin(), compressed.begin() + compressed.size() / 2));
  EXPECT_TRUE(io_error([&] { read_idx_images(cut); }, cut, {}));
}

TEST(Idx, RejectsCorruptGzipData) {
  TempDir dir;
  const std::string whole = write(dir.file("whole.gz"), idx_bytes(kIdxLabelsMagic, {4000}, iota_bytes(4000)));
  std::ifstream in(whole, std::ios::binary);
  Bytes compressed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  compressed[compressed.size() - 6] ^= 0xFF;  // inside the CRC-32 trailer
  const std::string bad = write(dir.file("bad.gz.raw"), compressed);
  EXPECT_TRUE(io_error([&] { read_idx_labels(bad); }, bad, {"read error"}));
}

TEST(Idx, RejectsTrailingBytes) {
  TempDir dir;
  for (const std::string ext : {".gz", ""}) {
    Bytes bytes = idx_bytes(kIdxLabelsMagic, {3}, {1, 2, 3});
    bytes.push_back(0);
    bytes.push_back(0);
    const std::string p = write(dir.file("trailing" + ext), bytes);
    EXPECT_TRUE(io_error([&] { read_idx_labels(p); }, p, {"2 trailing bytes"}));
  }
}

TEST(Idx, RejectsHugeDimensionsBeforeAllocating) {
  TempDir dir;
  // An IOError (not OutOfMemoryError / bad_alloc) shows the reader never tried to allocate.
  const std::string count = write(dir.file("count.gz"), idx_bytes(kIdxImagesMagic, {100000001, 1, 1}, {}));
  EXPECT_TRUE(io_error([&] { read_idx_images(count); }, count, {"item count 100000001"}));
  const std::string rows = write(dir.file("rows.gz"), idx_bytes(kIdxImagesMagic, {1, 5000, 1}, {}));
  EXPECT_TRUE(io_error([&] { read_idx_images(rows); }, rows, {"row count 5000"}));
  const std::string cols = write(dir.file("cols"), idx_bytes(kIdxImagesMagic, {1, 1, 0}, {}));
  EXPECT_TRUE(io_error([&] { read_idx_images(cols); }, cols, {"column count 0"}));
  // Within the per-dimension limits but 1.6 TB of claimed data in a tiny file.
  const std::string big_gz =
      write(dir.file("big.gz"), idx_bytes(kIdxImagesMagic, {100000000, 4096, 4096}, {1}));
  EXPECT_TRUE(io_error([&] { read_idx_images(big_gz); }, big_gz, {"can hold at most"}));
  const std::string big = write(dir.file("big"), idx_bytes(kIdxImagesMagic, {100000000, 4096, 4096}, {1}));
  EXPECT_TRUE(io_error([&] { read_idx_images(big); }, big, {"truncated"}));
  IdxLimits tight;
  tight.max_count = 2;
  const std::string three = write(dir.file("three"), idx_bytes(kIdxLabelsMagic, {3}, {1, 2, 3}));
  EXPECT_TRUE(io_error([&] { read_idx_labels(three, tight); }, three, {"item count 3", "[0, 2]"}));
}

TEST(Idx, RejectsMissingFileAndDirectory) {
  TempDir dir;
  const std::string missing = dir.file("nope.gz");
  EXPECT_TRUE(io_error([&] { read_idx_images(missing); }, missing, {"no such file"}));
  EXPECT_TRUE(io_error([&] { read_idx_labels(dir.str()); }, dir.str(), {"directory"}));
}

TEST(IdxDataset, LoadsPairWithStatistics) {
  TempDir dir;
  const std::string img =
      write(dir.file("img.gz"), idx_bytes(kIdxImagesMagic, {2, 1, 2}, {0, 255, 255, 255}));
  const std::string lab = write(dir.file("lab.gz"), idx_bytes(kIdxLabelsMagic, {2}, {1, 0}));
  const ImageDataset ds = load_idx_dataset(img, lab, 2);
  EXPECT_EQ(ds.images.shape(), (Shape{2, 1, 1, 2}));
  EXPECT_EQ(ds.labels.dtype(), DType::i64);
  EXPECT_EQ(ds.labels.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ds.num_classes, 2);
  ASSERT_EQ(ds.mean.size(), 1u);
  EXPECT_NEAR(ds.mean[0], 0.75, 1e-6);
  EXPECT_NEAR(ds.stddev[0], std::sqrt(0.75 - 0.75 * 0.75), 1e-6);
}

TEST(IdxDataset, RejectsCountMismatch) {
  TempDir dir;
  const std::string img = write(dir.file("img.gz"), idx_bytes(kIdxImagesMagic, {3, 1, 1}, {1, 2, 3}));
  const std::string lab = write(dir.file("lab.gz"), idx_bytes(kIdxLabelsMagic, {2}, {0, 1}));
  EXPECT_TRUE(io_error([&] { load_idx_dataset(img, lab, 10); }, img, {lab, "3 images", "2 labels"}));
}

TEST(IdxDataset, RejectsLabelOutOfRange) {
  TempDir dir;
  const std::string img = write(dir.file("img.gz"), idx_bytes(kIdxImagesMagic, {3, 1, 1}, {1, 2, 3}));
  const std::string lab = write(dir.file("lab.gz"), idx_bytes(kIdxLabelsMagic, {3}, {0, 9, 10}));
  EXPECT_TRUE(io_error([&] { load_idx_dataset(img, lab, 10); }, lab, {"label 10", "index 2", "[0, 10)"}));
  EXPECT_NO_THROW(load_idx_dataset(img, lab, 11));
}

TEST(IdxDataset, MissingFashionMnistSaysHowToInstall) {
  TempDir dir;
  const std::string expected = dir.file("train-images-idx3-ubyte.gz");
  EXPECT_TRUE(io_error([&] { load_fashion_mnist(dir.str(), "train"); }, expected,
                       {"apt-get install dataset-fashion-mnist", "--data-dir"}));
  EXPECT_TRUE(io_error([&] { load_mnist(dir.str(), "test"); }, dir.file("t10k-images-idx3-ubyte.gz"),
                       {"--data-dir"}));
  EXPECT_THROW(load_fashion_mnist(dir.str(), "validation"), ValueError);
}

TEST(IdxDataset, LoadsStandardFileNames) {
  TempDir dir;
  write(dir.file("t10k-images-idx3-ubyte.gz"), idx_bytes(kIdxImagesMagic, {2, 2, 2}, iota_bytes(8)));
  write(dir.file("t10k-labels-idx1-ubyte.gz"), idx_bytes(kIdxLabelsMagic, {2}, {3, 9}));
  const ImageDataset ds = load_mnist(dir.str(), "test");
  EXPECT_EQ(ds.name, "mnist/test");
  EXPECT_EQ(ds.images.shape(), (Shape{2, 1, 2, 2}));
  EXPECT_EQ(ds.num_classes, 10);
  EXPECT_FLOAT_EQ(ds.mean[0], 0.1307f);
  EXPECT_FLOAT_EQ(ds.stddev[0], 0.3081f);
}

}  // namespace
}  // namespace liftoff
