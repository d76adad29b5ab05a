#include "data/image_folder.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include "runtime/platform/thread_name.h"

namespace liftoff {

namespace fs = std::filesystem;

namespace {
// The reason alone: image_io's errors start with "image '<path>': ".
std::string reason_of(const std::string& path, const std::string& message) {
  const std::string prefix = "image '" + path + "': ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

bool is_image_file(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}
}  // namespace

BadSamplePolicy parse_bad_sample_policy(const std::string& text) {
  if (text == "error") return BadSamplePolicy::error;
  if (text == "skip") return BadSamplePolicy::skip;
  throw ValueError(str_cat("on-bad-sample '", text, "' is not error or skip"));
}

ImageFolder::ImageFolder(const std::string& root, ImageFolderOptions options)
    : root_(root), options_(std::move(options)) {
  std::error_code ec;
  LIFTOFF_CHECK(fs::is_directory(root_, ec), IOError, "image folder '", root_,
                "' not found or not a directory; expected root/<class>/<image files>");
  std::vector<fs::path> class_dirs;
  for (const auto& entry : fs::directory_iterator(root_, ec)) {
    if (entry.is_directory(ec)) class_dirs.push_back(entry.path());
  }
  LIFTOFF_CHECK(!ec, IOError, "image folder '", root_, "': cannot list it: ", ec.message());
  LIFTOFF_CHECK(!class_dirs.empty(), IOError, "image folder '", root_,
                "' has no class folders; expected root/<class>/<image files>");
  std::sort(class_dirs.begin(), class_dirs.end());
  for (const fs::path& dir : class_dirs) {
    std::vector<std::string> files;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      if (entry.is_regular_file(ec) && is_image_file(entry.path())) files.push_back(entry.path().string());
    }
    LIFTOFF_CHECK(!ec, IOError, "class folder '", dir.string(), "': cannot list it: ", ec.message());
    LIFTOFF_CHECK(!files.empty(), IOError, "class folder '", dir.string(),
                  "' holds no images (.png, .jpg, .jpeg, .bmp); remove it or add images");
    std::sort(files.begin(), files.end());
    const auto label = static_cast<int64_t>(class_names_.size());
    class_names_.push_back(dir.filename().string());
    for (std::string& f : files) {
      files_.push_back(std::move(f));
      labels_.push_back(label);
    }
  }

  LIFTOFF_CHECK(options_.max_decode_bytes_in_flight > 0, ValueError,
                "image folder: max_decode_bytes_in_flight must be > 0, got ",
                options_.max_decode_bytes_in_flight);
  channels_ = options_.channels;
  height_ = options_.height;
  width_ = options_.width;
  LIFTOFF_CHECK(channels_ == 0 || channels_ == 1 || channels_ == 3, ValueError, "image folder: channels ",
                channels_, " must be 1 or 3 (or 0: from the first image)");
  LIFTOFF_CHECK(height_ >= 0 && width_ >= 0 && height_ <= options_.limits.max_side &&
                    width_ <= options_.limits.max_side && (height_ == 0) == (width_ == 0),
                ValueError, "image folder: image size ", height_, "x", width_, " must be in [1, ",
                options_.limits.max_side, "] per side (or 0x0: from the first image)");
  if (channels_ == 0 || height_ == 0) {
    // The first readable header decides; an unreadable first file is the same error load() would give.
    for (size_t i = 0; i < files_.size(); ++i) {
      try {
        const ImageInfo info = read_image_info(files_[i], options_.limits);
        if (channels_ == 0) channels_ = info.channels <= 2 ? 1 : 3;
        if (height_ == 0) {
          height_ = info.height;
          width_ = info.width;
        }
        break;
      } catch (const IOError&) {
        if (options_.on_bad_sample == BadSamplePolicy::error) throw;
      }
    }
    LIFTOFF_CHECK(channels_ != 0 && height_ != 0, IOError, "image folder '", root_,
                  "': no image has a readable header");
  }

  mean_ = options_.mean;
  stddev_ = options_.stddev;
  if (mean_.empty() && stddev_.empty()) {
    if (channels_ == 3) {
      mean_ = {0.485f, 0.456f, 0.406f};
      stddev_ = {0.229f, 0.224f, 0.225f};
    } else {
      mean_ = {0.5f};
      stddev_ = {0.25f};
    }
  }
  LIFTOFF_CHECK(
      static_cast<int64_t>(mean_.size()) == channels_ && static_cast<int64_t>(stddev_.size()) == channels_,
      ValueError, "image folder: ", channels_, " channels but ", mean_.size(), " mean and ", stddev_.size(),
      " std values");
}

bool ImageFolder::load(int64_t index, uint8_t* dst) const {
  LIFTOFF_CHECK(index >= 0 && index < size(), ValueError, "image folder '", root_, "': sample index ", index,
                " is outside [0, ", size(), ")");
  if (options_.on_bad_sample == BadSamplePolicy::skip && is_bad(index)) return false;
  const std::string& path = files_[static_cast<size_t>(index)];
  // Decode bytes this call holds, given back however it ends (exceptions included).
  struct Held {
    std::mutex& mutex;
    std::condition_variable& cv;
    int64_t& in_flight;
    int64_t bytes = 0;
    ~Held() {
      if (bytes == 0) return;
      {
        std::lock_guard<std::mutex> lock(mutex);
        in_flight -= bytes;
      }
      cv.notify_all();
    }
  } held{budget_mutex_, budget_cv_, in_flight_};
  const auto take = [&](const ImageInfo& info) {
    const int64_t need = decode_bytes_estimate(info, channels_);
    const int64_t cap = options_.max_decode_bytes_in_flight;
    LIFTOFF_CHECK(
        need <= cap, IOError, "image '", path, "': decoding its ", info.width, "x", info.height,
        " pixels takes about ", need >> 20, " MiB, more than the limit of ", cap >> 20,
        " MiB for images decoded at once (train: --decode-memory-mb); shrink the image or raise the "
        "limit");
    std::unique_lock<std::mutex> lock(budget_mutex_);
    budget_cv_.wait(lock, [&] { return in_flight_ + need <= cap; });
    in_flight_ += need;
    peak_in_flight_ = std::max(peak_in_flight_, in_flight_);
    held.bytes = need;
  };
  try {
    const DecodedImage image = decode_image_file(path, channels_, options_.limits, take);
    fit_image(image, height_, width_, options_.resize, dst);
    return true;
  } catch (const IOError& e) {
    if (options_.on_bad_sample == BadSamplePolicy::error) throw;
    record_bad(index, e.what());
    return false;
  }
}

int64_t ImageFolder::check_files(int threads) const {
  const auto recorded_before = static_cast<std::ptrdiff_t>(skipped_count());
  std::atomic<int64_t> next{0};
  std::mutex error_mutex;
  std::exception_ptr first_error;
  const auto work = [&] {
    for (int64_t i = next++; i < size(); i = next++) {
      if (is_bad(i)) continue;
      try {
        read_image_info(files_[static_cast<size_t>(i)], options_.limits);
      } catch (const IOError& e) {
        if (options_.on_bad_sample == BadSamplePolicy::skip) {
          record_bad(i, e.what());
          continue;
        }
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
        next = size();  // the others stop too
      }
    }
  };
  std::vector<std::thread> pool;
  const int extra = std::max(1, std::min<int>(threads, static_cast<int>(std::min<int64_t>(size(), 256)))) - 1;
  for (int t = 0; t < extra; ++t) {
    pool.emplace_back([&work, t] {
      platform::set_current_thread_name("lo-check-" + std::to_string(t + 1));
      work();
    });
  }
  work();
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
  // In file order, whichever thread found them: the list and "first" do not depend on timing.
  std::lock_guard<std::mutex> lock(bad_mutex_);
  std::stable_sort(bad_files_.begin() + recorded_before, bad_files_.end(),
                   [](const SkippedFile& a, const SkippedFile& b) { return a.path < b.path; });
  return static_cast<int64_t>(bad_.size());
}

bool ImageFolder::is_bad(int64_t index) const {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  return bad_.count(index) != 0;
}

void ImageFolder::record_bad(int64_t index, const std::string& reason) const {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  const std::string& path = files_.at(static_cast<size_t>(index));
  if (bad_.insert(index).second) bad_files_.push_back({path, reason_of(path, reason)});
}

std::vector<SkippedFile> ImageFolder::skipped(int64_t from) const {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  const auto begin = std::min(bad_files_.size(), static_cast<size_t>(std::max<int64_t>(from, 0)));
  return {bad_files_.begin() + static_cast<std::ptrdiff_t>(begin), bad_files_.end()};
}

int64_t ImageFolder::peak_decode_bytes_in_flight() const {
  std::lock_guard<std::mutex> lock(budget_mutex_);
  return peak_in_flight_;
}

int64_t ImageFolder::skipped_count() const {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  return static_cast<int64_t>(bad_.size());
}

std::vector<std::string> ImageFolder::skipped_files() const {
  std::lock_guard<std::mutex> lock(bad_mutex_);
  std::vector<std::string> paths;
  for (const SkippedFile& f : bad_files_) paths.push_back(f.path);
  return paths;
}

ImageDataset ImageFolder::load_all() const {
  const int64_t sample = channels_ * height_ * width_;
  std::vector<uint8_t> pixels(static_cast<size_t>(size() * sample));
  std::vector<int64_t> labels;
  int64_t kept = 0;
  for (int64_t i = 0; i < size(); ++i) {
    if (!load(i, pixels.data() + kept * sample)) continue;
    labels.push_back(label(i));
    ++kept;
  }
  LIFTOFF_CHECK(kept > 0, IOError, "image folder '", root_, "': no image could be decoded");
  ImageDataset ds;
  ds.name = root_;
  ds.num_classes = num_classes();
  ds.images = Tensor::empty({kept, channels_, height_, width_}, DType::u8, Device::cpu());
  std::memcpy(ds.images.data<uint8_t>(), pixels.data(), static_cast<size_t>(kept * sample));
  ds.labels = Tensor::from_vector(labels, {kept});
  ds.mean = mean_;
  ds.stddev = stddev_;
  return ds;
}

}  // namespace liftoff
