#include "data/dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "data/idx.h"
#include "runtime/parallel.h"
#include "runtime/philox.h"
#include "runtime/random.h"

namespace liftoff {

namespace {

// Per-channel mean and standard deviation of pixel / 255 over the whole set.
void compute_stats(ImageDataset& ds) {
  const int64_t n = ds.size(), channels = ds.channels(), plane = ds.height() * ds.width();
  const uint8_t* p = ds.images.data<uint8_t>();
  ds.mean.assign(static_cast<size_t>(channels), 0.0f);
  ds.stddev.assign(static_cast<size_t>(channels), 1.0f);
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0.0, sum_sq = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      const uint8_t* q = p + (i * channels + c) * plane;
      uint64_t s = 0, s2 = 0;
      for (int64_t k = 0; k < plane; ++k) {
        s += q[k];
        s2 += static_cast<uint64_t>(q[k]) * q[k];
      }
      sum += static_cast<double>(s);
      sum_sq += static_cast<double>(s2);
    }
    const double count = static_cast<double>(n * plane) * 255.0;
    const double mean = n * plane > 0 ? sum / count : 0.0;
    const double var = n * plane > 0 ? sum_sq / (count * 255.0) - mean * mean : 0.0;
    ds.mean[static_cast<size_t>(c)] = static_cast<float>(mean);
    // A constant channel would divide by zero; 1 leaves it unscaled.
    ds.stddev[static_cast<size_t>(c)] = var > 1e-12 ? static_cast<float>(std::sqrt(var)) : 1.0f;
  }
}

ImageDataset load_idx_pair(const std::string& images_path, const std::string& labels_path,
                           int64_t num_classes) {
  LIFTOFF_CHECK(num_classes >= 1 && num_classes <= 256, ValueError, "load_idx_dataset: num_classes ",
                num_classes, " is outside [1, 256] (IDX labels are uint8)");
  const Tensor images = read_idx_images(images_path);
  const Tensor raw_labels = read_idx_labels(labels_path);
  const int64_t n = images.size(0);
  LIFTOFF_CHECK(raw_labels.size(0) == n, IOError, "IDX files '", images_path, "' (", n, " images) and '",
                labels_path, "' (", raw_labels.size(0),
                " labels) differ in count; pass the images and labels of the same split");
  LIFTOFF_CHECK(n > 0, IOError, "IDX file '", images_path, "': holds no images; pass a non-empty data set");
  ImageDataset ds;
  ds.name = std::filesystem::path(images_path).filename().string();
  ds.images = images.view({n, 1, images.size(1), images.size(2)});
  ds.labels = Tensor::empty({n}, DType::i64, Device::cpu());
  ds.num_classes = num_classes;
  const uint8_t* src = raw_labels.data<uint8_t>();
  int64_t* dst = ds.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    LIFTOFF_CHECK(src[i] < num_classes, IOError, "IDX file '", labels_path, "': label ",
                  static_cast<int>(src[i]), " at index ", i, " is outside [0, ", num_classes,
                  "); the file is damaged or the number of classes is wrong");
    dst[i] = src[i];
  }
  return ds;
}

ImageDataset load_standard_idx(const std::string& dir, const std::string& split, const char* set_name,
                               const char* missing_hint, float mean, float stddev) {
  LIFTOFF_CHECK(split == "train" || split == "test", ValueError, set_name, ": split '", split,
                "' is not one of train, test");
  const std::string prefix = split == "train" ? "train" : "t10k";
  const std::filesystem::path root(dir);
  const std::string images = (root / (prefix + "-images-idx3-ubyte.gz")).string();
  const std::string labels = (root / (prefix + "-labels-idx1-ubyte.gz")).string();
  for (const std::string& path : {images, labels}) {
    std::error_code ec;
    LIFTOFF_CHECK(std::filesystem::exists(path, ec), IOError, set_name, " file '", path, "' not found; ",
                  missing_hint);
  }
  ImageDataset ds = load_idx_pair(images, labels, 10);
  ds.name = std::string(set_name) + "/" + split;
  ds.mean = {mean};
  ds.stddev = {stddev};
  return ds;
}

}  // namespace

ImageDataset load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                              int64_t num_classes) {
  ImageDataset ds = load_idx_pair(images_path, labels_path, num_classes);
  compute_stats(ds);
  return ds;
}

ImageDataset load_fashion_mnist(const std::string& dir, const std::string& split) {
  return load_standard_idx(
      dir, split, "fashion-mnist",
      "install Debian's dataset-fashion-mnist (apt-get install dataset-fashion-mnist) or pass --data-dir",
      0.2860f, 0.3530f);
}

ImageDataset load_mnist(const std::string& dir, const std::string& split) {
  return load_standard_idx(dir, split, "mnist",
                           "put MNIST's four IDX .gz files (train-/t10k-images-idx3-ubyte.gz, "
                           "train-/t10k-labels-idx1-ubyte.gz) there or pass --data-dir",
                           0.1307f, 0.3081f);
}

ImageDataset make_synthetic_dataset(int64_t n, int64_t channels, int64_t height, int64_t width,
                                    int64_t classes, uint64_t seed) {
  LIFTOFF_CHECK(n >= 1 && n <= 100000000 && channels >= 1 && channels <= 64 && height >= 1 &&
                    height <= 4096 && width >= 1 && width <= 4096 && classes >= 1 && classes <= 100000,
                ValueError, "make_synthetic_dataset: n=", n, " channels=", channels, " height=", height,
                " width=", width, " classes=", classes,
                " out of range (n <= 1e8, channels <= 64, height/width <= 4096, classes <= 1e5, all >= 1)");
  const int64_t sample = channels * height * width;
  LIFTOFF_CHECK(n * sample <= (int64_t{1} << 36), ValueError, "make_synthetic_dataset: ", n, " images of ",
                sample, " bytes exceed the 64 GiB limit; use fewer or smaller images");
  Generator gen(seed);
  const uint64_t label_stream = gen.next_offset();
  const uint64_t template_stream = gen.next_offset();
  const uint64_t noise_stream = gen.next_offset();

  ImageDataset ds;
  ds.name = "synthetic";
  ds.num_classes = classes;
  ds.mean.assign(static_cast<size_t>(channels), 0.5f);
  ds.stddev.assign(static_cast<size_t>(channels), 0.25f);
  ds.labels = Tensor::empty({n}, DType::i64, Device::cpu());
  int64_t* labels = ds.labels.data<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    labels[i] = philox_at(seed, label_stream, static_cast<uint64_t>(i)).v[0] % static_cast<uint64_t>(classes);
  }
  std::vector<uint8_t> templates(static_cast<size_t>(classes * sample));
  for (size_t k = 0; k < templates.size(); ++k) {
    templates[k] = static_cast<uint8_t>(philox_at(seed, template_stream, k).v[0] & 0xFF);
  }
  ds.images = Tensor::empty({n, channels, height, width}, DType::u8, Device::cpu());
  uint8_t* images = ds.images.data<uint8_t>();
  parallel_for(0, n, std::max<int64_t>(1, 65536 / sample), [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const uint8_t* t = templates.data() + labels[i] * sample;
      uint8_t* out = images + i * sample;
      // One Philox block gives the noise of four pixels.
      for (int64_t k = 0; k < sample; k += 4) {
        const Philox4 r =
            philox_at(seed, noise_stream, static_cast<uint64_t>(i * ((sample + 3) / 4) + k / 4));
        for (int64_t j = k; j < std::min(k + 4, sample); ++j) {
          out[j] = static_cast<uint8_t>((3u * t[j] + (r.v[j - k] & 0xFF)) / 4u);
        }
      }
    }
  });
  return ds;
}

}  // namespace liftoff
