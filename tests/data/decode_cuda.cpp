// The GPU side of data/decode: the fused crop kernel against its CPU twin (f32 bit for bit, 16-bit within a
// rounding, both layouts), nvJPEG's decode against the CPU decoders on every kind of JPEG (each engine), and
// DecodeLoader on a CUDA device with GPU and CPU decoding against the CPU target. Skips without a GPU, and
// the nvJPEG parts skip without libnvjpeg.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "data/decode/decode_loader.h"
#include "decode_test_util.h"
#include "tests/common/cuda_test.h"
#if LIFTOFF_WITH_CUDA
#include <cuda_runtime.h>

#include "data/decode/crop_cuda.h"
#include "data/decode/nvjpeg_decoder.h"
#include "runtime/cuda/nvjpeg_loader.h"
#endif

namespace liftoff {
namespace {

using namespace decode_test;

#if LIFTOFF_WITH_CUDA

#define LIFTOFF_REQUIRE_NVJPEG()                                                                 \
  do {                                                                                           \
    LIFTOFF_REQUIRE_CUDA();                                                                      \
    if (!cuda::nvjpeg::loaded()) GTEST_SKIP() << "needs nvJPEG: " << cuda::nvjpeg::load_error(); \
  } while (0)

// Logical NCHW f32 values of any tensor (device or host, any layout, any float dtype).
std::vector<float> host_values(const Tensor& t) {
  return t.to(Device::cpu()).contiguous().to(DType::f32).to_vector<float>();
}

// Compares element by element; the message names the first mismatch as (b, c, y, x) with both values.
void expect_close(const Tensor& got, const Tensor& expected, double rel, double abs,
                  const std::string& what) {
  ASSERT_EQ(got.shape(), expected.shape()) << what;
  const std::vector<float> g = host_values(got), e = host_values(expected);
  const int64_t c = got.size(1), h = got.size(2), w = got.size(3);
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = abs + rel * std::abs(e[i]);
    if (!(std::abs(static_cast<double>(g[i]) - e[i]) <= tol)) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  }
  if (bad == 0) return;
  const int64_t i = first;
  ADD_FAILURE() << what << ": " << bad << " of " << g.size() << " values differ; first at (b "
                << i / (c * h * w) << ", c " << i / (h * w) % c << ", y " << i / w % h << ", x " << i % w
                << "): got " << g[static_cast<size_t>(i)] << ", expected " << e[static_cast<size_t>(i)];
}

struct Arena {
  std::vector<uint8_t> bytes;
  std::vector<CropDesc> descs;
};

// Random images of different sizes (1 or 3 channels) with training or evaluation descriptors.
Arena random_arena(bool train, int batch, const ResizedCropConfig& config) {
  std::mt19937 rng(42);
  Arena a;
  for (int b = 0; b < batch; ++b) {
    const int h = 17 + static_cast<int>(rng() % 300), w = 13 + static_cast<int>(rng() % 300);
    const int channels = b % 4 == 3 ? 1 : 3;
    CropDesc d = make_crop_desc(train, 7, 2, 1000 + b, h, w, h, w, config);
    d.channels = channels;
    d.offset = static_cast<int64_t>(a.bytes.size());
    for (int i = 0; i < h * w * channels; ++i) a.bytes.push_back(static_cast<uint8_t>(rng()));
    a.descs.push_back(d);
  }
  return a;
}

Tensor to_device(const std::vector<uint8_t>& bytes) {
  Tensor host = Tensor::empty({static_cast<int64_t>(bytes.size())}, DType::u8, Device::cpu());
  std::copy(bytes.begin(), bytes.end(), host.data<uint8_t>());
  return host.to(Device::cuda(0));
}

#endif

TEST(DecodeCropCuda, KernelEqualsTheCpuTwin) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  ResizedCropConfig config;
  config.out_height = 40;
  config.out_width = 56;
  const std::vector<float> mean3 = {0.485f, 0.456f, 0.406f}, std3 = {0.229f, 0.224f, 0.225f};
  for (const bool train : {true, false}) {
    const Arena a = random_arena(train, 12, config);
    const Tensor pixels = to_device(a.bytes);
    for (const int64_t channels : {int64_t{3}, int64_t{1}}) {
      const std::vector<float> mean = channels == 3 ? mean3 : std::vector<float>{0.5f};
      const std::vector<float> stddev = channels == 3 ? std3 : std::vector<float>{0.25f};
      const Tensor twin = resized_crop_batch(a.bytes.data(), a.descs, 40, 56, channels, mean, stddev);
      const std::string what =
          std::string(train ? "train" : "eval") + ", " + std::to_string(channels) + " channels";
      for (const MemoryFormat format : {MemoryFormat::channels_last, MemoryFormat::contiguous}) {
        const Tensor f32 = cuda::resized_crop_batch_cuda(pixels, a.descs, 40, 56, channels, mean, stddev,
                                                         DType::f32, format);
        if (channels == 3) {
          EXPECT_EQ(f32.is_channels_last(), format == MemoryFormat::channels_last);
        }
        expect_close(f32, twin, 0.0, 0.0, what + ", f32 " + memory_format_name(format) + " (bit for bit)");
      }
      // 16-bit: the f32 value rounded once (half an ulp of the format).
      expect_close(
          cuda::resized_crop_batch_cuda(pixels, a.descs, 40, 56, channels, mean, stddev, DType::bf16), twin,
          1.0 / 256.0, 1e-30, what + ", bf16");
      expect_close(cuda::resized_crop_batch_cuda(pixels, a.descs, 40, 56, channels, mean, stddev, DType::f16),
                   twin, 1.0 / 2048.0, 1e-7, what + ", f16");
    }
  }
#endif
}

#if LIFTOFF_WITH_CUDA
struct Decoded {
  std::vector<uint8_t> pixels;  // HWC RGB
  bool ok = false;
};

// Decodes the files in one nvJPEG batch with an engine of `backend`; empty when that engine is refused.
std::vector<Decoded> nvjpeg_decode(const std::vector<EncodedImage>& images, NvjpegBackend backend,
                                   cuda::JpegDecodeCounts& counts, std::string* refused) {
  std::unique_ptr<cuda::NvjpegDecoder> decoder;
  try {
    decoder = std::make_unique<cuda::NvjpegDecoder>(0, backend);
  } catch (const BackendError& e) {
    *refused = e.what();
    return {};
  }
  size_t total = 0;
  for (const EncodedImage& im : images) total += static_cast<size_t>(im.info.width * im.info.height * 3);
  Tensor out = Tensor::empty({static_cast<int64_t>(total)}, DType::u8, Device::cuda(0));
  std::vector<cuda::JpegDecodeJob> jobs;
  size_t at = 0;
  for (const EncodedImage& im : images) {
    cuda::JpegDecodeJob job;
    job.data = im.bytes.data();
    job.size = im.bytes.size();
    job.width = static_cast<int>(im.info.width);
    job.height = static_cast<int>(im.info.height);
    job.hardware = im.route == GpuRoute::hardware;
    job.dst = out.data<uint8_t>() + at;
    jobs.push_back(job);
    at += static_cast<size_t>(job.width * job.height * 3);
  }
  decoder->decode(jobs, nullptr, counts);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint8_t> host = out.to(Device::cpu()).to_vector<uint8_t>();
  std::vector<Decoded> result;
  at = 0;
  for (const cuda::JpegDecodeJob& job : jobs) {
    const size_t n = static_cast<size_t>(job.width * job.height * 3);
    result.push_back(Decoded{
        std::vector<uint8_t>(host.begin() + static_cast<long>(at), host.begin() + static_cast<long>(at + n)),
        job.ok});
    at += n;
  }
  return result;
}
#endif

TEST(NvjpegCuda, DecodesEveryJpegKindLikeTheCpu) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  if (!cuda::nvjpeg::loaded()) GTEST_SKIP() << "needs nvJPEG: " << cuda::nvjpeg::load_error();
  std::vector<EncodedImage> images;
  std::vector<std::string> names;
  for (const std::string& name : valid_jpegs()) {
    EncodedImage im = read_encoded_image(jpeg_fixture(name));
    if (im.route == GpuRoute::cpu) continue;  // CMYK: the CPU's
    images.push_back(std::move(im));
    names.push_back(name);
  }
  for (const NvjpegBackend backend :
       {NvjpegBackend::hardware, NvjpegBackend::gpu_hybrid, NvjpegBackend::hybrid}) {
    cuda::JpegDecodeCounts counts;
    std::string refused;
    const std::vector<Decoded> got = nvjpeg_decode(images, backend, counts, &refused);
    if (got.empty()) {
      std::printf("nvJPEG %s engine refused: %s\n", decode_backend_name(backend), refused.c_str());
      continue;
    }
    std::printf("nvJPEG %s: hardware %lld, gpu-hybrid %lld, retried batches %lld, failed %lld\n",
                decode_backend_name(backend), static_cast<long long>(counts.hardware),
                static_cast<long long>(counts.gpu_hybrid), static_cast<long long>(counts.batch_retries),
                static_cast<long long>(counts.failed));
    for (size_t i = 0; i < images.size(); ++i) {
      const std::string what = str_cat(names[i], " with the ", decode_backend_name(backend), " engine");
      if (!got[i].ok) {
        // Seen on the H200 (nvJPEG 13.0.1): the hardware decoder object's GPU-hybrid engine refused the
        // progressive JPEG with restart markers; the loader then decodes that file on the CPU (counted). A
        // baseline file must never be refused.
        EXPECT_NE(names[i].find("progressive"), std::string::npos) << what << ": nvJPEG did not decode it";
        continue;
      }
      const DecodedImage cpu = decode_encoded_image(names[i], images[i], CpuJpegDecoder::auto_);
      int max = 0;
      double sum = 0;
      size_t worst = 0;
      for (size_t k = 0; k < cpu.pixels.size(); ++k) {
        const int e = std::abs(int{got[i].pixels[k]} - int{cpu.pixels[k]});
        if (e > max) worst = k;
        max = std::max(max, e);
        sum += e;
      }
      const double mean = sum / static_cast<double>(cpu.pixels.size());
      // Different IDCT and chroma upsampling than libjpeg: a few levels, more at chroma edges.
      EXPECT_LE(max, 24) << what << ": max difference " << max << " at pixel " << worst / 3 << " channel "
                         << worst % 3 << " (nvJPEG " << int{got[i].pixels[worst]} << ", CPU "
                         << int{cpu.pixels[worst]} << ")";
      EXPECT_LE(mean, 2.0) << what << ": mean difference " << mean;
    }
  }
#endif
}

#if LIFTOFF_WITH_CUDA
class DecodeLoaderCuda : public TempDirTest {
 protected:
  std::shared_ptr<const ImageFolder> make_folder() {
    const struct {
      const char* file;
      int64_t h, w;
      ImageFormat format;
    } files[] = {{"a/0.jpg", 120, 160, ImageFormat::jpg},
                 {"a/1.jpg", 150, 150, ImageFormat::jpg},
                 {"a/2.png", 90, 135, ImageFormat::png},
                 {"b/0.jpg", 99, 210, ImageFormat::jpg},
                 {"b/1.jpg", 144, 120, ImageFormat::jpg}};
    int seed = 0;
    for (const auto& f : files) {
      fs::create_directories((dir_ / f.file).parent_path());
      write_image_file(path(f.file), picture(f.h, f.w, seed++).data(), 3, f.h, f.w, f.format, 92);
    }
    // A progressive JPEG for the GPU-hybrid engine and a CMYK one for the CPU fallback.
    fs::copy_file(jpeg_fixture("progressive-420.jpg"), path("b/2.jpg"));
    fs::copy_file(jpeg_fixture("cmyk.jpg"), path("b/3.jpg"));
    return std::make_shared<const ImageFolder>(dir_.string());
  }

  static DecodeLoaderOptions options(DecodeMode mode, Device device) {
    DecodeLoaderOptions o;
    o.batch = 3;
    o.workers = 2;
    o.shuffle = true;
    o.crop.out_height = 48;
    o.crop.out_width = 40;
    o.decode = mode;
    o.dct_scaling = false;
    o.device = device;
    o.seed = 3;
    return o;
  }

  static std::vector<Batch> epoch(DecodeLoader& loader, int64_t e) {
    loader.start_epoch(e);
    std::vector<Batch> out;
    Batch b;
    while (loader.next(b)) out.push_back(b);
    return out;
  }
};
#endif

#if LIFTOFF_WITH_CUDA
TEST_F(DecodeLoaderCuda, CpuDecodeOnTheGpuEqualsTheCpuTarget) {
  LIFTOFF_REQUIRE_CUDA();
  const auto folder = make_folder();
  DecodeLoader gpu(folder, options(DecodeMode::cpu, Device::cuda(0)));
  DecodeLoader cpu(folder, options(DecodeMode::cpu, Device::cpu()));
  const std::vector<Batch> g = epoch(gpu, 1), c = epoch(cpu, 1);
  ASSERT_EQ(g.size(), c.size());
  for (size_t k = 0; k < g.size(); ++k) {
    EXPECT_EQ(g[k].indices, c[k].indices);
    EXPECT_TRUE(g[k].input.is_cuda());
    EXPECT_TRUE(g[k].input.is_channels_last());
    EXPECT_EQ(g[k].labels.to(Device::cpu()).to_vector<int64_t>(), c[k].labels.to_vector<int64_t>());
    expect_close(g[k].input, c[k].input, 0.0, 0.0, "batch " + std::to_string(k) + " (bit for bit)");
  }
}

TEST_F(DecodeLoaderCuda, GpuDecodeMatchesCpuDecode) {
  LIFTOFF_REQUIRE_NVJPEG();
  const auto folder = make_folder();
  DecodeLoader gpu(folder, options(DecodeMode::gpu, Device::cuda(0)));
  std::printf("decode: %s\n", gpu.describe().c_str());
  DecodeLoader cpu(folder, options(DecodeMode::cpu, Device::cuda(0)));
  for (int e = 0; e < 2; ++e) {
    const std::vector<Batch> g = epoch(gpu, e), c = epoch(cpu, e);
    ASSERT_EQ(g.size(), c.size());
    for (size_t k = 0; k < g.size(); ++k) {
      ASSERT_EQ(g[k].indices, c[k].indices);
      // Decoders differ by a few levels: in normalised units 1 / (255 * 0.224) each.
      expect_close(g[k].input, c[k].input, 0.0, 24.0 / (255.0 * 0.224),
                   "epoch " + std::to_string(e) + " batch " + std::to_string(k) + " (nvJPEG vs CPU decode)");
    }
  }
  const DecodeCounts counts = gpu.decode_counts();
  std::printf("routes: hardware %lld, gpu-hybrid %lld, cpu %lld, cpu fallback %lld, retried batches %lld\n",
              static_cast<long long>(counts.hardware), static_cast<long long>(counts.gpu_hybrid),
              static_cast<long long>(counts.cpu), static_cast<long long>(counts.cpu_fallback),
              static_cast<long long>(counts.batch_retries));
  // Per epoch: 5 JPEGs nvJPEG takes, the PNG and the CMYK file on the CPU.
  EXPECT_EQ(counts.hardware + counts.gpu_hybrid + counts.cpu_fallback, 10);
  EXPECT_EQ(counts.cpu, 4);
  EXPECT_EQ(counts.skipped, 0);
}

// Several decode lanes (batches issued at once on their own streams and nvJPEG states) hand out exactly what
// one lane does, also across a restarted epoch; for CPU decoding on the GPU too.
TEST_F(DecodeLoaderCuda, DecodeLanesGiveWhatOneLaneGives) {
  LIFTOFF_REQUIRE_NVJPEG();
  const auto folder = make_folder();
  for (const DecodeMode mode : {DecodeMode::gpu, DecodeMode::cpu}) {
    DecodeLoaderOptions o = options(mode, Device::cuda(0));
    o.batch = 2;
    o.decode_lanes = 1;
    DecodeLoader one(folder, o);
    o.decode_lanes = 3;
    o.workers = 4;
    o.prefetch = 4;  // rounded up to 6: two slots per lane
    DecodeLoader three(folder, o);
    for (int e = 0; e < 3; ++e) {
      if (e == 1) {
        three.start_epoch(7);
        Batch b;
        ASSERT_TRUE(three.next(b));  // the rest of epoch 7 is in flight when epoch 1 starts
      }
      const std::vector<Batch> a = epoch(one, e), b = epoch(three, e);
      ASSERT_EQ(a.size(), b.size());
      for (size_t k = 0; k < a.size(); ++k) {
        ASSERT_EQ(a[k].indices, b[k].indices);
        EXPECT_EQ(a[k].labels.to(Device::cpu()).to_vector<int64_t>(),
                  b[k].labels.to(Device::cpu()).to_vector<int64_t>());
        expect_close(b[k].input, a[k].input, 0.0, 0.0,
                     str_cat(mode == DecodeMode::gpu ? "gpu" : "cpu", " decode, epoch ", e, " batch ", k,
                             " (3 lanes vs 1, bit for bit)"));
      }
    }
  }
}

// Hardware calls of 2 images and half of the baseline files on the GPU-hybrid engine: every image still
// decodes as the CPU decodes it, and the routes add up.
TEST_F(DecodeLoaderCuda, HardwareCallSizeAndShareDecodeEveryImage) {
  LIFTOFF_REQUIRE_NVJPEG();
  const auto folder = make_folder();
  DecodeLoaderOptions o = options(DecodeMode::gpu, Device::cuda(0));
  o.batch = 7;
  o.hardware_batch = 2;
  o.hardware_share = 0.5;
  DecodeLoader gpu(folder, o);
  std::printf("decode: %s\n", gpu.describe().c_str());
  DecodeLoader cpu(folder, options(DecodeMode::cpu, Device::cuda(0)));
  for (int e = 0; e < 2; ++e) {
    const std::vector<Batch> g = epoch(gpu, e), c = epoch(cpu, e);
    std::vector<int64_t> gi, ci;
    for (const Batch& b : g) gi.insert(gi.end(), b.indices.begin(), b.indices.end());
    for (const Batch& b : c) ci.insert(ci.end(), b.indices.begin(), b.indices.end());
    ASSERT_EQ(gi, ci);
    const Tensor gx = g[0].input, cx = c[0].input.slice(0, 0, 3);
    expect_close(gx.slice(0, 0, 3), cx, 0.0, 24.0 / (255.0 * 0.224), "epoch " + std::to_string(e));
  }
  const DecodeCounts counts = gpu.decode_counts();
  EXPECT_EQ(counts.hardware + counts.gpu_hybrid + counts.cpu_fallback, 10);
  EXPECT_EQ(counts.cpu, 4);
  EXPECT_EQ(counts.skipped, 0);
}

TEST_F(DecodeLoaderCuda, HalfInputIsChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  const auto folder = make_folder();
  DecodeLoaderOptions o = options(DecodeMode::auto_, Device::cuda(0));
  o.input_dtype = DType::bf16;
  DecodeLoader loader(folder, o);
  const std::vector<Batch> batches = epoch(loader, 0);
  ASSERT_FALSE(batches.empty());
  EXPECT_EQ(batches[0].input.dtype(), DType::bf16);
  EXPECT_TRUE(batches[0].input.is_channels_last());
  const LoaderStats stats = loader.stats();
  EXPECT_EQ(stats.images, 7);
}

// The images of a run's batches, sorted: each of the folder's files exactly once per epoch.
std::vector<int64_t> sorted_indices(const std::vector<Batch>& batches) {
  std::vector<int64_t> all;
  for (const Batch& b : batches) all.insert(all.end(), b.indices.begin(), b.indices.end());
  std::sort(all.begin(), all.end());
  return all;
}

// The hybrid (--decode auto on CUDA) at a fixed half share, the whole folder in one batch: the batch mixes
// CPU- and nvJPEG-decoded files, every image comes once with its label, within the decoders' tolerance of
// --decode cpu, and the routes add up. The share is of the files nvJPEG could decode: in epoch 0 nothing has
// been seen, the whole batch of 7 counts (round(3.5) = 4 of the 5 decodable files on the CPU); in epoch 1 the
// 5 of 7 seen (round(2.5) = 3).
TEST_F(DecodeLoaderCuda, HybridBatchMixesRoutesAndDeliversEveryImageOnce) {
  LIFTOFF_REQUIRE_NVJPEG();
  const auto folder = make_folder();
  DecodeLoaderOptions o = options(DecodeMode::auto_, Device::cuda(0));
  o.batch = 7;
  o.cpu_share = 0.5;
  DecodeLoader hybrid(folder, o);
  std::printf("decode: %s\n", hybrid.describe().c_str());
  ASSERT_EQ(hybrid.decode_mode(), DecodeMode::hybrid);
  EXPECT_NE(hybrid.describe().find("hybrid CPU"), std::string::npos) << hybrid.describe();
  o.decode = DecodeMode::cpu;
  DecodeLoader cpu(folder, o);
  for (int e = 0; e < 2; ++e) {
    const std::vector<Batch> h = epoch(hybrid, e), c = epoch(cpu, e);
    ASSERT_EQ(h.size(), c.size());
    EXPECT_EQ(sorted_indices(h), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6}));
    for (size_t k = 0; k < h.size(); ++k) {
      ASSERT_EQ(h[k].indices, c[k].indices);
      EXPECT_EQ(h[k].labels.to(Device::cpu()).to_vector<int64_t>(),
                c[k].labels.to(Device::cpu()).to_vector<int64_t>());
      expect_close(h[k].input, c[k].input, 0.0, 24.0 / (255.0 * 0.224),
                   str_cat("epoch ", e, " batch ", k, " (hybrid vs CPU decode)"));
    }
  }
  const DecodeCounts counts = hybrid.decode_counts();
  EXPECT_EQ(counts.hybrid_routable, 10);
  EXPECT_EQ(counts.hybrid_cpu, 4 + 3);
  EXPECT_EQ(counts.cpu, 7 + 4);  // and the PNG and CMYK files of both epochs
  EXPECT_EQ(counts.hardware + counts.gpu_hybrid + counts.cpu_fallback, 1 + 2);
  EXPECT_DOUBLE_EQ(counts.hybrid_share, 0.5);
  EXPECT_DOUBLE_EQ(hybrid.stats().hybrid_cpu_share_mean, 0.7);
}

// The extremes of the share are the fixed routes, bit for bit: 1 is --decode cpu, 0 is --decode gpu.
TEST_F(DecodeLoaderCuda, HybridExtremesAreTheFixedRoutes) {
  LIFTOFF_REQUIRE_NVJPEG();
  const auto folder = make_folder();
  for (const double share : {0.0, 1.0}) {
    DecodeLoaderOptions o = options(DecodeMode::auto_, Device::cuda(0));
    o.cpu_share = share;
    DecodeLoader hybrid(folder, o);
    DecodeLoader fixed(folder, options(share > 0 ? DecodeMode::cpu : DecodeMode::gpu, Device::cuda(0)));
    for (int e = 0; e < 2; ++e) {
      const std::vector<Batch> h = epoch(hybrid, e), f = epoch(fixed, e);
      ASSERT_EQ(h.size(), f.size());
      for (size_t k = 0; k < h.size(); ++k) {
        ASSERT_EQ(h[k].indices, f[k].indices);
        expect_close(h[k].input, f[k].input, 0.0, 0.0, str_cat("share ", share, " epoch ", e, " batch ", k));
      }
    }
  }
}

// The adaptive share over several epochs: every image once per epoch, the share reported, the compute
// stream's waits for the decode timed; --deterministic takes the CPU route and gives its pixels exactly.
TEST_F(DecodeLoaderCuda, AdaptiveHybridAndDeterministicAuto) {
  LIFTOFF_REQUIRE_NVJPEG();
  const auto folder = make_folder();
  DecodeLoaderOptions o = options(DecodeMode::auto_, Device::cuda(0));
  o.batch = 2;
  DecodeLoader hybrid(folder, o);
  for (int e = 0; e < 4; ++e)
    EXPECT_EQ(sorted_indices(epoch(hybrid, e)), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6})) << "epoch " << e;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const DecodeCounts counts = hybrid.decode_counts();
  const LoaderStats stats = hybrid.stats();
  EXPECT_GE(counts.hybrid_share, 0.0);
  EXPECT_LE(counts.hybrid_share, 1.0);
  EXPECT_DOUBLE_EQ(stats.hybrid_cpu_share_final, counts.hybrid_share);
  EXPECT_EQ(counts.hybrid_routable, 20);
  EXPECT_EQ(counts.cpu + counts.hardware + counts.gpu_hybrid + counts.cpu_fallback, 28);
  EXPECT_GT(stats.device_wait_timed, 0);
  EXPECT_GE(stats.device_wait_ms, 0.0);

  o.deterministic = true;
  DecodeLoader deterministic(folder, o);
  EXPECT_EQ(deterministic.decode_mode(), DecodeMode::cpu);
  EXPECT_NE(deterministic.describe().find("deterministic"), std::string::npos) << deterministic.describe();
  o.decode = DecodeMode::cpu;
  o.deterministic = false;
  DecodeLoader cpu(folder, o);
  const std::vector<Batch> d = epoch(deterministic, 0), c = epoch(cpu, 0);
  ASSERT_EQ(d.size(), c.size());
  for (size_t k = 0; k < d.size(); ++k) expect_close(d[k].input, c[k].input, 0.0, 0.0, str_cat("batch ", k));
}
#endif

}  // namespace
}  // namespace liftoff
