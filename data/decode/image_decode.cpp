#include "data/decode/image_decode.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "runtime/error.h"

#include <stb/stb_image_write.h>

#if LIFTOFF_WITH_TURBOJPEG
#include <turbojpeg.h>
#endif

namespace liftoff {

CpuJpegDecoder parse_cpu_jpeg_decoder(const std::string& text) {
  if (text == "auto") return CpuJpegDecoder::auto_;
  if (text == "turbo") return CpuJpegDecoder::turbo;
  if (text == "stb") return CpuJpegDecoder::stb;
  throw ValueError(str_cat("CPU JPEG decoder '", text, "' is not auto, turbo or stb"));
}

const char* cpu_jpeg_decoder_name(CpuJpegDecoder decoder) {
  switch (decoder) {
    case CpuJpegDecoder::auto_:
      return "auto";
    case CpuJpegDecoder::turbo:
      return "libjpeg-turbo";
    case CpuJpegDecoder::stb:
      return "stb_image";
  }
  return "?";
}

bool turbojpeg_available() {
  return LIFTOFF_WITH_TURBOJPEG != 0;
}

CpuJpegDecoder resolve_cpu_jpeg_decoder(CpuJpegDecoder decoder) {
  if (decoder == CpuJpegDecoder::auto_)
    return turbojpeg_available() ? CpuJpegDecoder::turbo : CpuJpegDecoder::stb;
  LIFTOFF_CHECK(
      decoder != CpuJpegDecoder::turbo || turbojpeg_available(), ValueError,
      "CPU JPEG decoder turbo: this Liftoff was built without libjpeg-turbo (install libturbojpeg0-dev "
      "and reconfigure); use auto or stb");
  return decoder;
}

const char* gpu_route_name(GpuRoute route) {
  switch (route) {
    case GpuRoute::hardware:
      return "hardware";
    case GpuRoute::nvjpeg:
      return "nvjpeg";
    case GpuRoute::cpu:
      return "cpu";
  }
  return "?";
}

namespace {

GpuRoute route_for(const JpegFrameInfo& f) {
  if (!f.is_jpeg || (f.components != 1 && f.components != 3)) return GpuRoute::cpu;
  if (f.sof != 0xC0 || f.scans != 1) return GpuRoute::nvjpeg;
  if (f.components == 3) {
    // Chroma 1x1, luma 1 or 2 each way: 4:4:4, 4:2:2, 4:2:0, 4:4:0. 4:1:1 / 4:1:0 are not in hardware.
    for (int c = 1; c < 3; ++c) {
      if (f.h[c] != 1 || f.v[c] != 1) return GpuRoute::nvjpeg;
    }
    if (f.h[0] > 2 || f.v[0] > 2) return GpuRoute::nvjpeg;
  }
  return GpuRoute::hardware;
}

#if LIFTOFF_WITH_TURBOJPEG
std::string turbo_reason(tjhandle handle) {
  const char* reason = tjGetErrorStr2(handle);
  std::string text;
  for (const char* p = reason != nullptr ? reason : "unknown"; *p != '\0' && text.size() < 120; ++p) {
    text += (*p >= 0x20 && *p < 0x7f) ? *p : '?';
  }
  return text;
}

// stb_image's CMYK -> RGB: x * k / 255 rounded its way, on the stored (Adobe: inverted) values; libjpeg turns
// YCCK into that same CMYK, so both colour transforms come out as stb_image decodes them.
uint8_t blinn_8x8(uint8_t x, uint8_t y) {
  const unsigned t = unsigned{x} * y + 128u;
  return static_cast<uint8_t>((t + (t >> 8)) >> 8);
}

DecodedImage decode_turbo(const std::string& path, const EncodedImage& image, int scale_eighths) {
  // One decompressor per thread: creating one costs more than a small image's decode.
  struct Handle {
    tjhandle h = tjInitDecompress();
    ~Handle() {
      if (h != nullptr) tjDestroy(h);
    }
  };
  thread_local Handle handle;
  LIFTOFF_CHECK(handle.h != nullptr, IOError, "image '", path,
                "': cannot create a libjpeg-turbo decompressor");
  const tjscalingfactor factor{std::clamp(scale_eighths, 1, 8), 8};
  const int w = TJSCALED(image.jpeg.width, factor), h = TJSCALED(image.jpeg.height, factor);
  const bool cmyk = image.jpeg.components == 4;
  const int pixel_size = cmyk ? 4 : 3;
  std::vector<uint8_t> raw(static_cast<size_t>(w) * h * pixel_size);
  // LIMITSCANS: a progressive file with thousands of scans is a decompression bomb, not a photograph.
  const int rc =
      tjDecompress2(handle.h, image.bytes.data(), static_cast<unsigned long>(image.bytes.size()), raw.data(),
                    w, w * pixel_size, h, cmyk ? TJPF_CMYK : TJPF_RGB, TJFLAG_LIMITSCANS);
  LIFTOFF_CHECK(rc == 0 || tjGetErrorCode(handle.h) == TJERR_WARNING, IOError, "image '", path,
                "': cannot decode it (libjpeg-turbo: ", turbo_reason(handle.h),
                "); the file is corrupt or truncated");
  DecodedImage out;
  out.width = w;
  out.height = h;
  out.channels = 3;
  if (!cmyk) {
    out.pixels = std::move(raw);
    return out;
  }
  out.pixels.resize(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0, n = static_cast<size_t>(w) * h; i < n; ++i) {
    const uint8_t k = raw[4 * i + 3];
    for (int c = 0; c < 3; ++c) out.pixels[3 * i + c] = blinn_8x8(raw[4 * i + c], k);
  }
  return out;
}
#endif

}  // namespace

EncodedImage inspect_encoded_image(const std::string& path, std::vector<uint8_t> bytes,
                                   const ImageLimits& limits) {
  EncodedImage image;
  image.info = check_image_bytes(path, bytes, limits, &image.jpeg);
  // stb's header and the walk read the same SOF; a disagreement means a file built to confuse one of them.
  LIFTOFF_CHECK(
      !image.jpeg.is_jpeg || (image.jpeg.width == image.info.width && image.jpeg.height == image.info.height),
      IOError, "image '", path, "': JPEG frame header says ", image.jpeg.width, "x", image.jpeg.height,
      " but the decoder reads ", image.info.width, "x", image.info.height, "; the file is corrupt");
  image.route = route_for(image.jpeg);
  image.bytes = std::move(bytes);
  return image;
}

EncodedImage read_encoded_image(const std::string& path, const ImageLimits& limits) {
  return inspect_encoded_image(path, read_image_bytes(path, limits), limits);
}

int jpeg_scale_eighths(double region_height, double region_width, int64_t out_height, int64_t out_width) {
  for (int k = 1; k < 8; ++k) {
    if (region_height * k / 8.0 >= static_cast<double>(out_height) &&
        region_width * k / 8.0 >= static_cast<double>(out_width))
      return k;
  }
  return 8;
}

DecodedImage decode_encoded_image(const std::string& path, const EncodedImage& image, CpuJpegDecoder decoder,
                                  int scale_eighths) {
  const CpuJpegDecoder resolved = resolve_cpu_jpeg_decoder(decoder);
#if LIFTOFF_WITH_TURBOJPEG
  if (image.jpeg.is_jpeg && resolved == CpuJpegDecoder::turbo)
    return decode_turbo(path, image, scale_eighths);
#else
  (void)scale_eighths;
  (void)resolved;
#endif
  return decode_image_bytes(path, image.bytes, image.info, 3);
}

std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int64_t height, int64_t width,
                                 const JpegEncodeOptions& o) {
  LIFTOFF_CHECK(
      height >= 1 && width >= 1 && height <= 65535 && width <= 65535 && o.quality >= 1 && o.quality <= 100,
      ValueError, "encode_jpeg: size ", height, "x", width, " or quality ", o.quality, " out of range");
#if LIFTOFF_WITH_TURBOJPEG
  tjhandle handle = tjInitCompress();
  LIFTOFF_CHECK(handle != nullptr, ValueError, "encode_jpeg: cannot create a libjpeg-turbo compressor");
  const int subsamp = o.chroma == JpegChroma::s444   ? TJSAMP_444
                      : o.chroma == JpegChroma::s422 ? TJSAMP_422
                      : o.chroma == JpegChroma::s420 ? TJSAMP_420
                                                     : TJSAMP_GRAY;
  unsigned char* out = nullptr;
  unsigned long size = 0;
  const int rc =
      tjCompress2(handle, rgb, static_cast<int>(width), static_cast<int>(width * 3), static_cast<int>(height),
                  TJPF_RGB, &out, &size, subsamp, o.quality, o.progressive ? TJFLAG_PROGRESSIVE : 0);
  const std::string reason = rc == 0 ? std::string() : turbo_reason(handle);
  std::vector<uint8_t> bytes;
  if (rc == 0) bytes.assign(out, out + size);
  tjFree(out);
  tjDestroy(handle);
  LIFTOFF_CHECK(rc == 0, ValueError, "encode_jpeg: libjpeg-turbo: ", reason);
  return bytes;
#else
  LIFTOFF_CHECK(o.chroma != JpegChroma::gray && !o.progressive, ValueError,
                "encode_jpeg: gray and progressive JPEGs need libjpeg-turbo (LIFTOFF_TURBOJPEG)");
  std::vector<uint8_t> bytes;
  const auto append = [](void* context, void* data, int n) {
    auto* out = static_cast<std::vector<uint8_t>*>(context);
    out->insert(out->end(), static_cast<uint8_t*>(data), static_cast<uint8_t*>(data) + n);
  };
  LIFTOFF_CHECK(stbi_write_jpg_to_func(append, &bytes, static_cast<int>(width), static_cast<int>(height), 3,
                                       rgb, o.quality) != 0,
                ValueError, "encode_jpeg: stb_image_write failed");
  return bytes;
#endif
}

}  // namespace liftoff
