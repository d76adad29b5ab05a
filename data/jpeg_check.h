// Structural check of a JPEG file before stb_image decodes it. stb_image (Debian's 2.27) trusts parts of the
// file that it never validates, and some of them lead to out-of-bounds memory access:
//  - a scan may use a Huffman table no DHT segment defined: stb then decodes with whatever its (malloc'd,
//    never cleared) table memory held, and a stale table indexes far out of bounds (SEGV found by
//    image_fuzz);
//  - a DHT table may list more than 256 codes: stb writes them past its 256-entry arrays (stb issue #1289).
// The walker follows the file the way stb_image reads it (same marker and segment boundaries, same end of
// each scan's entropy-coded data) and checks what the standard requires of those structures, so files stb
// would mis-decode are rejected first and valid baseline and progressive JPEGs pass untouched.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace liftoff {

// What the walk learnt about the frame (for decoders that route files by kind, data/decode/).
struct JpegFrameInfo {
  bool is_jpeg = false;      // false: not a JPEG (nothing was checked)
  bool progressive = false;  // SOF2; otherwise baseline (SOF0) or extended sequential (SOF1)
  int sof = 0;               // 0xC0, 0xC1 or 0xC2
  int width = 0, height = 0;
  int components = 0;        // 1 to 4
  int h[4] = {}, v[4] = {};  // sampling factors per component
  int scans = 0;
  int adobe_transform = -1;  // APP14 "Adobe" colour transform flag (0, 1, 2), -1 without that segment
};

// Does nothing unless `data` starts with a JPEG start-of-image marker (as stb_image detects one). Throws
// IOError naming `path` for a JPEG whose marker structure is corrupt, truncated or unsupported.
JpegFrameInfo check_jpeg_structure(const std::string& path, const uint8_t* data, size_t size);

}  // namespace liftoff
