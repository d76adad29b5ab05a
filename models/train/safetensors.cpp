#include "models/train/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>
#include <vector>

namespace liftoff {

// The format is little-endian and tensors are copied byte for byte.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;

constexpr const char* kCorruptHint = "the file is damaged, truncated or not a safetensors file";
constexpr size_t kMaxDims = 64;

// Names come from the file: keep messages on one printable line of bounded length.
std::string printable(const std::string& s, size_t max_len = 80) {
  std::string out;
  for (size_t i = 0; i < s.size() && out.size() < max_len; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", c);
      out += buf;
    }
  }
  if (out.size() >= max_len && s.size() > max_len) out += "...";
  return out;
}

struct DTypeSpelling {
  const char* name;
  DType dtype;
};
constexpr DTypeSpelling kDTypes[] = {{"F32", DType::f32},   {"F64", DType::f64}, {"F16", DType::f16},
                                     {"BF16", DType::bf16}, {"I64", DType::i64}, {"I32", DType::i32},
                                     {"U8", DType::u8}};

// Where the bytes come from: memory (fuzzing, tests) or a file.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual uint64_t size() const = 0;
  // Reads exactly n bytes at offset (the caller checked the range against size()).
  virtual void read(uint64_t offset, void* dst, uint64_t n) = 0;
};

class MemorySource : public ByteSource {
 public:
  MemorySource(const void* data, size_t size) : data_(static_cast<const unsigned char*>(data)), size_(size) {}
  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* dst, uint64_t n) override {
    if (n > 0) std::memcpy(dst, data_ + offset, n);
  }

 private:
  const unsigned char* data_;
  size_t size_;
};

[[noreturn]] void fail(const std::string& name, const std::string& what, const char* hint = kCorruptHint) {
  throw IOError(str_cat("safetensors file '", name, "': ", what, "; ", hint));
}

class FileSource : public ByteSource {
 public:
  explicit FileSource(const std::string& path) : path_(path) {
    std::error_code ec;
    const auto status = std::filesystem::status(path, ec);
    if (!std::filesystem::exists(status)) fail(path, "no such file", "check the path");
    if (std::filesystem::is_directory(status))
      fail(path, "is a directory, expected a file", "check the path");
    errno = 0;
    file_ = std::fopen(path.c_str(), "rb");
    if (file_ == nullptr) fail(path, str_cat("cannot open: ", std::strerror(errno)), "check its permissions");
    if (fseeko(file_, 0, SEEK_END) != 0) fail(path, str_cat("cannot seek: ", std::strerror(errno)));
    const off_t end = ftello(file_);
    if (end < 0) fail(path, str_cat("cannot tell its size: ", std::strerror(errno)));
    size_ = static_cast<uint64_t>(end);
  }
  ~FileSource() override {
    if (file_ != nullptr) std::fclose(file_);
  }
  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  uint64_t size() const override { return size_; }
  void read(uint64_t offset, void* dst, uint64_t n) override {
    if (n == 0) return;
    if (fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0 || std::fread(dst, 1, n, file_) != n) {
      // The size was checked up front: the file changed under us or the disk failed.
      fail(path_,
           str_cat("read of ", n, " bytes at offset ", offset, " failed (",
                   std::ferror(file_) ? std::strerror(errno) : "the file shrank while being read", ")"));
    }
  }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t size_ = 0;
};

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// A JSON value that must be a non-negative integer that fits in int64.
bool as_count(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return out <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  }
  if (v.is_number_integer()) {
    const auto s = v.get<int64_t>();
    if (s < 0) return false;
    out = static_cast<uint64_t>(s);
    return true;
  }
  return false;
}

Entry parse_entry(const std::string& file, const std::string& name, const json& info, uint64_t data_size) {
  const std::string where = str_cat("tensor '", printable(name), "'");
  if (!info.is_object()) fail(file, str_cat(where, ": expected an object, found ", info.type_name()));
  for (const auto& [key, value] : info.items()) {
    (void)value;
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail(file, str_cat(where, ": unexpected field '", printable(key), "'"));
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(key)) fail(file, str_cat(where, ": missing field '", key, "'"));
  }
  Entry e;
  e.name = name;

  const json& dtype = info["dtype"];
  if (!dtype.is_string()) fail(file, str_cat(where, ": dtype must be a string, found ", dtype.type_name()));
  const auto& dname = dtype.get_ref<const std::string&>();
  const auto* spelling = std::find_if(std::begin(kDTypes), std::end(kDTypes),
                                      [&](const DTypeSpelling& s) { return dname == s.name; });
  if (spelling == std::end(kDTypes)) {
    fail(file,
         str_cat(where, ": unsupported dtype '", printable(dname),
                 "' (Liftoff reads F32, F64, F16, BF16, I64, I32, U8)"),
         "convert the tensor to a supported dtype before saving");
  }
  e.dtype = spelling->dtype;

  const json& shape = info["shape"];
  if (!shape.is_array()) fail(file, str_cat(where, ": shape must be an array, found ", shape.type_name()));
  if (shape.size() > kMaxDims)
    fail(file,
         str_cat(where, ": shape has ", shape.size(), " dimensions, at most ", kMaxDims, " are supported"));
  // numel * element size must fit in int64; a zero dimension makes the product 0 whatever the others are.
  bool has_zero = false;
  for (const json& d : shape) {
    uint64_t n = 0;
    if (!as_count(d, n)) {
      fail(file, str_cat(where, ": shape ", printable(shape.dump()),
                         " has a dimension that is not an integer in [0, 2^63)"));
    }
    e.shape.push_back(static_cast<int64_t>(n));
    has_zero = has_zero || n == 0;
  }
  uint64_t nbytes = has_zero ? 0 : dtype_size(e.dtype);
  const auto max_bytes = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  for (int64_t d : e.shape) {
    if (has_zero) break;
    if (nbytes > max_bytes / static_cast<uint64_t>(d))
      fail(file,
           str_cat(where, ": shape ", printable(shape.dump()), " of ", dname, " overflows 64-bit sizes"));
    nbytes *= static_cast<uint64_t>(d);
  }

  const json& offsets = info["data_offsets"];
  uint64_t begin = 0, end = 0;
  if (!offsets.is_array() || offsets.size() != 2 || !as_count(offsets[0], begin) ||
      !as_count(offsets[1], end)) {
    fail(file, str_cat(where, ": data_offsets must be [begin, end] with integers >= 0, found ",
                       printable(offsets.dump())));
  }
  if (begin > end)
    fail(file, str_cat(where, ": data_offsets [", begin, ", ", end, "] end before they begin"));
  if (end > data_size) {
    fail(file, str_cat(where, ": data_offsets [", begin, ", ", end, "] run past the end of the data (",
                       data_size, " bytes after the header)"));
  }
  if (end - begin != nbytes) {
    fail(file, str_cat(where, ": shape ", shape_str(e.shape), " of ", dname, " needs ", nbytes,
                       " bytes, data_offsets [", begin, ", ", end, "] hold ", end - begin));
  }
  e.begin = begin;
  e.end = end;
  return e;
}

// The validated header: every tensor's place in the data, and the metadata.
struct Layout {
  uint64_t header_len = 0;
  std::vector<Entry> entries;  // by data offset
  std::map<std::string, std::string> metadata;
};

Layout parse_layout(ByteSource& src, const std::string& file, const SafetensorsLimits& limits) {
  const uint64_t size = src.size();
  if (size < 8)
    fail(file,
         str_cat("too short: ", size, " bytes, a safetensors file starts with an 8-byte header length"));
  unsigned char len_bytes[8];
  src.read(0, len_bytes, 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | len_bytes[i];
  if (header_len > limits.max_header_bytes)
    fail(file,
         str_cat("header length ", header_len, " exceeds the limit of ", limits.max_header_bytes, " bytes"));
  if (header_len > size - 8) {
    fail(file, str_cat("header length ", header_len, " runs past the end of the file (", size,
                       " bytes, so at most ", size - 8, " are left for the header)"));
  }
  if (header_len < 2) fail(file, str_cat("header of ", header_len, " bytes is too short for a JSON object"));
  std::string text(header_len, '\0');
  src.read(8, text.data(), header_len);
  if (text[0] != '{') fail(file, "header does not start with '{'");

  // nlohmann keeps the last of duplicate keys silently; a duplicate tensor name is corruption.
  std::string duplicate;
  std::set<std::string> seen;
  json header;
  try {
    header = json::parse(
        text,
        [&](int depth, json::parse_event_t event, json& parsed) {
          if (event == json::parse_event_t::key && depth == 1 && duplicate.empty() &&
              !seen.insert(parsed.get<std::string>()).second) {
            duplicate = parsed.get<std::string>();
          }
          return true;
        },
        true);
  } catch (const json::exception& e) {
    std::string what = e.what();
    const auto bracket = what.find("] ");
    if (what.rfind("[json.exception.", 0) == 0 && bracket != std::string::npos)
      what = what.substr(bracket + 2);
    fail(file, str_cat("header is not valid JSON: ", printable(what, 200)));
  }
  if (!header.is_object()) fail(file, str_cat("header must be a JSON object, found ", header.type_name()));
  if (!duplicate.empty())
    fail(file, str_cat("the name '", printable(duplicate), "' appears twice in the header"));

  Layout out;
  out.header_len = header_len;
  const uint64_t data_size = size - 8 - header_len;
  std::vector<Entry>& entries = out.entries;
  entries.reserve(header.size());
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") {
      if (!info.is_object()) fail(file, str_cat("__metadata__ must be an object, found ", info.type_name()));
      for (const auto& [key, value] : info.items()) {
        if (!value.is_string()) {
          fail(file, str_cat("__metadata__ must map strings to strings, key '", printable(key), "' holds a ",
                             value.type_name()));
        }
        out.metadata.emplace(key, value.get<std::string>());
      }
      continue;
    }
    entries.push_back(parse_entry(file, name, info, data_size));
  }

  // Python's reader demands that the tensors tile the data exactly: sorted by offset, each begins where the
  // previous ended and the last ends at the end of the file.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < expected) {
      fail(file,
           str_cat("tensor '", printable(e.name), "' (bytes ", e.begin, "..", e.end, ") overlaps tensor '",
                   printable(previous->name), "' (bytes ", previous->begin, "..", previous->end, ")"));
    }
    if (e.begin > expected) {
      fail(file, str_cat("bytes ", expected, "..", e.begin,
                         " of the data belong to no tensor (before tensor '", printable(e.name), "')"));
    }
    expected = e.end;
    previous = &e;
  }
  if (expected != data_size) {
    fail(file,
         str_cat(data_size - expected, " bytes after the last tensor belong to no tensor (data ends at ",
                 expected, ", the file has ", data_size, " data bytes)"));
  }

  return out;
}

SafetensorsFile parse(ByteSource& src, const std::string& file, const SafetensorsLimits& limits) {
  Layout layout = parse_layout(src, file, limits);
  // Everything is in bounds: allocate and read.
  SafetensorsFile out;
  out.metadata = std::move(layout.metadata);
  out.tensors.reserve(layout.entries.size());
  for (const Entry& e : layout.entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype, Device::cpu());
    src.read(8 + layout.header_len + e.begin, t.raw_data(), e.end - e.begin);
    out.tensors.emplace_back(e.name, t);
  }
  return out;
}

struct Prepared {
  std::string header;  // length prefix + JSON + padding
  std::vector<Tensor> host;
};

Prepared prepare(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    auto& meta = header["__metadata__"];
    meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) meta[key] = value;
  }
  Prepared p;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    LIFTOFF_CHECK(!name.empty() && name != "__metadata__", ValueError,
                  "write_safetensors: invalid tensor name '", name, "' (empty or reserved)");
    LIFTOFF_CHECK(names.insert(name).second, ValueError, "write_safetensors: duplicate tensor name '", name,
                  "'");
    LIFTOFF_CHECK(t.defined(), ValueError, "write_safetensors: tensor '", name, "' is undefined");
    Tensor host = t.detach().to(Device::cpu()).contiguous();
    const uint64_t nbytes = host.nbytes();
    header[name] = {{"dtype", safetensors_dtype_name(host.dtype())},
                    {"shape", host.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    p.host.push_back(host);
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw ValueError(
        str_cat("write_safetensors: a tensor name or metadata string is not valid UTF-8 (", e.what(), ")"));
  }
  // Pad so the data starts 8-byte aligned, as Python's writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t len = text.size();
  p.header.resize(8);
  for (int i = 0; i < 8; ++i) p.header[static_cast<size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xFF);
  p.header += text;
  return p;
}

// --- POSIX durable write (the only platform-specific part of this file) ---

[[noreturn]] void write_fail(const std::string& path, const std::string& what, int err) {
  throw IOError(str_cat("cannot write '", path, "': ", what, ": ", std::strerror(err),
                        err == ENOSPC ? "; free disk space or write elsewhere"
                                      : "; check that the directory exists and is writable"));
}

class FileWriter {
 public:
  FileWriter(const std::string& path, const std::string& shown) : path_(path), shown_(shown) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) write_fail(shown_, "cannot create the temporary file", errno);
  }
  ~FileWriter() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileWriter(const FileWriter&) = delete;
  FileWriter& operator=(const FileWriter&) = delete;

  void write(const void* data, size_t n) {
    const char* p = static_cast<const char*>(data);
    while (n > 0) {
      const ssize_t done = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
      if (done < 0) {
        if (errno == EINTR) continue;
        write_fail(shown_, "write failed", errno);
      }
      p += done;
      n -= static_cast<size_t>(done);
    }
  }
  void sync_and_close() {
    if (::fsync(fd_) != 0) write_fail(shown_, "fsync failed", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) write_fail(shown_, "close failed", errno);
  }

 private:
  std::string path_, shown_;
  int fd_ = -1;
};

void sync_directory(const std::string& dir, const std::string& shown) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) write_fail(shown, "cannot open its directory to fsync it", errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) write_fail(shown, "fsync of its directory failed", err);
}

}  // namespace

const char* safetensors_dtype_name(DType dtype) {
  for (const auto& s : kDTypes) {
    if (s.dtype == dtype) return s.name;
  }
  throw ValueError(str_cat("safetensors: no safetensors name for dtype ", dtype_name(dtype)));
}

std::string safetensors_bytes(const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata) {
  const Prepared p = prepare(tensors, metadata);
  std::string out = p.header;
  for (const Tensor& t : p.host) out.append(static_cast<const char*>(t.raw_data()), t.nbytes());
  return out;
}

void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const Prepared p = prepare(tensors, metadata);
  const std::filesystem::path target(path);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  try {
    FileWriter out(tmp, path);
    out.write(p.header.data(), p.header.size());
    for (const Tensor& t : p.host) out.write(t.raw_data(), t.nbytes());
    out.sync_and_close();
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      write_fail(path, "rename of the temporary file failed", errno);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  const auto parent = target.parent_path();
  sync_directory(parent.empty() ? std::string(".") : parent.string(), path);
}

SafetensorsFile read_safetensors(const std::string& path, const SafetensorsLimits& limits) {
  FileSource src(path);
  return parse(src, path, limits);
}

std::map<std::string, std::string> read_safetensors_metadata(const std::string& path,
                                                             const SafetensorsLimits& limits) {
  FileSource src(path);
  return parse_layout(src, path, limits).metadata;
}

SafetensorsFile parse_safetensors(const void* data, size_t size, const std::string& name,
                                  const SafetensorsLimits& limits) {
  MemorySource src(data, size);
  return parse(src, name, limits);
}

}  // namespace liftoff
