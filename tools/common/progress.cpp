#include "tools/common/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace liftoff::tools {

bool stdout_is_terminal() {
  return isatty(STDOUT_FILENO) != 0;
}

std::string format_duration(double seconds) {
  const auto total = static_cast<long long>(std::llround(std::max(0.0, seconds)));
  const long long h = total / 3600, m = total / 60 % 60, s = total % 60;
  char text[48];
  if (h > 0) {
    std::snprintf(text, sizeof text, "%lld:%02lld:%02lld", h, m, s);
  } else {
    std::snprintf(text, sizeof text, "%lld:%02lld", m, s);
  }
  return text;
}

ProgressLine::ProgressLine(double min_interval_s)
    : terminal_(stdout_is_terminal()),
      min_interval_s_(terminal_ ? 0.2 : min_interval_s),
      last_(std::chrono::steady_clock::now()) {}

bool ProgressLine::due() {
  const auto now = std::chrono::steady_clock::now();
  if (first_ || std::chrono::duration<double>(now - last_).count() >= min_interval_s_) {
    first_ = false;
    last_ = now;
    return true;
  }
  return false;
}

void ProgressLine::update(const std::string& label, int64_t done, int64_t total, const std::string& text) {
  if (terminal_) {
    constexpr int kWidth = 24;
    const int filled = total > 0 ? static_cast<int>(kWidth * std::min<int64_t>(done, total) / total) : 0;
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    std::printf("\r%s [%s] %lld/%lld %s\033[K", label.c_str(), bar.c_str(), static_cast<long long>(done),
                static_cast<long long>(total), text.c_str());
    drawn_ = true;
  } else {
    std::printf("%s %lld/%lld %s\n", label.c_str(), static_cast<long long>(done),
                static_cast<long long>(total), text.c_str());
  }
  std::fflush(stdout);
}

void ProgressLine::finish() {
  if (terminal_ && drawn_) std::printf("\n");
  drawn_ = false;
  first_ = true;
  std::fflush(stdout);
}

void ProgressLine::message(const std::string& line) {
  std::printf(terminal_ && drawn_ ? "\r%s\033[K\n" : "%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace liftoff::tools
