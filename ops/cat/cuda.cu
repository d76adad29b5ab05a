#include <algorithm>

#include "ops/cat/kernels.h"
#include "ops/common/strided.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
constexpr int kCatBatch = 16;  // inputs per launch: 16 descriptors keep the kernel arguments under 2 KB

struct CatInput {
  const void* data;
  int64_t strides[kMaxStridedDims];
  int64_t size;    // along the cat dim
  int64_t offset;  // of its first element in out
  int64_t numel;
};

struct CatBatch {
  CatInput in[kCatBatch];
};

// blockIdx.y picks the input; the x dimension strides over its elements. Input k has out's shape except
// `size` along dim.
template <class T>
__global__ void cat_kernel(const __grid_constant__ CatBatch batch, Strided out, int dim, T* dst) {
  const CatInput& in = batch.in[blockIdx.y];
  const T* src = static_cast<const T*>(in.data);
  LIFTOFF_GRID_STRIDE_LOOP(i, in.numel) {
    int64_t linear = i, s = 0, d = in.offset;
    for (int k = out.dims - 1; k >= 0; --k) {
      const int64_t size = k == dim ? in.size : out.shape[k];
      const int64_t c = linear % size;
      linear /= size;
      s += c * in.strides[k];
      d += c * out.strides[k];
    }
    dst[d] = src[s];
  }
}
}  // namespace

void cat_forward(const std::vector<Tensor>& inputs, int64_t dim, const Tensor& out) {
  const int device = out.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const Strided out_layout = strided_of(out, "cat");
  const int64_t out_stride = out.strides()[static_cast<size_t>(dim)];
  dispatch_device_all(out.dtype(), [&](auto tag) {
    using T = decltype(tag);
    CatBatch batch{};
    int count = 0;
    int64_t largest = 0;
    auto launch = [&] {
      if (count == 0) return;
      const dim3 grid(grid_for(largest), static_cast<unsigned>(count));
      cat_kernel<T><<<grid, kBlock, 0, stream>>>(batch, out_layout, static_cast<int>(dim),
                                                 static_cast<T*>(out.raw_data()));
      LIFTOFF_LAUNCH_CHECK();
      count = 0;
      largest = 0;
    };
    int64_t offset = 0;
    for (const Tensor& t : inputs) {
      const int64_t size = t.shape()[static_cast<size_t>(dim)];
      if (t.numel() > 0) {
        CatInput& in = batch.in[count++];
        in.data = t.raw_data();
        for (int64_t k = 0; k < t.dim(); ++k) in.strides[k] = t.strides()[static_cast<size_t>(k)];
        in.size = size;
        in.offset = offset * out_stride;
        in.numel = t.numel();
        largest = std::max(largest, in.numel);
        if (count == kCatBatch) launch();
      }
      offset += size;
    }
    launch();
  });
}

}  // namespace liftoff::cuda
