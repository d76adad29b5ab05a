// In-memory image classification data sets: every image as uint8 in one tensor, labels as i64.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace liftoff {

// Where Debian's dataset-fashion-mnist package installs the files.
constexpr const char* kFashionMnistDefaultDir = "/usr/share/datasets/fashion-mnist";

struct ImageDataset {
  std::string name;
  Tensor images;  // u8 [N, C, H, W], contiguous, CPU
  Tensor labels;  // i64 [N], CPU, each in [0, num_classes)
  int64_t num_classes = 0;
  // Per channel, in units of pixel / 255 (as torchvision's Normalize after ToTensor).
  std::vector<float> mean;
  std::vector<float> stddev;

  int64_t size() const { return images.size(0); }
  int64_t channels() const { return images.size(1); }
  int64_t height() const { return images.size(2); }
  int64_t width() const { return images.size(3); }
};

// A pair of IDX files (u8 images [N, rows, cols], u8 labels [N]) as a 1-channel data set. Throws IOError
// naming the file when the counts differ or a label is outside [0, num_classes). mean/stddev are computed
// from the images; the name is the images file name.
ImageDataset load_idx_dataset(const std::string& images_path, const std::string& labels_path,
                              int64_t num_classes);

// split: "train" (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz) or "test" (t10k-...). A missing
// file throws IOError with its path and how to get it. Normalisation: 0.2860 / 0.3530 (Fashion-MNIST), 0.1307
// / 0.3081 (MNIST).
ImageDataset load_fashion_mnist(const std::string& dir = kFashionMnistDefaultDir,
                                const std::string& split = "train");
ImageDataset load_mnist(const std::string& dir, const std::string& split = "train");

// Random data for benchmarks: labels uniform in [0, classes); each class has a random template and an image
// is (3 * template + noise) / 4 per pixel, so a model can learn something. Deterministic from seed (Philox
// through a Generator(seed): offset 0 labels, 1 templates, 2 noise). Normalisation 0.5 / 0.25.
ImageDataset make_synthetic_dataset(int64_t n, int64_t channels, int64_t height, int64_t width,
                                    int64_t classes, uint64_t seed);

}  // namespace liftoff
