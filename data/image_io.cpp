#include "data/image_io.h"

#include <stb/stb_image.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>

#include "data/jpeg_check.h"
#include "runtime/error.h"

namespace liftoff {

std::vector<uint8_t> read_image_bytes(const std::string& path, const ImageLimits& limits) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  LIFTOFF_CHECK(in.good(), IOError, "image '", path, "': cannot open it for reading");
  const std::streamoff size = in.tellg();
  LIFTOFF_CHECK(size >= 0, IOError, "image '", path, "': cannot read its size");
  LIFTOFF_CHECK(size > 0, IOError, "image '", path, "': the file is empty");
  LIFTOFF_CHECK(size <= limits.max_file_bytes, IOError, "image '", path, "': ", size,
                " bytes exceed the limit of ", limits.max_file_bytes, " bytes per file");
  LIFTOFF_CHECK(size <= INT32_MAX, IOError, "image '", path, "': too large for stb_image");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  LIFTOFF_CHECK(in.gcount() == size, IOError, "image '", path, "': short read (", in.gcount(), " of ", size,
                " bytes)");
  return bytes;
}

namespace {

// stb's reason, kept to printable characters: some failure strings carry raw bytes or newlines, and our
// errors are one line.
std::string stb_reason() {
  const char* reason = stbi_failure_reason();
  std::string text;
  for (const char* p = reason != nullptr ? reason : "unknown"; *p != '\0' && text.size() < 120; ++p) {
    text += (*p >= 0x20 && *p < 0x7f) ? *p : '?';
  }
  return text;
}

void check_dimensions(const std::string& path, int64_t w, int64_t h, const ImageLimits& limits) {
  LIFTOFF_CHECK(w > 0 && h > 0 && w <= limits.max_side && h <= limits.max_side, IOError, "image '", path,
                "': its header claims ", w, "x", h, " pixels; each side must be in [1, ", limits.max_side,
                "] (corrupt or hostile file?)");
  LIFTOFF_CHECK(w * h <= limits.max_pixels, IOError, "image '", path, "': ", w, "x", h, " = ", w * h,
                " pixels exceed the limit of ", limits.max_pixels,
                "; shrink the image or raise the limit (train: --max-image-pixels)");
}

}  // namespace

ImageInfo check_image_bytes(const std::string& path, const std::vector<uint8_t>& bytes,
                            const ImageLimits& limits, JpegFrameInfo* jpeg) {
  // PNG: read the IHDR size ourselves first. stb_image refuses some huge headers with a generic "unknown
  // image type"; this tells the user the size the file claims.
  static const uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
  if (bytes.size() >= 24 && std::memcmp(bytes.data(), kPngSignature, 8) == 0 &&
      std::memcmp(bytes.data() + 12, "IHDR", 4) == 0) {
    const auto be32 = [&](size_t at) {
      return (int64_t{bytes[at]} << 24) | (int64_t{bytes[at + 1]} << 16) | (int64_t{bytes[at + 2]} << 8) |
             int64_t{bytes[at + 3]};
    };
    check_dimensions(path, be32(16), be32(20), limits);
    // Every chunk must fit in the file: stb_image grows its IDAT buffer to a chunk's claimed length before
    // reading it (a 206-byte file claiming a 1.6 GB IDAT made it allocate 2 GiB; found by image_fuzz).
    size_t at = 8;
    while (at + 12 <= bytes.size()) {
      const int64_t length = be32(at);
      LIFTOFF_CHECK(length <= static_cast<int64_t>(bytes.size() - at - 12), IOError, "image '", path,
                    "': a PNG chunk at byte ", at, " claims ", length, " bytes but only ",
                    bytes.size() - at - 12, " follow (corrupt or truncated file)");
      if (std::memcmp(bytes.data() + at + 4, "IEND", 4) == 0) break;
      at += 12 + static_cast<size_t>(length);
    }
  }
  // JPEG: walk the markers before stb_image sees them (stbi_info below already builds Huffman tables). stb
  // trusts table and scan structure it never checks; a scan using an undefined table crashed it (image_fuzz).
  const JpegFrameInfo frame = check_jpeg_structure(path, bytes.data(), bytes.size());
  if (jpeg != nullptr) *jpeg = frame;
  int w = 0, h = 0, c = 0;
  // Header only: no pixel memory is allocated here, whatever the header claims.
  LIFTOFF_CHECK(stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c) == 1, IOError,
                "image '", path, "': not a readable PNG, JPEG or BMP header (stb_image: ", stb_reason(), ")");
  check_dimensions(path, w, h, limits);
  LIFTOFF_CHECK(c >= 1 && c <= 4, IOError, "image '", path, "': unsupported channel count ", c);
  return ImageInfo{w, h, c};
}

ImageInfo read_image_info(const std::string& path, const ImageLimits& limits) {
  return check_image_bytes(path, read_image_bytes(path, limits), limits);
}

int64_t decode_bytes_estimate(const ImageInfo& info, int64_t channels) {
  return info.width * info.height * (2 * std::max(info.channels, channels) + 2 * channels);
}

DecodedImage decode_image_file(const std::string& path, int64_t channels, const ImageLimits& limits) {
  return decode_image_file(path, channels, limits, {});
}

DecodedImage decode_image_file(const std::string& path, int64_t channels, const ImageLimits& limits,
                               const std::function<void(const ImageInfo&)>& before_decode) {
  const std::vector<uint8_t> bytes = read_image_bytes(path, limits);
  const ImageInfo info = check_image_bytes(path, bytes, limits);
  if (before_decode) before_decode(info);
  return decode_image_bytes(path, bytes, info, channels);
}

DecodedImage decode_image_bytes(const std::string& path, const std::vector<uint8_t>& bytes,
                                const ImageInfo& info, int64_t channels) {
  LIFTOFF_CHECK(channels == 1 || channels == 3, ValueError,
                "decode_image_file: channels must be 1 or 3, got ", channels);
  int w = 0, h = 0, c = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c,
                            static_cast<int>(channels)),
      stbi_image_free);
  LIFTOFF_CHECK(pixels != nullptr, IOError, "image '", path, "': cannot decode it (stb_image: ", stb_reason(),
                "); the file is corrupt or truncated");
  LIFTOFF_CHECK(w == info.width && h == info.height, IOError, "image '", path, "': decoded size ", w, "x", h,
                " differs from its header's ", info.width, "x", info.height);
  DecodedImage out;
  out.width = w;
  out.height = h;
  out.channels = channels;
  out.pixels.assign(pixels.get(), pixels.get() + static_cast<size_t>(w) * h * channels);
  return out;
}

void fit_image(const DecodedImage& image, int64_t height, int64_t width, ResizeMode mode, uint8_t* dst) {
  const int64_t c_n = image.channels, ih = image.height, iw = image.width;
  const uint8_t* src = image.pixels.data();
  if (ih == height && iw == width) {
    for (int64_t y = 0; y < height; ++y) {
      for (int64_t x = 0; x < width; ++x) {
        for (int64_t c = 0; c < c_n; ++c) dst[(c * height + y) * width + x] = src[(y * iw + x) * c_n + c];
      }
    }
    return;
  }
  if (mode == ResizeMode::center_crop) {
    // Offsets of the window in the source; negative when the image is smaller (zero padding).
    const int64_t oy = (ih - height) / 2, ox = (iw - width) / 2;
    for (int64_t y = 0; y < height; ++y) {
      const int64_t sy = y + oy;
      for (int64_t x = 0; x < width; ++x) {
        const int64_t sx = x + ox;
        const bool inside = sy >= 0 && sy < ih && sx >= 0 && sx < iw;
        for (int64_t c = 0; c < c_n; ++c) {
          dst[(c * height + y) * width + x] = inside ? src[(sy * iw + sx) * c_n + c] : uint8_t{0};
        }
      }
    }
    return;
  }
  const float scale_y = static_cast<float>(ih) / static_cast<float>(height);
  const float scale_x = static_cast<float>(iw) / static_cast<float>(width);
  for (int64_t y = 0; y < height; ++y) {
    const float fy =
        std::clamp((static_cast<float>(y) + 0.5f) * scale_y - 0.5f, 0.0f, static_cast<float>(ih - 1));
    const int64_t y0 = static_cast<int64_t>(fy);
    const int64_t y1 = std::min(y0 + 1, ih - 1);
    const float wy = fy - static_cast<float>(y0);
    for (int64_t x = 0; x < width; ++x) {
      const float fx =
          std::clamp((static_cast<float>(x) + 0.5f) * scale_x - 0.5f, 0.0f, static_cast<float>(iw - 1));
      const int64_t x0 = static_cast<int64_t>(fx);
      const int64_t x1 = std::min(x0 + 1, iw - 1);
      const float wx = fx - static_cast<float>(x0);
      for (int64_t c = 0; c < c_n; ++c) {
        const float top = static_cast<float>(src[(y0 * iw + x0) * c_n + c]) * (1.0f - wx) +
                          static_cast<float>(src[(y0 * iw + x1) * c_n + c]) * wx;
        const float bottom = static_cast<float>(src[(y1 * iw + x0) * c_n + c]) * (1.0f - wx) +
                             static_cast<float>(src[(y1 * iw + x1) * c_n + c]) * wx;
        const float v = top * (1.0f - wy) + bottom * wy;
        dst[(c * height + y) * width + x] = static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L));
      }
    }
  }
}

ImageFormat parse_image_format(const std::string& text) {
  if (text == "png") return ImageFormat::png;
  if (text == "jpg" || text == "jpeg") return ImageFormat::jpg;
  if (text == "bmp") return ImageFormat::bmp;
  throw ValueError(str_cat("image format '", text, "' is not png, jpg or bmp"));
}

const char* image_format_extension(ImageFormat format) {
  switch (format) {
    case ImageFormat::png:
      return ".png";
    case ImageFormat::jpg:
      return ".jpg";
    case ImageFormat::bmp:
      return ".bmp";
  }
  return "";
}

void write_image_file(const std::string& path, const uint8_t* chw, int64_t channels, int64_t height,
                      int64_t width, ImageFormat format, int jpeg_quality) {
  LIFTOFF_CHECK(channels == 1 || channels == 3, ValueError, "write_image_file '", path,
                "': channels must be 1 or 3, got ", channels);
  LIFTOFF_CHECK(height >= 1 && width >= 1 && height <= 65535 && width <= 65535, ValueError,
                "write_image_file '", path, "': size ", height, "x", width, " is outside [1, 65535]");
  std::vector<uint8_t> hwc(static_cast<size_t>(channels * height * width));
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < height * width; ++i)
      hwc[static_cast<size_t>(i * channels + c)] = chw[c * height * width + i];
  }
  const int w = static_cast<int>(width), h = static_cast<int>(height), n = static_cast<int>(channels);
  int ok = 0;
  switch (format) {
    case ImageFormat::png:
      ok = stbi_write_png(path.c_str(), w, h, n, hwc.data(), w * n);
      break;
    case ImageFormat::jpg:
      ok = stbi_write_jpg(path.c_str(), w, h, n, hwc.data(), jpeg_quality);
      break;
    case ImageFormat::bmp:
      ok = stbi_write_bmp(path.c_str(), w, h, n, hwc.data());
      break;
  }
  LIFTOFF_CHECK(ok != 0, IOError, "cannot write image '", path, "' (directory missing or disk full?)");
}

}  // namespace liftoff
