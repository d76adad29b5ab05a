// make_jpeg_folder: test and benchmark data for the decode pipeline from real photographs. Each source photo
// is a class; its samples are random crops (area 15-100 %, aspect 3:4 to 4:3) resized to a random longer side
// in [--min-side, --max-side], written as JPEGs of random quality in [--quality-min, --quality-max] with
// mixed chroma subsampling (4:2:0 mostly, 4:2:2, 4:4:4), and a chosen fraction of progressive, grayscale and
// PNG files (what the GPU path routes differently). Deterministic from --seed. Layout:
// OUT/train/<class>/*.jpg and OUT/test/<class>/*.jpg, as `train --data folder --data-dir OUT` reads it.
//
// Photos: --photos FILE..., or by default the JPEGs in /usr/share/backgrounds/ (Debian package
// lomiri-wallpapers-20.04: four photographs, 11 MB: `apt-get install lomiri-wallpapers-20.04`; any other
// photos work as well). Encoding uses libjpeg-turbo (progressive, gray and chroma choices need it; without
// it, stb_image_write's baseline files).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "data/decode/crop.h"
#include "data/decode/image_decode.h"
#include "data/image_io.h"

namespace {

namespace fs = std::filesystem;

struct Flags {
  std::string out;
  std::vector<std::string> photos;
  int64_t train = 200;  // per class
  int64_t test = 50;
  int64_t min_side = 160;
  int64_t max_side = 500;
  int quality_min = 75;
  int quality_max = 95;
  double progressive = 0.1;
  double gray = 0.05;
  double png = 0.02;
  uint64_t seed = 0;
};

struct Photo {
  std::string name;
  liftoff::DecodedImage image;  // RGB
};

std::vector<std::string> default_photos() {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/share/backgrounds", ec)) {
    std::string ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (ext == ".jpg" || ext == ".jpeg") found.push_back(entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

// Decoded once, at a reduced DCT scale that still leaves twice the largest output side.
Photo load_photo(const std::string& path, int64_t max_side) {
  liftoff::ImageLimits limits;
  limits.max_file_bytes = int64_t{1} << 28;
  const liftoff::EncodedImage encoded = liftoff::read_encoded_image(path, limits);
  const double side = static_cast<double>(std::min(encoded.info.height, encoded.info.width));
  const int eighths = liftoff::jpeg_scale_eighths(side, side, 2 * max_side, 2 * max_side);
  Photo p{fs::path(path).stem().string(),
          liftoff::decode_encoded_image(path, encoded, liftoff::CpuJpegDecoder::auto_, eighths)};
  return p;
}

// A random crop of the photo resized so its longer side is in [min_side, max_side] (HWC RGB).
std::vector<uint8_t> sample(const Photo& photo, std::mt19937_64& rng, const Flags& f, int64_t* height,
                            int64_t* width) {
  std::uniform_real_distribution<double> area(0.15, 1.0), log_ratio(std::log(0.75), std::log(4.0 / 3.0));
  const auto ph = static_cast<double>(photo.image.height), pw = static_cast<double>(photo.image.width);
  const double a = area(rng) * ph * pw, r = std::exp(log_ratio(rng));
  const auto ch = static_cast<int64_t>(std::clamp(std::sqrt(a / r), 8.0, ph));
  const auto cw = static_cast<int64_t>(std::clamp(std::sqrt(a * r), 8.0, pw));
  const int64_t top = std::uniform_int_distribution<int64_t>(0, photo.image.height - ch)(rng);
  const int64_t left = std::uniform_int_distribution<int64_t>(0, photo.image.width - cw)(rng);
  const int64_t longer = std::uniform_int_distribution<int64_t>(f.min_side, f.max_side)(rng);
  const double scale = static_cast<double>(longer) / static_cast<double>(std::max(ch, cw));
  *height = std::max<int64_t>(1, static_cast<int64_t>(std::lround(ch * scale)));
  *width = std::max<int64_t>(1, static_cast<int64_t>(std::lround(cw * scale)));
  liftoff::DecodedImage crop;
  crop.height = ch;
  crop.width = cw;
  crop.channels = 3;
  crop.pixels.resize(static_cast<size_t>(ch * cw * 3));
  for (int64_t y = 0; y < ch; ++y) {
    const uint8_t* src = photo.image.pixels.data() + ((top + y) * photo.image.width + left) * 3;
    std::copy(src, src + cw * 3, crop.pixels.data() + y * cw * 3);
  }
  std::vector<uint8_t> chw(static_cast<size_t>(3 * *height * *width));
  liftoff::fit_image(crop, *height, *width, liftoff::ResizeMode::bilinear, chw.data());
  std::vector<uint8_t> hwc(chw.size());
  const int64_t plane = *height * *width;
  for (int64_t i = 0; i < plane; ++i) {
    for (int64_t c = 0; c < 3; ++c)
      hwc[static_cast<size_t>(i * 3 + c)] = chw[static_cast<size_t>(c * plane + i)];
  }
  return hwc;
}

void write_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out.good()) throw liftoff::IOError("make_jpeg_folder: cannot write '" + path + "'");
}

// Writes one sample as a JPEG (or PNG) of random kind; returns its kind for the summary.
std::string write_sample(const std::string& stem, const std::vector<uint8_t>& hwc, int64_t h, int64_t w,
                         std::mt19937_64& rng, const Flags& f) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const double kind = u(rng);
  if (kind < f.png) {
    std::vector<uint8_t> chw(hwc.size());
    for (int64_t i = 0; i < h * w; ++i) {
      for (int64_t c = 0; c < 3; ++c)
        chw[static_cast<size_t>(c * h * w + i)] = hwc[static_cast<size_t>(i * 3 + c)];
    }
    liftoff::write_image_file(stem + ".png", chw.data(), 3, h, w, liftoff::ImageFormat::png);
    return "png";
  }
  liftoff::JpegEncodeOptions o;
  o.quality = std::uniform_int_distribution<int>(f.quality_min, f.quality_max)(rng);
  const bool turbo = liftoff::turbojpeg_available();
  const double chroma = u(rng);
  o.chroma = chroma < 0.7    ? liftoff::JpegChroma::s420
             : chroma < 0.85 ? liftoff::JpegChroma::s422
                             : liftoff::JpegChroma::s444;
  if (turbo && kind < f.png + f.gray) o.chroma = liftoff::JpegChroma::gray;
  o.progressive = turbo && u(rng) < f.progressive;
  if (!turbo) o.chroma = liftoff::JpegChroma::s420;
  write_file(stem + ".jpg", liftoff::encode_jpeg(hwc.data(), h, w, o));
  if (o.chroma == liftoff::JpegChroma::gray) return o.progressive ? "progressive gray" : "gray";
  return o.progressive ? "progressive" : "baseline";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "make_jpeg_folder: JPEG image folders (train/ and test/) from photographs, for tests and benchmarks"};
  Flags f;
  app.add_option("--out", f.out, "output folder (OUT/train/<class>/, OUT/test/<class>/)")->required();
  app.add_option("--photos", f.photos,
                 "source photographs, one class each (default: /usr/share/backgrounds/*.jpg)");
  app.add_option("--train", f.train, "training images per class")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--test", f.test, "test images per class")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app.add_option("--min-side", f.min_side, "smallest longer side")
      ->capture_default_str()
      ->check(CLI::Range(8, 8192));
  app.add_option("--max-side", f.max_side, "largest longer side")
      ->capture_default_str()
      ->check(CLI::Range(8, 8192));
  app.add_option("--quality-min", f.quality_min, "lowest JPEG quality")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--quality-max", f.quality_max, "highest JPEG quality")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--progressive", f.progressive, "fraction of progressive JPEGs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--gray", f.gray, "fraction of grayscale JPEGs")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--png", f.png, "fraction of PNG files")->capture_default_str()->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", f.seed, "random seed")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (f.min_side > f.max_side || f.quality_min > f.quality_max) {
    std::fprintf(stderr, "make_jpeg_folder: --min-side/--quality-min must not exceed the max\n");
    return 2;
  }
  try {
    if (f.photos.empty()) f.photos = default_photos();
    if (f.photos.empty()) {
      std::fprintf(stderr,
                   "make_jpeg_folder: no photos given and none in /usr/share/backgrounds; pass --photos or "
                   "`apt-get install lomiri-wallpapers-20.04`\n");
      return 1;
    }
    std::mt19937_64 rng(f.seed);
    std::map<std::string, int64_t> kinds;
    for (const std::string& path : f.photos) {
      const Photo photo = load_photo(path, f.max_side);
      for (const auto& [split, count] :
           {std::pair<std::string, int64_t>{"train", f.train}, {"test", f.test}}) {
        const fs::path dir = fs::path(f.out) / split / photo.name;
        fs::create_directories(dir);
        for (int64_t i = 0; i < count; ++i) {
          int64_t h = 0, w = 0;
          const std::vector<uint8_t> hwc = sample(photo, rng, f, &h, &w);
          ++kinds[write_sample((dir / (photo.name + "_" + std::to_string(i))).string(), hwc, h, w, rng, f)];
        }
      }
      std::printf("%s: %lld train + %lld test images (source %lldx%lld)\n", photo.name.c_str(),
                  static_cast<long long>(f.train), static_cast<long long>(f.test),
                  static_cast<long long>(photo.image.width), static_cast<long long>(photo.image.height));
    }
    for (const auto& [kind, n] : kinds) std::printf("  %s: %lld\n", kind.c_str(), static_cast<long long>(n));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "make_jpeg_folder: %s\n", e.what());
    return 1;
  }
}
