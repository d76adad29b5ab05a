// Image files through stb_image (PNG, JPEG, BMP) and stb_image_write. Files are untrusted: the whole file is
// read once (size bounded), its structure is checked (PNG chunk lengths; JPEG markers, tables and scans, see
// data/jpeg_check.h), its header with stbi_info and the dimensions are bounded BEFORE any pixel is decoded.
// Every failure is an IOError naming the file.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace liftoff {

struct JpegFrameInfo;  // data/jpeg_check.h

struct ImageLimits {
  int64_t max_side = 16384;               // width and height
  int64_t max_pixels = int64_t{1} << 28;  // width * height
  int64_t max_file_bytes = int64_t{1} << 30;
};

struct ImageInfo {
  int64_t width = 0;
  int64_t height = 0;
  int64_t channels = 0;  // as stored in the file: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA
};

struct DecodedImage {
  int64_t width = 0;
  int64_t height = 0;
  int64_t channels = 0;         // the requested count (1 or 3)
  std::vector<uint8_t> pixels;  // interleaved HWC
};

// Header only (reads the file, decodes no pixels); throws IOError for an unreadable file, an unknown or
// corrupt header or structure, or dimensions outside the limits.
ImageInfo read_image_info(const std::string& path, const ImageLimits& limits = {});
// Decodes to `channels` (1: gray, stb's luma weights for colour files; 3: RGB, gray replicated; alpha
// dropped) after the same header checks.
DecodedImage decode_image_file(const std::string& path, int64_t channels, const ImageLimits& limits = {});
// The same, calling before_decode(header) after the checks and before any pixel memory is allocated (e.g. to
// wait for room in a budget of decoded bytes, or to refuse the image by throwing).
DecodedImage decode_image_file(const std::string& path, int64_t channels, const ImageLimits& limits,
                               const std::function<void(const ImageInfo&)>& before_decode);
// Host bytes that decoding an image with this header to `channels` takes at its peak, at most (the
// decoder's buffer, up to 16 bits per sample, its output and the returned copy).
int64_t decode_bytes_estimate(const ImageInfo& info, int64_t channels);

// The steps of the two above, for callers that route files themselves (data/decode/): the whole file
// (bounded by limits.max_file_bytes); the header and structure checks (jpeg, when given, receives the JPEG
// walk's frame facts); stb_image decoding of bytes that passed check_image_bytes with `info`.
std::vector<uint8_t> read_image_bytes(const std::string& path, const ImageLimits& limits = {});
ImageInfo check_image_bytes(const std::string& path, const std::vector<uint8_t>& bytes,
                            const ImageLimits& limits = {}, JpegFrameInfo* jpeg = nullptr);
DecodedImage decode_image_bytes(const std::string& path, const std::vector<uint8_t>& bytes,
                                const ImageInfo& info, int64_t channels);

enum class ResizeMode { bilinear, center_crop };
// Writes `image` as planar CHW uint8 [channels, height, width] into dst. Same size: a copy. Otherwise
// bilinear: half-pixel centres (as OpenCV's INTER_LINEAR / PyTorch align_corners=false, no antialiasing),
// rounded to nearest; center_crop: the centre height x width window, zero where the image is smaller.
void fit_image(const DecodedImage& image, int64_t height, int64_t width, ResizeMode mode, uint8_t* dst);

enum class ImageFormat { png, jpg, bmp };
// Parses "png", "jpg" / "jpeg", "bmp"; throws ValueError otherwise.
ImageFormat parse_image_format(const std::string& text);
const char* image_format_extension(ImageFormat format);  // ".png", ".jpg", ".bmp"
// Writes planar CHW uint8 pixels (channels 1 or 3) with stb_image_write; throws IOError naming the file.
void write_image_file(const std::string& path, const uint8_t* chw, int64_t channels, int64_t height,
                      int64_t width, ImageFormat format, int jpeg_quality = 90);

}  // namespace liftoff
