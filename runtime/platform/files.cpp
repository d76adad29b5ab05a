#include "runtime/platform/files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "runtime/error.h"

namespace liftoff::platform {

namespace fs = std::filesystem;

std::string read_file_capped(const std::string& path, int64_t max_bytes, const std::string& what) {
  std::error_code ec;
  LIFTOFF_CHECK(!fs::is_directory(path, ec), IOError, what, " '", path, "': is a directory, expected a file");
  errno = 0;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  LIFTOFF_CHECK(file != nullptr, IOError, what, " '", path, "': cannot open it: ", std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const size_t n = std::fread(buf, 1, sizeof buf, file.get());
    if (n == 0) break;
    out.append(buf, n);
    LIFTOFF_CHECK(static_cast<int64_t>(out.size()) <= max_bytes, IOError, what, " '", path,
                  "': larger than the limit of ", max_bytes,
                  " bytes (read stopped there); is it the right file?");
  }
  LIFTOFF_CHECK(!std::ferror(file.get()), IOError, what, " '", path,
                "': read failed: ", std::strerror(errno));
  return out;
}

std::string writable_file_problem(const std::string& path) {
  if (path.empty()) return "the path is empty";
  std::error_code ec;
  if (fs::is_directory(path, ec)) return "is a directory";
  const bool existed = fs::exists(path, ec);
  errno = 0;
  std::FILE* f = std::fopen(path.c_str(), "ab");
  if (f == nullptr) return std::strerror(errno);
  std::fclose(f);
  if (!existed) fs::remove(path, ec);
  return "";
}

}  // namespace liftoff::platform
