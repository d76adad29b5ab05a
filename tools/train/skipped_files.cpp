#include "tools/train/skipped_files.h"

#include <cstdio>

#include "runtime/error.h"

namespace liftoff::tools {

namespace {
constexpr size_t kFilesNamed = 3;  // in the threshold's error

std::string percent(int64_t part, int64_t whole) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * static_cast<double>(part) / static_cast<double>(whole));
  return text;
}

std::string path_and_reason(const LoaderReport::SkippedFile& f) {
  return f.path + ": " + f.reason;
}
}  // namespace

SkippedFiles::SkippedFiles(std::vector<std::shared_ptr<const ImageFolder>> folders, double max_bad_fraction)
    : max_bad_fraction_(max_bad_fraction) {
  for (auto& folder : folders) {
    if (folder) folders_.push_back({std::move(folder), 0});
  }
}

void SkippedFiles::check_at_load(int threads) {
  for (const Folder& f : folders_) f.folder->check_files(threads);
  collect("load");
  check_threshold();
}

size_t SkippedFiles::collect(const std::string& when) {
  size_t added = 0;
  for (Folder& f : folders_) {
    for (const SkippedFile& s : f.folder->skipped(f.seen)) {
      found_.push_back({s.path, s.reason, when});
      ++f.seen;
      ++added;
    }
  }
  return added;
}

void SkippedFiles::check_threshold() const {
  for (const Folder& f : folders_) {
    const int64_t bad = f.folder->skipped_count();
    const int64_t total = f.folder->size();
    if (static_cast<double>(bad) <= max_bad_fraction_ * static_cast<double>(total)) continue;
    std::string first;
    const std::vector<SkippedFile> list = f.folder->skipped();
    for (size_t i = 0; i < list.size() && i < kFilesNamed; ++i) {
      first += (i ? "; " : "") + list[i].path + ": " + list[i].reason;
    }
    throw IOError(str_cat(
        "--on-bad-sample skip: ", bad, " of ", total, " files in '", f.folder->root(), "' cannot be read (",
        percent(bad, total), "), more than --max-bad-fraction ", max_bad_fraction_, " allows; first: ", first,
        list.size() > kFilesNamed ? "; ..." : "", ". Fix or remove the files, or raise --max-bad-fraction"));
  }
}

std::string SkippedFiles::load_line() const {
  if (found_.empty()) return "";
  int64_t total = 0;
  for (const Folder& f : folders_) total += f.folder->size();
  return str_cat("skipped ", found_.size(), " of ", total, " files (first: ", path_and_reason(found_.front()),
                 "; full list in --report / --log)");
}

void SkippedFiles::report_new(const std::string& when, MetricsLog* log, bool print) {
  const size_t before = found_.size();
  const size_t added = collect(when);
  if (print && added > 0) {
    int64_t total = 0;
    for (const Folder& f : folders_) total += f.folder->size();
    std::printf("%s: skipped %zu more file%s (%s%s); %zu of %lld in all\n", when.c_str(), added,
                added == 1 ? "" : "s", path_and_reason(found_[before]).c_str(), added > 1 ? "; ..." : "",
                found_.size(), static_cast<long long>(total));
    std::fflush(stdout);
  }
  if (log != nullptr) {
    for (; logged_ < found_.size(); ++logged_) {
      const LoaderReport::SkippedFile& f = found_[logged_];
      log->write(SkippedFileRecord{f.path, f.reason, f.found});
    }
  }
  check_threshold();
}

void SkippedFiles::fill(LoaderReport& loader) {
  collect("end");
  loader.skipped_files = found_;
  loader.files_total = 0;
  for (const Folder& f : folders_) loader.files_total += f.folder->size();
}

}  // namespace liftoff::tools
