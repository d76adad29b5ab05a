#include "ops/conv2d/algorithm_store.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
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

AlgorithmStore::AlgorithmStore(std::string path) : path_(std::move(path)) {}

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
  if (write_failed_) return;
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

}  // namespace liftoff
