// DecodeLoader on the CPU: batches in order with the folder's labels, pixels equal to the CPU twin applied to
// the decoded files, determinism over worker counts, DCT-scaled decoding close to full-size decoding, and bad
// files counted (skip) or named (error).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "data/decode/decode_loader.h"
#include "decode_test_util.h"
#include "runtime/error.h"

namespace liftoff {
namespace {

using namespace decode_test;

class DecodeLoaderTest : public TempDirTest {
 protected:
  // root/a: 3 JPEGs and a PNG of different sizes; root/b: 2 JPEGs.
  std::shared_ptr<const ImageFolder> make_folder() {
    const struct {
      const char* file;
      int64_t h, w;
      ImageFormat format;
    } files[] = {{"a/0.jpg", 40, 60, ImageFormat::jpg}, {"a/1.jpg", 50, 50, ImageFormat::jpg},
                 {"a/2.png", 30, 45, ImageFormat::png}, {"a/3.jpg", 64, 48, ImageFormat::jpg},
                 {"b/0.jpg", 33, 70, ImageFormat::jpg}, {"b/1.jpg", 48, 40, ImageFormat::jpg}};
    int seed = 0;
    for (const auto& f : files) {
      fs::create_directories((dir_ / f.file).parent_path());
      write_image_file(path(f.file), picture(f.h, f.w, seed++).data(), 3, f.h, f.w, f.format, 90);
    }
    return std::make_shared<const ImageFolder>(dir_.string());
  }

  static DecodeLoaderOptions options(bool train) {
    DecodeLoaderOptions o;
    o.batch = 4;
    o.workers = 2;
    o.prefetch = 2;
    o.shuffle = false;
    o.train = train;
    o.crop.out_height = 16;
    o.crop.out_width = 20;
    o.seed = 17;
    return o;
  }

  static std::vector<Batch> epoch(DecodeLoader& loader, int64_t e) {
    loader.start_epoch(e);
    std::vector<Batch> batches;
    Batch b;
    while (loader.next(b)) batches.push_back(b);
    return batches;
  }
};

void expect_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  const Tensor x = a.contiguous(), y = b.contiguous();
  for (int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(x.data<float>()[i], y.data<float>()[i]) << what << ": element " << i;
  }
}

TEST_F(DecodeLoaderTest, BatchesComeInOrderWithTheFolderLabels) {
  const auto folder = make_folder();
  DecodeLoader loader(folder, options(false));
  EXPECT_EQ(loader.decode_mode(), DecodeMode::cpu);
  EXPECT_NE(loader.describe().find("cpu"), std::string::npos) << loader.describe();
  EXPECT_EQ(loader.batches_per_epoch(), 2);
  const std::vector<Batch> batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 2u);
  int64_t next = 0;
  for (const Batch& b : batches) {
    ASSERT_EQ(b.input.dim(), 4);
    EXPECT_EQ(b.input.size(1), 3);
    EXPECT_EQ(b.input.size(2), 16);
    EXPECT_EQ(b.input.size(3), 20);
    EXPECT_EQ(b.input.dtype(), DType::f32);
    for (size_t i = 0; i < b.indices.size(); ++i) {
      EXPECT_EQ(b.indices[i], next++);
      EXPECT_EQ(b.labels.data<int64_t>()[i], folder->label(b.indices[i]));
    }
  }
  EXPECT_EQ(next, 6);
  const DecodeCounts counts = loader.decode_counts();
  EXPECT_EQ(counts.cpu, 6);
  EXPECT_EQ(counts.skipped, 0);
}

// A shuffling loader begins the next epoch when this one's last batch is out (data/next_epoch_prefetch.h):
// those early batches are the next epoch's exactly, and the route counts cover batches handed out only.
TEST_F(DecodeLoaderTest, TheNextEpochBeginsEarlyAndCountsCoverHandedOutBatches) {
  const auto folder = make_folder();
  DecodeLoaderOptions o = options(true);
  o.shuffle = true;
  DecodeLoader loader(folder, o), fresh(folder, o);
  for (int64_t e = 0; e < 2; ++e) EXPECT_EQ(epoch(loader, e).size(), 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the workers decode epoch 2 meanwhile
  EXPECT_EQ(loader.decode_counts().cpu, 12) << "2 epochs of 6 images; epoch 2's early batches not yet out";
  Batch b;
  EXPECT_FALSE(loader.next(b)) << "epoch 1 is over until start_epoch(2)";
  const std::vector<Batch> early = epoch(loader, 2), reference = epoch(fresh, 2);
  ASSERT_EQ(early.size(), reference.size());
  for (size_t k = 0; k < early.size(); ++k) {
    EXPECT_EQ(early[k].indices, reference[k].indices);
    expect_equal(early[k].input, reference[k].input, "epoch 2 batch " + std::to_string(k));
  }
  EXPECT_EQ(loader.decode_counts().cpu, 18);
}

TEST_F(DecodeLoaderTest, PixelsAreTheTwinOfTheDecodedFiles) {
  const auto folder = make_folder();
  for (const bool train : {false, true}) {
    DecodeLoaderOptions o = options(train);
    o.dct_scaling = false;
    DecodeLoader loader(folder, o);
    const std::vector<Batch> batches = epoch(loader, 3);
    for (const Batch& b : batches) {
      for (size_t i = 0; i < b.indices.size(); ++i) {
        const int64_t index = b.indices[i];
        const std::string& file = folder->path(index);
        const EncodedImage image = read_encoded_image(file);
        const DecodedImage d = decode_encoded_image(file, image, CpuJpegDecoder::auto_);
        const auto h = static_cast<int32_t>(d.height), w = static_cast<int32_t>(d.width);
        const CropDesc desc = make_crop_desc(train, o.seed, 3, index, h, w, h, w, o.crop);
        const Tensor expected = resized_crop_batch(d.pixels.data(), {desc}, 16, 20, 3,
                                                   {0.485f, 0.456f, 0.406f}, {0.229f, 0.224f, 0.225f});
        const int64_t row = static_cast<int64_t>(i);
        expect_equal(b.input.slice(0, row, row + 1), expected,
                     std::string(train ? "train " : "eval ") + file);
      }
    }
  }
}

TEST_F(DecodeLoaderTest, TrainingIsDeterministicAcrossWorkerCounts) {
  const auto folder = make_folder();
  DecodeLoaderOptions o = options(true);
  o.shuffle = true;
  DecodeLoader one(folder, o);
  o.workers = 3;
  o.prefetch = 3;
  DecodeLoader three(folder, o);
  const std::vector<Batch> a = epoch(one, 1), b = epoch(three, 1);
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].indices, b[k].indices);
    expect_equal(a[k].input, b[k].input, "batch " + std::to_string(k));
  }
  // Another epoch: another order and other crops.
  const std::vector<Batch> c = epoch(one, 2);
  bool differs = c[0].indices != a[0].indices;
  if (!differs) {
    const Tensor x = a[0].input.contiguous(), y = c[0].input.contiguous();
    for (int64_t i = 0; i < x.numel() && !differs; ++i) differs = x.data<float>()[i] != y.data<float>()[i];
  }
  EXPECT_TRUE(differs);
}

TEST_F(DecodeLoaderTest, ReducedScaleDecodingStaysCloseToFullSize) {
  // A smooth 256x320 photo-like gradient, evaluated at 32x32: libjpeg-turbo decodes it at 1/8 scale.
  fs::create_directories(dir_ / "c");
  std::vector<uint8_t> chw(3 * 256 * 320);
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 256; ++y) {
      for (int x = 0; x < 320; ++x)
        chw[static_cast<size_t>((c * 256 + y) * 320 + x)] =
            static_cast<uint8_t>(20 + (x * (c + 1) + y) / 3 % 200);
    }
  }
  write_image_file(path("c/big.jpg"), chw.data(), 3, 256, 320, ImageFormat::jpg, 95);
  const auto folder = std::make_shared<const ImageFolder>(dir_.string());
  DecodeLoaderOptions o = options(false);
  o.crop.out_height = o.crop.out_width = 32;
  DecodeLoader scaled(folder, o);
  o.dct_scaling = false;
  DecodeLoader full(folder, o);
  const Tensor a = epoch(scaled, 0)[0].input, b = epoch(full, 0)[0].input;
  double sum = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) sum += std::abs(a.data<float>()[i] - b.data<float>()[i]);
  // In normalised units (1 / (255 * 0.225) per level): on average within 2 levels.
  EXPECT_LT(sum / static_cast<double>(a.numel()), 2.0 / (255.0 * 0.225));
}

TEST_F(DecodeLoaderTest, BadFilesAreSkippedAndCountedOrNamed) {
  make_folder();
  const Bytes good = read_bytes(path("a/0.jpg"));
  write_bytes(path("a/4-truncated.jpg"), Bytes(good.begin(), good.end() - 30));
  write_bytes(path("b/2-not-a-jpeg.jpg"), Bytes{'n', 'o', 't', ' ', 'a', 'n', ' ', 'i', 'm', 'a', 'g', 'e'});
  auto folder = std::make_shared<const ImageFolder>(dir_.string());
  DecodeLoaderOptions o = options(true);
  o.on_bad_sample = BadSamplePolicy::skip;
  DecodeLoader loader(folder, o);
  for (int e = 0; e < 2; ++e) {
    int64_t images = 0;
    for (const Batch& b : epoch(loader, e)) {
      images += b.input.size(0);
      for (const int64_t index : b.indices)
        EXPECT_EQ(folder->path(index).find("truncated"), std::string::npos);
    }
    EXPECT_EQ(images, 6) << "epoch " << e;
  }
  EXPECT_EQ(loader.decode_counts().skipped, 2);
  EXPECT_EQ(loader.stats().skipped_samples, 2);
  ASSERT_EQ(loader.skipped_files().size(), 2u);

  o.on_bad_sample = BadSamplePolicy::error;
  DecodeLoader strict(folder, o);
  strict.start_epoch(0);
  Batch b;
  try {
    while (strict.next(b)) {
    }
    FAIL() << "the truncated file must be an error";
  } catch (const IOError& e) {
    EXPECT_NE(std::string(e.what()).find("4-truncated.jpg"), std::string::npos) << e.what();
  }
}

TEST_F(DecodeLoaderTest, OptionErrors) {
  const auto folder = make_folder();
  DecodeLoaderOptions o = options(true);
  o.channels = 2;
  EXPECT_THROW(DecodeLoader(folder, o), ValueError);
  o = options(true);
  o.input_dtype = DType::bf16;
  EXPECT_THROW(DecodeLoader(folder, o), DTypeError);
  o = options(true);
  o.decode = DecodeMode::gpu;
  EXPECT_THROW(DecodeLoader(folder, o), ValueError);
  EXPECT_EQ(parse_decode_mode("gpu"), DecodeMode::gpu);
  EXPECT_THROW(parse_decode_mode("fpga"), ValueError);
  EXPECT_EQ(parse_nvjpeg_backend("gpu-hybrid"), NvjpegBackend::gpu_hybrid);
  EXPECT_THROW(parse_nvjpeg_backend("default"), ValueError);
}

}  // namespace
}  // namespace liftoff
