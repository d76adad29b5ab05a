// nvJPEG is opened at run time (dlopen of libnvjpeg.so.13, then libnvjpeg.so), like cuDNN: the build
// machines' CUDA toolkit has no nvJPEG header or library, and a machine without it must still run everything
// else. The declarations below are our own, written from NVIDIA's public nvJPEG API documentation (the
// values of nvjpegStatus_t, nvjpegBackend_t, nvjpegOutputFormat_t, nvjpegChromaSubsampling_t and the layout
// of nvjpegImage_t are part of its stable C ABI); only what Liftoff calls is declared.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

namespace liftoff::cuda::nvjpeg {

enum Status : int {
  kSuccess = 0,
  kNotInitialized = 1,
  kInvalidParameter = 2,
  kBadJpeg = 3,
  kJpegNotSupported = 4,
  kAllocatorFailure = 5,
  kExecutionFailed = 6,
  kArchMismatch = 7,
  kInternalError = 8,
  kImplementationNotSupported = 9,
  kIncompleteBitstream = 10,
};

enum Backend : int {
  kBackendDefault = 0,
  kBackendHybrid = 1,     // Huffman decoding on the CPU
  kBackendGpuHybrid = 2,  // Huffman decoding on the GPU for large batches of baseline images
  kBackendHardware = 3,   // the A100/H100/H200 hardware JPEG decoder (baseline, one scan)
};

enum OutputFormat : int {
  kOutputUnchanged = 0,
  kOutputYuv = 1,
  kOutputY = 2,
  kOutputRgb = 3,
  kOutputBgr = 4,
  kOutputRgbi = 5,  // interleaved RGB in channel[0], pitch[0] >= 3 * width
  kOutputBgri = 6,
};

enum ChromaSubsampling : int {
  kCss444 = 0,
  kCss422 = 1,
  kCss420 = 2,
  kCss440 = 3,
  kCss411 = 4,
  kCss410 = 5,
  kCssGray = 6,
  kCss410V = 7,
  kCssUnknown = -1,
};

constexpr int kMaxComponent = 4;
constexpr unsigned kFlagsDefault = 0;

struct Image {  // nvjpegImage_t
  unsigned char* channel[kMaxComponent];
  size_t pitch[kMaxComponent];
};

struct HandleOpaque;
struct StateOpaque;
using Handle = HandleOpaque*;  // nvjpegHandle_t
using State = StateOpaque*;    // nvjpegJpegState_t

// The functions Liftoff uses, with the library's signatures (allocator arguments passed as null: nvJPEG then
// uses cudaMalloc / cudaHostAlloc).
struct Api {
  int (*GetProperty)(int type,
                     int* value) = nullptr;  // type: 0 major, 1 minor, 2 patch (libraryPropertyType)
  int (*CreateEx)(int backend, void* dev_allocator, void* pinned_allocator, unsigned flags,
                  Handle* handle) = nullptr;
  int (*Destroy)(Handle handle) = nullptr;
  int (*JpegStateCreate)(Handle handle, State* state) = nullptr;
  int (*JpegStateDestroy)(State state) = nullptr;
  int (*GetImageInfo)(Handle handle, const unsigned char* data, size_t length, int* components,
                      int* subsampling, int* widths, int* heights) = nullptr;
  int (*Decode)(Handle handle, State state, const unsigned char* data, size_t length, int output_format,
                Image* destination, cudaStream_t stream) = nullptr;
  int (*DecodeBatchedInitialize)(Handle handle, State state, int batch_size, int max_cpu_threads,
                                 int output_format) = nullptr;
  int (*DecodeBatched)(Handle handle, State state, const unsigned char* const* data, const size_t* lengths,
                       Image* destinations, cudaStream_t stream) = nullptr;
  // Optional (null when the library lacks it): the hardware decoder's engines and cores per engine.
  int (*GetHardwareDecoderInfo)(Handle handle, unsigned* num_engines,
                                unsigned* num_cores_per_engine) = nullptr;
};

// The loaded library's functions; throws BackendError (with load_error()'s text) when it is absent.
const Api& api();
bool loaded();
// Empty when nvJPEG loaded; otherwise what is missing and how to get it.
std::string load_error();
// "libnvjpeg.so.13 (nvJPEG 13.0.1)", or "" when not loaded.
std::string describe_library();
// "NVJPEG_STATUS_BAD_JPEG" etc.
const char* status_name(int status);

}  // namespace liftoff::cuda::nvjpeg
