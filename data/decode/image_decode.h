// Encoded image files for the decode pipeline (data/decode/decode_loader.h): read once (size bounded), their
// structure and header checked BEFORE any decoder sees the bytes (JPEG: data/jpeg_check.h's walk, which also
// yields the frame facts used for routing; PNG/BMP: stb_image's header), then decoded on the CPU with
// libjpeg-turbo (when built with it; optionally at reduced DCT scale) or stb_image, or routed to nvJPEG.
// Decoded images are always interleaved RGB (3 channels): gray replicated, CMYK/YCCK converted as stb_image
// does (R = C * K / 255 on the stored values), alpha dropped. Every failure is an IOError naming the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "data/image_io.h"
#include "data/jpeg_check.h"

namespace liftoff {

enum class CpuJpegDecoder { auto_, turbo, stb };
// Parses "auto", "turbo", "stb"; throws ValueError otherwise.
CpuJpegDecoder parse_cpu_jpeg_decoder(const std::string& text);
const char* cpu_jpeg_decoder_name(CpuJpegDecoder decoder);
// Built with libjpeg-turbo (LIFTOFF_TURBOJPEG).
bool turbojpeg_available();
// auto_ -> turbo when available (measured faster: tools/bench/loader_bench --cpu-decoders), else stb.
CpuJpegDecoder resolve_cpu_jpeg_decoder(CpuJpegDecoder decoder);

// Which decoder the GPU path gives a file to.
//  hardware: baseline (SOF0) JPEG, 1 or 3 components, one scan, no 4:1:1 / 4:1:0 chroma: what the A100/H100
//            hardware JPEG decoder takes (NVJPEG_BACKEND_HARDWARE);
//  nvjpeg:   another JPEG nvJPEG's GPU-hybrid backend decodes (progressive, several scans, SOF1, other
//  chroma); cpu:      what nvJPEG does not decode as stb_image does: CMYK/YCCK (4 components), 2 components,
//  and every
//            non-JPEG file (PNG, BMP).
enum class GpuRoute { hardware, nvjpeg, cpu };
const char* gpu_route_name(GpuRoute route);

struct EncodedImage {
  std::vector<uint8_t> bytes;
  ImageInfo info;      // size and channels as stored
  JpegFrameInfo jpeg;  // jpeg.is_jpeg false for PNG/BMP
  GpuRoute route = GpuRoute::cpu;
};

// The host-side input checks: size bound, JPEG structure walk or PNG chunk/stb header, dimensions within
// `limits`. Throws IOError naming `path`.
EncodedImage inspect_encoded_image(const std::string& path, std::vector<uint8_t> bytes,
                                   const ImageLimits& limits = {});
// Reads the file (bounded by limits.max_file_bytes), then inspect_encoded_image.
EncodedImage read_encoded_image(const std::string& path, const ImageLimits& limits = {});

// Eighths of the full size to decode a JPEG at so that a source region of region_height x region_width
// still covers out_height x out_width pixels: the smallest k in 1..8 with k/8 * region >= out on both sides
// (8: full size). Non-JPEGs and stb decode at full size.
int jpeg_scale_eighths(double region_height, double region_width, int64_t out_height, int64_t out_width);

// Decodes an inspected image to interleaved RGB. scale_eighths < 8 decodes a JPEG at ceil(size * k / 8)
// with libjpeg-turbo (ignored by stb_image and for other formats: check the returned size).
DecodedImage decode_encoded_image(const std::string& path, const EncodedImage& image, CpuJpegDecoder decoder,
                                  int scale_eighths = 8);

enum class JpegChroma { s444, s422, s420, gray };
struct JpegEncodeOptions {
  int quality = 90;  // 1..100
  JpegChroma chroma = JpegChroma::s420;
  bool progressive = false;
};
// Encodes interleaved RGB (height x width x 3) as a JPEG file's bytes: libjpeg-turbo when built with it
// (every option), otherwise stb_image_write (baseline; 4:2:0 up to quality 90, 4:4:4 above; gray and
// progressive are refused with ValueError). For test and benchmark data (tools/make_jpeg_folder).
std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int64_t height, int64_t width,
                                 const JpegEncodeOptions& options);

}  // namespace liftoff
