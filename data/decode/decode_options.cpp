#include "data/decode/decode_options.h"

#include "runtime/error.h"

namespace liftoff {

DecodeMode parse_decode_mode(const std::string& text) {
  if (text == "auto") return DecodeMode::auto_;
  if (text == "gpu") return DecodeMode::gpu;
  if (text == "cpu") return DecodeMode::cpu;
  throw ValueError(str_cat("decode mode '", text, "' is not auto, gpu or cpu"));
}

const char* decode_mode_name(DecodeMode mode) {
  switch (mode) {
    case DecodeMode::auto_:
      return "auto";
    case DecodeMode::gpu:
      return "gpu";
    case DecodeMode::cpu:
      return "cpu";
    case DecodeMode::hybrid:
      return "hybrid";
  }
  return "?";
}

NvjpegBackend parse_nvjpeg_backend(const std::string& text) {
  if (text == "auto") return NvjpegBackend::auto_;
  if (text == "hardware") return NvjpegBackend::hardware;
  if (text == "gpu-hybrid") return NvjpegBackend::gpu_hybrid;
  if (text == "hybrid") return NvjpegBackend::hybrid;
  throw ValueError(str_cat("nvJPEG backend '", text, "' is not auto, hardware, gpu-hybrid or hybrid"));
}

const char* decode_backend_name(NvjpegBackend backend) {
  switch (backend) {
    case NvjpegBackend::auto_:
      return "auto";
    case NvjpegBackend::hardware:
      return "hardware";
    case NvjpegBackend::gpu_hybrid:
      return "gpu-hybrid";
    case NvjpegBackend::hybrid:
      return "hybrid";
  }
  return "?";
}

}  // namespace liftoff
