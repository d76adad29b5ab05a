// Progress output for long runs: a redrawn bar on a terminal, plain periodic lines otherwise (logs, CI).
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace liftoff::tools {

bool stdout_is_terminal();

// "0:07", "12:03", "1:02:03" (hours, minutes, seconds; rounded to whole seconds).
std::string format_duration(double seconds);

class ProgressLine {
 public:
  // min_interval_s: at most one update per interval when writing plain lines (a terminal redraws faster).
  explicit ProgressLine(double min_interval_s = 5.0);
  // True when an update is due now (callers compute expensive fields, e.g. the loss, only then).
  bool due();
  // Draws the bar "label [#####.....] done/total text" (terminal) or prints the line (plain).
  void update(const std::string& label, int64_t done, int64_t total, const std::string& text);
  // Ends a terminal bar with a newline (no-op for plain output).
  void finish();
  // A line of its own (e.g. "checkpoint saved"): above the bar on a terminal, which the next update redraws.
  void message(const std::string& line);

 private:
  bool terminal_;
  double min_interval_s_;
  std::chrono::steady_clock::time_point last_;
  bool drawn_ = false;
  bool first_ = true;
};

}  // namespace liftoff::tools
