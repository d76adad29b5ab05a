// libFuzzer harness for the IDX reader (data/idx.h). Each input is read twice: as the file's bytes (a plain
// or a gzip IDX file, whatever the mutation made of it) and gzip-compressed by the harness, so that mutations
// of the IDX header and payload also reach the reader through zlib with a valid stream around them.
#include <zlib.h>

#include <cstdint>
#include <string>

#include "data/idx.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace liftoff;

void read_both_kinds(const std::string& path) {
  // Small limits keep each run fast; the checks are the same at any limit.
  IdxLimits limits;
  limits.max_count = 1 << 20;
  limits.max_side = 1024;
  try {
    const Tensor images = read_idx_images(path, limits);
    if (images.dim() != 3 || images.dtype() != DType::u8)
      fuzz::invariant_failed("images: u8 [count, rows, cols]");
  } catch (const Error& e) {
    fuzz::check_error(e, path);
  }
  try {
    const Tensor labels = read_idx_labels(path, limits);
    if (labels.dim() != 1 || labels.dtype() != DType::u8) fuzz::invariant_failed("labels: u8 [count]");
  } catch (const Error& e) {
    fuzz::check_error(e, path);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string raw = fuzz::scratch_path("idx_raw");
  static const std::string gz = fuzz::scratch_path("idx_gz") + ".gz";
  fuzz::write_bytes(raw, data, size);
  read_both_kinds(raw);

  gzFile f = gzopen(gz.c_str(), "wb1");
  if (f == nullptr || (size > 0 && gzwrite(f, data, static_cast<unsigned>(size)) != static_cast<int>(size)) ||
      gzclose(f) != Z_OK) {
    fuzz::invariant_failed("cannot write the gzip scratch file");
  }
  read_both_kinds(gz);
  return 0;
}
