#include "ops/conv2d/algorithm_store.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "runtime/config.h"
#include "runtime/error.h"

namespace liftoff {

namespace {
// Bumped when a choice's meaning changes; files of another version are left alone (a new name).
constexpr const char* kFormat = "v1";

bool splits_lines(const std::string& s) {
  return s.find_first_of("\t\r\n") != std::string::npos;
}
}  // namespace

AlgorithmStore::AlgorithmStore(std::string path, bool keeps_new_choices)
    : path_(std::move(path)), keeps_new_choices_(keeps_new_choices) {}

void AlgorithmStore::load_locked() {
  if (loaded_) return;
  loaded_ = true;
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    const size_t tab = line.find('\t');
    if (line.empty() || line[0] == '#' || tab == std::string::npos || tab == 0 || tab + 1 == line.size())
      continue;  // a comment, or a line cut short by a crash mid-write
    entries_[line.substr(0, tab)] = line.substr(tab + 1);
  }
}

std::optional<std::string> AlgorithmStore::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  load_locked();
  const auto it = entries_.find(key);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void AlgorithmStore::add(const std::string& key, const std::string& choice) {
  LIFTOFF_CHECK(!key.empty() && !choice.empty() && !splits_lines(key) && !splits_lines(choice), ValueError,
                "AlgorithmStore: key and choice must be non-empty single fields, got \"", key, "\" / \"",
                choice, "\"");
  std::lock_guard<std::mutex> lock(mutex_);
  load_locked();
  entries_[key] = choice;
  if (!keeps_new_choices_ || write_failed_) return;
  std::error_code ignored;
  const std::filesystem::path file(path_);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ignored);
  const bool fresh = !std::filesystem::exists(file, ignored);
  // One short line per append: concurrent processes (DDP ranks) interleave whole lines.
  std::FILE* out = std::fopen(path_.c_str(), "a");
  bool ok = out != nullptr;
  if (ok) {
    if (fresh)
      std::fprintf(out, "# liftoff convolution algorithms %s: <shape and direction>\\t<choice>\n", kFormat);
    ok = std::fprintf(out, "%s\t%s\n", key.c_str(), choice.c_str()) > 0;
    ok = std::fclose(out) == 0 && ok;
  }
  if (!ok) {
    write_failed_ = true;
    std::fprintf(stderr,
                 "liftoff: warning: cannot write the convolution algorithm store %s; this run's choices are "
                 "not kept (set LIFTOFF_CONV_CACHE to a writable folder, or off)\n",
                 path_.c_str());
  }
}

std::string algorithm_store_path(const std::string& identity) {
  const std::string setting = config::get_string(config::Knob::conv_cache).value_or("auto");
  if (setting == "off") return "";
  std::filesystem::path folder;
  if (setting.empty() || setting == "auto") {
    const std::string xdg = config::get_string(config::Knob::xdg_cache_home).value_or("");
    const std::string home = config::get_string(config::Knob::home).value_or("");
    if (!xdg.empty()) {
      folder = std::filesystem::path(xdg) / "liftoff";
    } else if (!home.empty()) {
      folder = std::filesystem::path(home) / ".cache" / "liftoff";
    } else {
      return "";
    }
  } else {
    folder = setting;
  }
  std::string name = std::string("conv-algorithms-") + kFormat + "-";
  for (const char c : identity) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.';
    name += plain ? c : '_';
  }
  return (folder / (name + ".tsv")).string();
}

std::string profiler_library_in_maps(const std::string& maps) {
  std::istringstream lines(maps);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;  // anonymous mappings, [heap], [stack]
    const std::string path = line.substr(slash);
    std::string lower = path;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::string file = lower.substr(lower.rfind('/') + 1);
    if (file.find("injection") != std::string::npos || lower.find("/nsight") != std::string::npos)
      return path;
  }
  return "";
}

std::string cuda_profiler_evidence() {
  const std::string injection = config::get_string(config::Knob::cuda_injection64_path).value_or("");
  if (!injection.empty()) return "CUDA_INJECTION64_PATH=" + injection;
  std::ifstream in("/proc/self/maps");
  std::stringstream maps;
  maps << in.rdbuf();
  const std::string library = profiler_library_in_maps(maps.str());
  return library.empty() ? "" : library + " is loaded";
}

}  // namespace liftoff
