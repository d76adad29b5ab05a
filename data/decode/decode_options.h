// Choices of the decode pipeline (data/decode/decode_loader.h), free of CUDA so tools parse them everywhere.
#pragma once
#include <string>

namespace liftoff {

// Where images are decoded. gpu: nvJPEG on the training device (JPEGs it decodes; the rest on the CPU
// workers, counted); cpu: the CPU workers (libjpeg-turbo or stb_image). auto_: hybrid on a CUDA device when
// nvJPEG loads, cpu otherwise. hybrid (what auto_ resolves to, not a flag value): per batch a share of the
// JPEGs on the CPU workers, the rest on nvJPEG, the share adapted to what the workers sustain
// (data/decode/hybrid_route.h).
enum class DecodeMode { auto_, gpu, cpu, hybrid };
// Parses "auto", "gpu", "cpu" (--decode); throws ValueError otherwise.
DecodeMode parse_decode_mode(const std::string& text);
const char* decode_mode_name(DecodeMode mode);

// nvJPEG backend of the primary engine. auto_: the hardware JPEG decoder where the GPU has one (measured on
// an H200: ~43,000 images/s at batch 256, on its own engines, leaving the SMs to training), the GPU-hybrid
// backend otherwise (~33,000 at 256, ~60,000 at 1024, on the SMs); never the default backend (~2,600).
enum class NvjpegBackend { auto_, hardware, gpu_hybrid, hybrid };
// Parses "auto", "hardware", "gpu-hybrid", "hybrid" (--nvjpeg-backend); throws ValueError otherwise.
NvjpegBackend parse_nvjpeg_backend(const std::string& text);
const char* decode_backend_name(NvjpegBackend backend);

}  // namespace liftoff
