// safetensors files (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N, N
// bytes of JSON header {"<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {"<key>": "<string>"}}, then the raw little-endian tensor bytes, offsets relative to the
// end of the header. Python's `safetensors` reads what write_safetensors writes and the other way round (for
// the dtypes Liftoff has: F32, F64, F16, BF16, I64, I32, U8).
//
// Files are untrusted input: everything in the header is validated against the file size before any tensor
// is allocated (header length and its cap, JSON syntax, duplicate names, dtype, shape (negative dimensions,
// overflowing products), byte size vs shape, data offsets past the end, overlapping, or leaving bytes that
// belong to no tensor, as Python's reader demands). Every failure is one IOError line: the file, the problem,
// a hint.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "models/nn/module.h"

namespace liftoff {

struct SafetensorsLimits {
  // Python's safetensors refuses headers above 100 MB too; a checkpoint header is a few tens of kB.
  uint64_t max_header_bytes = 100000000;
};

struct SafetensorsFile {
  NamedTensors tensors;  // CPU, contiguous, in file (data offset) order
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (any device/layout; copied to host) and `metadata` to `path` atomically and durably: a
// temporary file in the same directory ("<path>.tmp-<pid>"), fsynced, renamed over `path`, then the directory
// fsynced. A crash leaves either the old file or the new one, never a torn one. Names must be non-empty,
// unique and not "__metadata__" (ValueError). I/O failures (disk full, permissions) throw IOError naming the
// file; the temporary file is removed.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});
// The bytes write_safetensors would write (header padded with spaces to a multiple of 8 bytes, as Python
// does).
std::string safetensors_bytes(const NamedTensors& tensors,
                              const std::map<std::string, std::string>& metadata = {});

// Reads and validates a file. Throws IOError "safetensors file '<path>': <problem>; <hint>".
SafetensorsFile read_safetensors(const std::string& path, const SafetensorsLimits& limits = {});
// The header alone (the same validation, no tensor is read): the metadata, e.g. to tell whose file it is.
std::map<std::string, std::string> read_safetensors_metadata(const std::string& path,
                                                             const SafetensorsLimits& limits = {});
// The same validation on bytes in memory; `name` stands for the file in messages.
SafetensorsFile parse_safetensors(const void* data, size_t size, const std::string& name,
                                  const SafetensorsLimits& limits = {});

// safetensors' dtype names ("F32", "BF16", ...); the parser throws ValueError for others.
const char* safetensors_dtype_name(DType dtype);

}  // namespace liftoff
