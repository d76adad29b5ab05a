// bench_loader: images/s of the DataLoader alone (no model) against the worker count, for the in-memory IDX
// set and for image folders (e.g. JPEG folders made by export_images). Each cell: one warm-up epoch slice,
// then the best of `repeats` timed passes over `batches` batches.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
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
      row(name, f,
          [&](const liftoff::LoaderOptions& o) { return std::make_unique<liftoff::DataLoader>(folder, o); });
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_loader: %s\n", e.what());
    return 1;
  }
}
