#include "runtime/async_scalar.h"

#if LIFTOFF_WITH_CUDA
#include <cuda_runtime.h>

#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#endif

namespace liftoff {

struct AsyncScalar::Impl {
  bool have = false;
  double value = 0.0;
#if LIFTOFF_WITH_CUDA
  float* pinned = nullptr;
  cudaEvent_t done = nullptr;
  int device = -1;
  bool in_flight = false;
  double in_flight_scale = 1.0;

  // Takes the in-flight value once its copy has completed (never blocks).
  void harvest() {
    if (!in_flight) return;
    const cudaError_t state = cudaEventQuery(done);
    if (state == cudaErrorNotReady) {
      cudaGetLastError();
      return;
    }
    LIFTOFF_CUDA_CHECK(state);
    in_flight = false;
    value = static_cast<double>(*pinned) * in_flight_scale;
    have = true;
  }
#endif
};

AsyncScalar::AsyncScalar() : impl_(std::make_unique<Impl>()) {}

AsyncScalar::~AsyncScalar() {
#if LIFTOFF_WITH_CUDA
  if (impl_->done != nullptr) {
    cudaEventSynchronize(impl_->done);  // the copy must not land in freed memory
    cudaEventDestroy(impl_->done);
  }
  if (impl_->pinned != nullptr) cudaFreeHost(impl_->pinned);
#endif
}

void AsyncScalar::post(const Tensor& t, double scale) {
  LIFTOFF_CHECK(t.numel() == 1 && t.dtype() == DType::f32, ValueError,
                "AsyncScalar::post: needs one f32 element, got ", shape_str(t.shape()), " ",
                dtype_name(t.dtype()));
  if (t.device().is_cpu()) {
    impl_->value = static_cast<double>(t.data<float>()[0]) * scale;
    impl_->have = true;
    return;
  }
#if LIFTOFF_WITH_CUDA
  Impl& m = *impl_;
  m.harvest();
  if (m.in_flight) return;
  const int device = t.device().index;
  cuda::DeviceGuard guard(device);
  if (m.pinned == nullptr || m.device != device) {
    if (m.pinned == nullptr)
      LIFTOFF_CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&m.pinned), sizeof(float)));
    if (m.done != nullptr) LIFTOFF_CUDA_CHECK(cudaEventDestroy(m.done));
    LIFTOFF_CUDA_CHECK(cudaEventCreateWithFlags(&m.done, cudaEventDisableTiming));
    m.device = device;
  }
  const cudaStream_t stream = cuda::compute_stream(device);
  LIFTOFF_CUDA_CHECK(cudaMemcpyAsync(m.pinned, t.raw_data(), sizeof(float), cudaMemcpyDeviceToHost, stream));
  LIFTOFF_CUDA_CHECK(cudaEventRecord(m.done, stream));
  m.in_flight = true;
  m.in_flight_scale = scale;
#endif
}

bool AsyncScalar::latest(double* value) {
#if LIFTOFF_WITH_CUDA
  impl_->harvest();
#endif
  if (impl_->have && value != nullptr) *value = impl_->value;
  return impl_->have;
}

}  // namespace liftoff
