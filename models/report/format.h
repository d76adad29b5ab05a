// Number formatting shared by the report's verdict, table, comparison and HTML page.
#pragma once
#include <cstdint>
#include <string>

namespace liftoff {

std::string format_bytes(int64_t bytes);  // "2.1 GiB"

namespace report_format {
std::string fmt(const char* format, double v);  // printf-style, one double: fmt("%.2f", 1.5) == "1.50"
std::string pct(double fraction);               // 0.61 -> "61%"
bool is_cuda(const std::string& device);        // "cuda" or "cuda:N"
}  // namespace report_format

}  // namespace liftoff
