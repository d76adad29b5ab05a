#include "models/report/format.h"

#include <cstdio>

namespace liftoff {

namespace report_format {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string pct(double fraction) {
  return fmt("%.0f%%", 100.0 * fraction);
}

bool is_cuda(const std::string& device) {
  return device.rfind("cuda", 0) == 0;
}

}  // namespace report_format

std::string format_bytes(int64_t bytes) {
  using report_format::fmt;
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) return fmt("%.2f GiB", b / (1024.0 * 1024 * 1024));
  if (b >= 1024.0 * 1024) return fmt("%.1f MiB", b / (1024.0 * 1024));
  if (b >= 1024.0) return fmt("%.1f KiB", b / 1024.0);
  return std::to_string(bytes) + " B";
}

}  // namespace liftoff
