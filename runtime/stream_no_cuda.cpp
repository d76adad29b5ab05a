// The device backend of runtime/stream.h in a build without CUDA: a CUDA stream or event cannot exist here,
// so every entry point says so (callers check the device first and never get here on the CPU).
#include <string>

#include "runtime/error.h"
#include "runtime/stream_backend.h"

namespace liftoff::detail {

namespace {
[[noreturn]] void no_cuda(const char* what) {
  throw DeviceError(
      std::string(what) +
      ": this Liftoff was built without CUDA; rebuild with -DLIFTOFF_CUDA=ON or use --device cpu");
}
}  // namespace

std::unique_ptr<DeviceEvent> make_device_event(int, bool, bool) {
  no_cuda("CUDA event");
}
void* device_stream(int, StreamKind) {
  no_cuda("CUDA stream");
}
void* device_lane_stream(int, int) {
  no_cuda("CUDA stream");
}
void device_stream_synchronize(int, void*) {
  no_cuda("CUDA stream");
}
void device_prepare_lanes(int, int) {
  no_cuda("CUDA lanes");
}
void device_set_active_lane(int, int) {
  no_cuda("CUDA lanes");
}
void device_profiler_range(int, bool) {
  no_cuda("CUDA profiler range");
}
void device_copy_async(void*, const void*, size_t, CopyKind, void*) {
  no_cuda("device copy");
}
std::shared_ptr<void> device_allocate_pinned_host(size_t) {
  no_cuda("pinned host memory");
}

}  // namespace liftoff::detail
