// Shared by the fuzz harnesses: untrusted bytes go through the readers' file paths, so the input is written
// to a per-process scratch file first.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "runtime/error.h"

namespace liftoff::fuzz {

// A scratch path unique to this process (tmpfs when /dev/shm exists: no disk traffic per input).
inline std::string scratch_path(const std::string& tag) {
  const std::filesystem::path base =
      std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
  return (base / ("liftoff_fuzz_" + tag + "_" + std::to_string(::getpid()))).string();
}

inline void write_bytes(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || (size > 0 && std::fwrite(data, 1, size, f) != size) || std::fclose(f) != 0) {
    std::fprintf(stderr, "fuzz harness: cannot write scratch file %s\n", path.c_str());
    std::abort();
  }
}

// The contract under test: a rejected input yields a liftoff::Error whose message is one line naming the
// file. Anything else (another exception type, a crash, a sanitizer report) is a bug.
inline void check_error(const Error& e, const std::string& path) {
  const std::string what = e.what();
  if (what.find('\n') != std::string::npos || what.find(path) == std::string::npos) {
    std::fprintf(stderr, "fuzz harness: bad error message (multi-line or without the file name): %s\n",
                 what.c_str());
    std::abort();
  }
}

[[noreturn]] inline void invariant_failed(const char* what) {
  std::fprintf(stderr, "fuzz harness: invariant violated: %s\n", what);
  std::abort();
}

}  // namespace liftoff::fuzz
