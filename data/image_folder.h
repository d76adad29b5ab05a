// Image folders: root/<class>/<file>.png|jpg|jpeg|bmp, classes sorted by name (label = position), files
// sorted within a class. Construction only lists the files (plus one header read when the size or channel
// count is taken from the first image); pixels are decoded lazily by load(), which the DataLoader's workers
// call in parallel. Every image is brought to one size (resized or center-cropped) and channel count.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "data/dataset.h"
#include "data/image_io.h"

namespace liftoff {

enum class BadSamplePolicy { error, skip };

// A file left out under BadSamplePolicy::skip, and why (the IOError's text after "image '<path>': ").
struct SkippedFile {
  std::string path;
  std::string reason;
};
// Parses "error" / "skip" (--on-bad-sample); throws ValueError otherwise.
BadSamplePolicy parse_bad_sample_policy(const std::string& text);

struct ImageFolderOptions {
  int64_t channels = 0;  // 1 or 3; 0: from the first image (gray or gray+alpha -> 1, otherwise 3)
  int64_t height = 0;    // output size; 0: the first image's
  int64_t width = 0;
  ResizeMode resize = ResizeMode::bilinear;  // for images of another size
  BadSamplePolicy on_bad_sample = BadSamplePolicy::error;
  ImageLimits limits;
  // Host bytes that images being decoded at once may take (decode_bytes_estimate of each): load() waits for
  // room, so N workers never hold more; an image that alone needs more is refused (IOError naming it).
  int64_t max_decode_bytes_in_flight = int64_t{2} << 30;
  // Per channel, in units of pixel / 255. Empty: ImageNet's (0.485, 0.456, 0.406) / (0.229, 0.224, 0.225) for
  // 3 channels, 0.5 / 0.25 for 1.
  std::vector<float> mean;
  std::vector<float> stddev;
};

class ImageFolder {
 public:
  // Throws IOError for a missing root, a root without class folders, or a class folder without images.
  explicit ImageFolder(const std::string& root, ImageFolderOptions options = {});

  int64_t size() const { return static_cast<int64_t>(files_.size()); }
  int64_t channels() const { return channels_; }
  int64_t height() const { return height_; }
  int64_t width() const { return width_; }
  int64_t num_classes() const { return static_cast<int64_t>(class_names_.size()); }
  const std::string& root() const { return root_; }
  const std::vector<std::string>& class_names() const { return class_names_; }
  const std::string& path(int64_t index) const { return files_.at(static_cast<size_t>(index)); }
  int64_t label(int64_t index) const { return labels_.at(static_cast<size_t>(index)); }
  const std::vector<float>& mean() const { return mean_; }
  const std::vector<float>& stddev() const { return stddev_; }
  const ImageFolderOptions& options() const { return options_; }

  // Decodes sample `index` into dst (channels * height * width bytes, planar CHW). Thread-safe. A file that
  // cannot be read or decoded throws IOError naming it, or, with BadSamplePolicy::skip, returns false and is
  // remembered (not decoded again, counted once).
  bool load(int64_t index, uint8_t* dst) const;
  // The most decode bytes that were in flight at once so far (<= max_decode_bytes_in_flight).
  int64_t peak_decode_bytes_in_flight() const;
  // Reads every file once and makes the checks load() makes before decoding (header, structure, limits:
  // read_image_info), `threads` files at a time. With BadSamplePolicy::skip the bad files are recorded
  // (never read again) and their count returned; with error the first bad file's IOError is thrown.
  int64_t check_files(int threads) const;
  // Files skipped so far (distinct), and their paths in the order they failed.
  int64_t skipped_count() const;
  std::vector<std::string> skipped_files() const;
  // The same with the reasons, from entry `from` on (the ones recorded since a caller last looked).
  std::vector<SkippedFile> skipped(int64_t from = 0) const;
  bool is_bad(int64_t index) const;
  // Records sample `index` as bad (found by another reader, e.g. the DecodeLoader); counted once.
  void record_bad(int64_t index, const std::string& reason) const;

  // Every image decoded at once, as an in-memory data set (small folders, export, tests). Skipped files are
  // left out.
  ImageDataset load_all() const;

 private:
  std::string root_;
  ImageFolderOptions options_;
  std::vector<std::string> class_names_;
  std::vector<std::string> files_;
  std::vector<int64_t> labels_;
  int64_t channels_ = 0, height_ = 0, width_ = 0;
  std::vector<float> mean_, stddev_;
  // Decode bytes in flight, and the wait for room.
  mutable std::mutex budget_mutex_;
  mutable std::condition_variable budget_cv_;
  mutable int64_t in_flight_ = 0, peak_in_flight_ = 0;
  mutable std::mutex bad_mutex_;
  mutable std::unordered_set<int64_t> bad_;
  mutable std::vector<SkippedFile> bad_files_;
};

}  // namespace liftoff
