#include "runtime/cuda/nvjpeg_loader.h"

#include "runtime/error.h"
#include "runtime/platform/dynamic_library.h"

namespace liftoff::cuda::nvjpeg {

namespace {

struct Loaded {
  platform::DynamicLibrary library{{"libnvjpeg.so.13", "libnvjpeg.so"}};
  Api api;
  std::string error;  // empty when every function was found

  Loaded() {
    if (!library.loaded()) {
      error = "nvJPEG (libnvjpeg.so.13) could not be loaded (" + library.error() +
              "); install the CUDA toolkit's nvJPEG (Debian/NVIDIA packages libnvjpeg-13-0) or add its lib "
              "folder "
              "to LD_LIBRARY_PATH";
      return;
    }
    bind(api.GetProperty, "nvjpegGetProperty");
    bind(api.CreateEx, "nvjpegCreateEx");
    bind(api.Destroy, "nvjpegDestroy");
    bind(api.JpegStateCreate, "nvjpegJpegStateCreate");
    bind(api.JpegStateDestroy, "nvjpegJpegStateDestroy");
    bind(api.GetImageInfo, "nvjpegGetImageInfo");
    bind(api.Decode, "nvjpegDecode");
    bind(api.DecodeBatchedInitialize, "nvjpegDecodeBatchedInitialize");
    bind(api.DecodeBatched, "nvjpegDecodeBatched");
    api.GetHardwareDecoderInfo = reinterpret_cast<decltype(api.GetHardwareDecoderInfo)>(
        library.symbol("nvjpegGetHardwareDecoderInfo"));
  }

  template <class Fn>
  void bind(Fn& fn, const char* name) {
    fn = reinterpret_cast<Fn>(library.symbol(name));
    if (fn == nullptr && error.empty()) {
      error = str_cat("the loaded ", library.name(), " has no ", name, "; install nvJPEG of CUDA 12 or 13");
    }
  }
};

Loaded& state() {
  // Leaked on purpose: nvJPEG must stay mapped until the process ends (handles are destroyed late).
  static auto* loaded = new Loaded();
  return *loaded;
}

}  // namespace

bool loaded() {
  return state().error.empty();
}

std::string load_error() {
  return state().error;
}

const Api& api() {
  if (!loaded()) throw BackendError(load_error());
  return state().api;
}

std::string describe_library() {
  if (!loaded()) return "";
  int major = 0, minor = 0, patch = 0;
  const Api& a = state().api;
  if (a.GetProperty(0, &major) != kSuccess || a.GetProperty(1, &minor) != kSuccess ||
      a.GetProperty(2, &patch) != kSuccess)
    return state().library.name();
  return str_cat(state().library.name(), " (nvJPEG ", major, ".", minor, ".", patch, ")");
}

const char* status_name(int status) {
  switch (status) {
    case kSuccess:
      return "NVJPEG_STATUS_SUCCESS";
    case kNotInitialized:
      return "NVJPEG_STATUS_NOT_INITIALIZED";
    case kInvalidParameter:
      return "NVJPEG_STATUS_INVALID_PARAMETER";
    case kBadJpeg:
      return "NVJPEG_STATUS_BAD_JPEG";
    case kJpegNotSupported:
      return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case kAllocatorFailure:
      return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case kExecutionFailed:
      return "NVJPEG_STATUS_EXECUTION_FAILED";
    case kArchMismatch:
      return "NVJPEG_STATUS_ARCH_MISMATCH";
    case kInternalError:
      return "NVJPEG_STATUS_INTERNAL_ERROR";
    case kImplementationNotSupported:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case kIncompleteBitstream:
      return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
  }
  return "NVJPEG_STATUS_UNKNOWN";
}

}  // namespace liftoff::cuda::nvjpeg
