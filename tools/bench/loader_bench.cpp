// bench_loader: images/s of the DataLoader alone (no model) against the worker count, for the in-memory IDX
// set and for image folders (e.g. JPEG folders made by export_images or make_jpeg_folder). Each cell: one
// warm-up epoch slice, then the best of `repeats` timed passes over `batches` batches. For folders, also the
// decode pipeline (DecodeLoader) side by side: GPU decode (nvJPEG, per --nvjpeg-backend, --decode-lanes,
// --hardware-batch, --hardware-share) and CPU decode, each decoded and augmented into the device (random
// resized crop to --image-size), and with --cpu-decoders the
// single-thread decode speed of libjpeg-turbo vs stb_image (full size and DCT-scaled) on the folder's files.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/decode/decode_loader.h"
#include "data/image_folder.h"
#include "data/loader.h"
#include "runtime/device_select.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  std::string fashion_dir = liftoff::kFashionMnistDefaultDir;
  std::vector<std::string> folders;
  std::vector<int> workers = {1, 2, 4};
  int64_t batch = 128;
  int64_t batches = 40;
  int prefetch = 0;  // 0: 2 * workers
  int repeats = 2;
  std::string augment = "auto";
  std::string device = "cpu";
  std::vector<std::string> decode = {"gpu", "cpu"};  // DecodeLoader rows per folder ("none": skip)
  std::vector<std::string> nvjpeg_backends = {"auto"};
  std::vector<int> decode_lanes = {2};    // decode rows on CUDA: batches issued at once
  std::vector<int> hardware_batch = {0};  // gpu rows: images per hardware call (0 all, -1 engines x cores)
  std::vector<double> hardware_share = {1.0};  // gpu rows: share of baseline JPEGs on the hardware engine
  int64_t image_size = 224;
  bool fixed_size = true;    // the DataLoader row (every image resized to the first one's size)
  int64_t cpu_decoders = 0;  // > 0: time the CPU decoders on this many of each folder's files
};

double images_per_second(liftoff::BatchSource& loader, int64_t batches, int repeats) {
  double best = 0.0;
  int64_t epoch = 0;
  for (int r = 0; r <= repeats; ++r) {  // r == 0: warm-up (threads started, caches filled)
    loader.start_epoch(epoch++);
    liftoff::Batch b;
    int64_t images = 0, taken = 0;
    const auto start = Clock::now();
    while (taken < batches && loader.next(b)) {
      images += b.input.size(0);
      ++taken;
    }
    liftoff::synchronize(b.input.device());
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (r > 0) best = std::max(best, static_cast<double>(images) / s);
  }
  return best;
}

template <class Make>
void row(const std::string& name, const Flags& f, Make&& make) {
  std::printf("%-34s", name.c_str());
  for (int w : f.workers) {
    liftoff::LoaderOptions o;
    o.epochs = 1;  // each repeat starts from an empty ring (no epoch begun early): the loader's own rate
    o.batch = f.batch;
    o.workers = w;
    o.prefetch = f.prefetch > 0 ? f.prefetch : 2 * w;
    o.augment = liftoff::parse_augment_mode(f.augment);
    o.device = liftoff::Device::parse(f.device);
    auto loader = make(o);
    std::printf(" | %9.0f", images_per_second(*loader, f.batches, f.repeats));
    std::fflush(stdout);
  }
  std::printf("\n");
}

// One DecodeLoader row: images/s per worker count, then what it decoded with.
void decode_row(const std::shared_ptr<const liftoff::ImageFolder>& folder, const Flags& f,
                const std::string& mode, const std::string& backend, int lanes, int hw_batch,
                double hw_share) {
  std::string name = "  decode " + mode;
  if (mode == "gpu") {
    char tuning[64];
    std::snprintf(tuning, sizeof tuning, " (%s, hw batch %d, share %.2f)", backend.c_str(), hw_batch,
                  hw_share);
    name += tuning;
  }
  name += " " + std::to_string(lanes) + " lane" + (lanes > 1 ? "s" : "") + " -> " +
          std::to_string(f.image_size) + "px";
  std::string description;
  row(name, f, [&](const liftoff::LoaderOptions& lo) {
    liftoff::DecodeLoaderOptions o;
    o.epochs = 1;  // as above
    o.batch = lo.batch;
    o.workers = lo.workers;
    o.prefetch = lo.prefetch;
    o.device = lo.device;
    o.decode = liftoff::parse_decode_mode(mode);
    o.decode_lanes = lanes;
    if (mode == "gpu") {
      o.nvjpeg_backend = liftoff::parse_nvjpeg_backend(backend);
      o.hardware_batch = hw_batch;
      o.hardware_share = hw_share;
    }
    o.crop.out_height = o.crop.out_width = f.image_size;
    o.on_bad_sample = liftoff::BadSamplePolicy::skip;
    auto loader = std::make_unique<liftoff::DecodeLoader>(folder, o);
    description = loader->describe();
    return loader;
  });
  std::printf("    %s\n", description.c_str());
}

// DecodeLoader rows of one folder: each --decode mode and --decode-lanes; gpu rows for each
// --nvjpeg-backend, --hardware-batch and --hardware-share.
void decode_rows(const std::shared_ptr<const liftoff::ImageFolder>& folder, const Flags& f) {
  for (const std::string& mode : f.decode) {
    if (mode == "none") continue;
    const bool gpu = mode == "gpu";
    for (const int lanes : f.decode_lanes) {
      for (const std::string& backend : gpu ? f.nvjpeg_backends : std::vector<std::string>{"-"}) {
        for (const int hw_batch : gpu ? f.hardware_batch : std::vector<int>{0}) {
          for (const double hw_share : gpu ? f.hardware_share : std::vector<double>{1.0})
            decode_row(folder, f, mode, backend, lanes, hw_batch, hw_share);
        }
      }
    }
  }
}

// Single-thread decode speed of each CPU decoder on up to `limit` files already in memory.
void cpu_decoder_table(const liftoff::ImageFolder& folder, int64_t limit) {
  std::vector<liftoff::EncodedImage> images;
  for (int64_t i = 0; i < folder.size() && static_cast<int64_t>(images.size()) < limit; ++i) {
    try {
      liftoff::EncodedImage im = liftoff::read_encoded_image(folder.path(i));
      if (im.jpeg.is_jpeg) images.push_back(std::move(im));
    } catch (const liftoff::IOError&) {
    }
  }
  if (images.empty()) return;
  const auto time = [&](liftoff::CpuJpegDecoder decoder, int eighths) {
    double best = 0.0;
    for (int r = 0; r < 3; ++r) {
      const auto start = Clock::now();
      for (const auto& im : images) liftoff::decode_encoded_image("", im, decoder, eighths);
      const double s = std::chrono::duration<double>(Clock::now() - start).count();
      best = std::max(best, static_cast<double>(images.size()) / s);
    }
    return best;
  };
  std::printf("  CPU JPEG decode, 1 thread, %zu files (images/s): stb_image %.0f", images.size(),
              time(liftoff::CpuJpegDecoder::stb, 8));
  if (liftoff::turbojpeg_available()) {
    std::printf(" | libjpeg-turbo %.0f | turbo 1/2 scale %.0f | turbo 1/4 scale %.0f",
                time(liftoff::CpuJpegDecoder::turbo, 8), time(liftoff::CpuJpegDecoder::turbo, 4),
                time(liftoff::CpuJpegDecoder::turbo, 2));
  }
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bench_loader: DataLoader throughput (images/s, no model) vs --workers"};
  Flags f;
  app.add_option("--fashion-dir", f.fashion_dir, "Fashion-MNIST IDX folder ('' to skip)")
      ->capture_default_str();
  app.add_option("--folder", f.folders, "image folder(s) to time (repeatable), e.g. from export_images");
  app.add_option("--workers", f.workers, "worker counts to time")->capture_default_str();
  app.add_option("--batch", f.batch, "batch size")->capture_default_str();
  app.add_option("--batches", f.batches, "timed batches per pass")->capture_default_str();
  app.add_option("--prefetch", f.prefetch, "ring depth (0: 2 x workers)")->capture_default_str();
  app.add_option("--repeats", f.repeats, "timed passes (best is reported)")->capture_default_str();
  app.add_option("--augment", f.augment, "auto | gpu | cpu | none")->capture_default_str();
  app.add_option("--device", f.device, "cpu | cuda[:N]")->capture_default_str();
  app.add_option("--decode", f.decode, "folders: DecodeLoader rows: gpu, cpu (none: skip)")
      ->capture_default_str();
  app.add_option("--nvjpeg-backend", f.nvjpeg_backends, "decode gpu rows: auto, hardware, gpu-hybrid, hybrid")
      ->capture_default_str();
  app.add_option("--decode-lanes", f.decode_lanes, "decode rows on CUDA: batches issued to the GPU at once")
      ->capture_default_str();
  app.add_option(
         "--hardware-batch", f.hardware_batch,
         "decode gpu rows: images per hardware-decoder call (0: all of a batch's, -1: engines x cores)")
      ->capture_default_str();
  app.add_option("--hardware-share", f.hardware_share,
                 "decode gpu rows: share of baseline JPEGs on the hardware engine (the rest: GPU-hybrid)")
      ->capture_default_str();
  app.add_option("--image-size", f.image_size, "decode rows: output side")->capture_default_str();
  app.add_flag("--fixed-size,!--no-fixed-size", f.fixed_size,
               "folders: also the DataLoader row (images resized to the first one's size; default on)");
  app.add_option("--cpu-decoders", f.cpu_decoders,
                 "folders: time libjpeg-turbo vs stb_image on this many files (0: off)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  try {
    std::printf("%-34s", "data set (images/s)");
    for (int w : f.workers) std::printf(" | %2d workers", w);
    std::printf("\n");
    if (!f.fashion_dir.empty()) {
      const liftoff::ImageDataset ds = liftoff::load_fashion_mnist(f.fashion_dir, "train");
      row("fashion-mnist IDX 1x28x28 (memory)", f,
          [&](const liftoff::LoaderOptions& o) { return std::make_unique<liftoff::DataLoader>(ds, o); });
    }
    for (const std::string& dir : f.folders) {
      auto folder = std::make_shared<const liftoff::ImageFolder>(dir);
      const std::string name = "folder " + std::to_string(folder->channels()) + "x" +
                               std::to_string(folder->height()) + "x" + std::to_string(folder->width()) +
                               " (" + std::to_string(folder->size()) + " files)";
      if (f.fixed_size) {
        row(name, f, [&](const liftoff::LoaderOptions& o) {
          return std::make_unique<liftoff::DataLoader>(folder, o);
        });
      } else {
        std::printf("%s\n", name.c_str());
      }
      decode_rows(folder, f);
      if (f.cpu_decoders > 0) cpu_decoder_table(*folder, f.cpu_decoders);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_loader: %s\n", e.what());
    return 1;
  }
}
