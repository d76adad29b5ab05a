// Reading and writing files the user names, with bounds: a reader never grows without limit (a path to
// /dev/zero, a FIFO or a huge file ends with a clear error), and an output path is checked before the work
// that produces it.
#pragma once
#include <cstdint>
#include <string>

namespace liftoff::platform {

// The whole file, at most max_bytes. Throws IOError "<what> '<path>': ..." when it cannot be opened, is a
// directory, or holds more than max_bytes (reading stops at max_bytes + 1, so endless files end too).
std::string read_file_capped(const std::string& path, int64_t max_bytes, const std::string& what);

// "" when `path` can be written (opened for appending: an existing file is left unchanged, a file this call
// created is removed again), else the reason ("is a directory", "No such file or directory", ...).
std::string writable_file_problem(const std::string& path);

}  // namespace liftoff::platform
