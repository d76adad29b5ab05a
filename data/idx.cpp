#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

namespace liftoff {

namespace {

constexpr const char* kCorruptHint =
    "the file is damaged or not an IDX file of this kind; re-download or reinstall it";
// Deflate cannot expand data by more than about 1032:1, so a gzip file of n bytes holds at most this much.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kGzipSlack = 1 << 16;

[[noreturn]] void fail(const std::string& path, const std::string& what, const char* hint = kCorruptHint) {
  throw IOError(str_cat("IDX file '", path, "': ", what, "; ", hint));
}

std::string hex32(uint32_t value) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08X", value);
  return buf;
}

uint32_t big_endian(const unsigned char* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) |
         (static_cast<uint32_t>(p[2]) << 8) | static_cast<uint32_t>(p[3]);
}

class GzReader {
 public:
  explicit GzReader(const std::string& path) : path_(path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) fail(path, "no such file", "check the path");
    if (std::filesystem::is_directory(status))
      fail(path, "is a directory, expected a file", "check the path");
    file_size_ = std::filesystem::file_size(path, ec);
    if (ec) fail(path, str_cat("cannot read its size: ", ec.message()), "check the path and its permissions");
    errno = 0;
    file_ = gzopen(path.c_str(), "rb");
    if (file_ == nullptr) {
      fail(path, str_cat("cannot open: ", errno != 0 ? std::strerror(errno) : "out of memory"),
           "check the path and its permissions");
    }
    gzbuffer(file_, 1 << 18);
    direct_ = gzdirect(file_) == 1;
  }
  ~GzReader() {
    if (file_ != nullptr) gzclose(file_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;

  bool direct() const { return direct_; }
  uint64_t file_size() const { return file_size_; }

  // Reads up to n bytes; returns how many were read (fewer only at the end of the data). Throws on read
  // errors.
  uint64_t read(void* dst, uint64_t n) {
    uint64_t done = 0;
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<uint64_t>(n - done, 1u << 30));
      const int got = gzread(file_, static_cast<char*>(dst) + done, chunk);
      if (got < 0) {
        int errnum = 0;
        const char* message = gzerror(file_, &errnum);
        fail(path_, str_cat("read error after ", done,
                            " bytes: ", errnum == Z_ERRNO ? std::strerror(errno) : message));
      }
      if (got == 0) break;
      done += static_cast<uint64_t>(got);
    }
    return done;
  }

 private:
  std::string path_;
  gzFile file_ = nullptr;
  uint64_t file_size_ = 0;
  bool direct_ = false;
};

const char* kind_name(uint32_t magic) {
  return magic == kIdxImagesMagic ? "u8 images" : "u8 labels";
}

// Reads an IDX file of u8 data with the given magic into a tensor of the dimensions it declares.
Tensor read_idx(const std::string& path, uint32_t magic, const IdxLimits& limits) {
  const int ndims = static_cast<int>(magic & 0xFF);
  GzReader reader(path);
  const uint64_t header_bytes = 4 + 4 * static_cast<uint64_t>(ndims);
  unsigned char header[16];
  const uint64_t got = reader.read(header, header_bytes);
  if (got < 4) fail(path, str_cat("truncated header: expected ", header_bytes, " bytes, found ", got));
  const uint32_t found = big_endian(header);
  if ((found >> 8) != (magic >> 8)) {
    fail(path, str_cat("bad magic number ", hex32(found), ", expected ", hex32(magic), " (", kind_name(magic),
                       ", ", ndims, " dimensions)"));
  }
  if (found != magic) {
    fail(path, str_cat("has ", found & 0xFF, " dimensions (magic ", hex32(found), "), expected ", ndims,
                       " (magic ", hex32(magic), ", ", kind_name(magic), ")"));
  }
  if (got < header_bytes)
    fail(path, str_cat("truncated header: expected ", header_bytes, " bytes, found ", got));

  Shape shape;
  uint64_t payload = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t size = big_endian(header + 4 + 4 * d);
    const int64_t limit = d == 0 ? limits.max_count : limits.max_side;
    const char* what = d == 0 ? "item count" : (d == 1 ? "row count" : "column count");
    if (static_cast<int64_t>(size) > limit || (d > 0 && size == 0)) {
      fail(path,
           str_cat(what, " ", size, " is outside the accepted range [", d == 0 ? 0 : 1, ", ", limit, "]"));
    }
    shape.push_back(static_cast<int64_t>(size));
    payload *= size;  // at most 1e8 * 4096 * 4096 with the default limits: fits in 64 bits
  }

  // The payload must fit in the file before we allocate for it.
  if (reader.direct()) {
    const uint64_t available = reader.file_size() - std::min(reader.file_size(), header_bytes);
    if (available < payload) {
      fail(path, str_cat("truncated data: the header promises ", payload, " bytes after the ", header_bytes,
                         "-byte header, found ", available));
    }
    if (available > payload) {
      fail(path,
           str_cat(available - payload, " trailing bytes after the data: expected the file to end at byte ",
                   header_bytes + payload, ", found ", reader.file_size(), " bytes"));
    }
  } else if (payload > reader.file_size() * kMaxDeflateRatio + kGzipSlack) {
    fail(path,
         str_cat("the header promises ", payload, " bytes of data, but a ", reader.file_size(),
                 "-byte gzip file can hold at most ", reader.file_size() * kMaxDeflateRatio + kGzipSlack));
  }

  Tensor out = Tensor::empty(shape, DType::u8, Device::cpu());
  const uint64_t read = reader.read(out.raw_data(), payload);
  if (read < payload) {
    fail(path, str_cat("truncated data: the header promises ", payload, " bytes, found ", read));
  }
  unsigned char extra[4096];
  uint64_t trailing = 0;
  for (uint64_t n; trailing < (1u << 20) && (n = reader.read(extra, sizeof(extra))) > 0;) trailing += n;
  if (trailing > 0) {
    fail(path, str_cat(trailing >= (1u << 20) ? "at least " : "", trailing,
                       " trailing bytes after the data: expected the data to end after ",
                       header_bytes + payload, " bytes"));
  }
  return out;
}

}  // namespace

Tensor read_idx_images(const std::string& path, const IdxLimits& limits) {
  return read_idx(path, kIdxImagesMagic, limits);
}

Tensor read_idx_labels(const std::string& path, const IdxLimits& limits) {
  return read_idx(path, kIdxLabelsMagic, limits);
}

}  // namespace liftoff
