// Small text helpers for train's output lines.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace liftoff::tools {

// printf of one double, e.g. fmt("%.4f", loss).
inline std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// 1234567 -> "1,234,567".
inline std::string with_commas(int64_t n) {
  std::string s = std::to_string(n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace liftoff::tools
