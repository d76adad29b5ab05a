// export_images: writes a data set out as an image folder (out/<class>/<index>.png|jpg), so the image-folder
// path (stb_image decoding in the loader's workers) can be exercised on real Fashion-MNIST/MNIST/CIFAR-10
// images, and generates synthetic JPEG/PNG folders of a chosen size for loader benchmarks.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>

#include "data/cifar.h"
#include "data/dataset.h"
#include "data/image_io.h"

namespace {

struct Flags {
  std::string data = "fashion-mnist";
  std::string data_dir;
  std::string split = "train";
  std::string out;
  std::string format = "png";
  int64_t limit = 0;
  int64_t image_size = 64;
  int64_t count = 1000;
  int64_t classes = 10;
  int quality = 90;
  uint64_t seed = 0;
};

// Class folders are zero-padded numbers so that sorting them by name keeps the label order.
std::string class_dir(int64_t label, int64_t classes) {
  const int width = static_cast<int>(std::to_string(std::max<int64_t>(classes - 1, 0)).size());
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", width, static_cast<long long>(label));
  return buf;
}

// Writes rows [0, n) of ds with file numbers first_index + row; returns the count written.
int64_t write_rows(const liftoff::ImageDataset& ds, int64_t n, int64_t first_index, const Flags& f,
                   liftoff::ImageFormat format) {
  namespace fs = std::filesystem;
  const int64_t sample = ds.channels() * ds.height() * ds.width();
  const uint8_t* pixels = ds.images.data<uint8_t>();
  const int64_t* labels = ds.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    const fs::path dir = fs::path(f.out) / class_dir(labels[i], ds.num_classes);
    fs::create_directories(dir);
    const std::string name = std::to_string(first_index + i) + liftoff::image_format_extension(format);
    liftoff::write_image_file((dir / name).string(), pixels + i * sample, ds.channels(), ds.height(),
                              ds.width(), format, f.quality);
  }
  return n;
}

int run(const Flags& f) {
  using namespace liftoff;
  const ImageFormat format = parse_image_format(f.format);
  LIFTOFF_CHECK(format != ImageFormat::bmp, ValueError, "--format must be png or jpg");
  LIFTOFF_CHECK(f.limit >= 0, ValueError, "--limit ", f.limit, " must be >= 0 (0: all)");
  int64_t written = 0;
  if (f.data == "synthetic") {
    LIFTOFF_CHECK(f.image_size >= 1 && f.image_size <= 4096, ValueError, "--image-size ", f.image_size,
                  " must be in [1, 4096]");
    LIFTOFF_CHECK(f.count >= 1, ValueError, "--count ", f.count, " must be >= 1");
    LIFTOFF_CHECK(f.classes >= 1 && f.classes <= 1000, ValueError, "--classes must be in [1, 1000]");
    // Generated in chunks to bound memory at large sizes; each chunk has its own seed (and class templates).
    const int64_t chunk = std::max<int64_t>(1, (int64_t{64} << 20) / (3 * f.image_size * f.image_size));
    for (int64_t begin = 0; begin < f.count; begin += chunk) {
      const int64_t n = std::min(chunk, f.count - begin);
      const ImageDataset ds = make_synthetic_dataset(n, 3, f.image_size, f.image_size, f.classes,
                                                     f.seed + static_cast<uint64_t>(begin / chunk));
      written += write_rows(ds, n, begin, f, format);
    }
  } else {
    ImageDataset ds;
    if (f.data == "fashion-mnist") {
      ds = load_fashion_mnist(f.data_dir.empty() ? kFashionMnistDefaultDir : f.data_dir, f.split);
    } else if (f.data == "mnist") {
      LIFTOFF_CHECK(!f.data_dir.empty(), ValueError, "--data mnist needs --data-dir");
      ds = load_mnist(f.data_dir, f.split);
    } else if (f.data == "cifar10") {
      LIFTOFF_CHECK(!f.data_dir.empty(), ValueError, "--data cifar10 needs --data-dir");
      ds = load_cifar10(f.data_dir, f.split);
    } else {
      throw ValueError("--data '" + f.data + "' is not fashion-mnist, mnist, cifar10 or synthetic");
    }
    const int64_t n = f.limit > 0 ? std::min(f.limit, ds.size()) : ds.size();
    written = write_rows(ds, n, 0, f, format);
  }
  std::printf("wrote %lld %s images to %s\n", static_cast<long long>(written), f.format.c_str(),
              f.out.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"export_images: write a data set as an image folder (out/<class>/<n>.png|jpg)"};
  Flags f;
  app.add_option("--data", f.data, "fashion-mnist | mnist | cifar10 | synthetic")->capture_default_str();
  app.add_option("--data-dir", f.data_dir,
                 "folder of the data set files (fashion-mnist: its Debian location)");
  app.add_option("--split", f.split, "train | test")->capture_default_str();
  app.add_option("--out", f.out, "output folder (created)")->required();
  app.add_option("--format", f.format, "png | jpg")->capture_default_str();
  app.add_option("--limit", f.limit, "write at most N images (0: all)")->capture_default_str();
  app.add_option("--quality", f.quality, "JPEG quality 1..100")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  auto* synth = "synthetic";
  app.add_option("--image-size", f.image_size, "synthetic: side of the square RGB images")
      ->group(synth)
      ->capture_default_str();
  app.add_option("--count", f.count, "synthetic: number of images")->group(synth)->capture_default_str();
  app.add_option("--classes", f.classes, "synthetic: number of classes")->group(synth)->capture_default_str();
  app.add_option("--seed", f.seed, "synthetic: seed")->group(synth)->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help or the usage error
    return code == 0 ? 0 : 2;
  }
  try {
    return run(f);
  } catch (const liftoff::ValueError& e) {
    std::fprintf(stderr, "export_images: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "export_images: %s\n", e.what());
    return 1;
  }
}
