#include <algorithm>
#include <cstdint>

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
// Contiguous inputs into a contiguous out: input k is `rows` runs of row_units units (U: 16-byte packs where
// every run, row and offset allows, else elements), run r going to dst + r * dst_row + offset. One division
// an element, where the general kernel does one per dim.
struct CatRun {
  const void* data;
  int64_t row_units;
  int64_t offset;  // in units
};
struct CatRuns {
  CatRun in[kCatBatch];
};

template <class U>
__global__ void cat_rows_kernel(const __grid_constant__ CatRuns runs, int64_t rows, int64_t dst_row, U* dst) {
  const CatRun& in = runs.in[blockIdx.y];
  const U* src = static_cast<const U*>(in.data);
  LIFTOFF_GRID_STRIDE_LOOP(i, rows * in.row_units) {
    const int64_t r = i / in.row_units;
    dst[r * dst_row + in.offset + (i - r * in.row_units)] = src[i];
  }
}

// Whether every input and out are contiguous (the rows kernel's case).
bool all_contiguous(const std::vector<Tensor>& inputs, const Tensor& out) {
  if (!out.is_contiguous()) return false;
  for (const Tensor& t : inputs)
    if (t.numel() > 0 && !t.is_contiguous()) return false;
  return true;
}

template <class U>
void launch_rows(const std::vector<Tensor>& inputs, int64_t dim, const Tensor& out, int64_t unit_elements,
                 cudaStream_t stream) {
  int64_t rows = 1, inner = 1;
  for (int64_t k = 0; k < out.dim(); ++k) {
    if (k < dim) rows *= out.size(k);
    if (k > dim) inner *= out.size(k);
  }
  const int64_t dst_row = out.size(dim) * inner / unit_elements;
  CatRuns runs{};
  int count = 0;
  int64_t largest = 0, offset = 0;
  auto launch = [&] {
    if (count == 0) return;
    const dim3 grid(grid_for(largest), static_cast<unsigned>(count));
    cat_rows_kernel<U><<<grid, kBlock, 0, stream>>>(runs, rows, dst_row, static_cast<U*>(out.raw_data()));
    LIFTOFF_LAUNCH_CHECK();
    count = 0;
    largest = 0;
  };
  for (const Tensor& t : inputs) {
    const int64_t run = t.shape()[static_cast<size_t>(dim)] * inner / unit_elements;
    if (t.numel() > 0) {
      runs.in[count++] = CatRun{t.raw_data(), run, offset};
      largest = std::max(largest, rows * run);
      if (count == kCatBatch) launch();
    }
    offset += run;
  }
  launch();
}
}  // namespace

void cat_forward(const std::vector<Tensor>& inputs, int64_t dim, const Tensor& out) {
  const int device = out.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  if (all_contiguous(inputs, out)) {
    // 16-byte packs where out's rows, every input's run and every address allow it.
    const int64_t element = static_cast<int64_t>(dtype_size(out.dtype()));
    int64_t inner = 1;
    for (int64_t k = dim + 1; k < out.dim(); ++k) inner *= out.size(k);
    bool packs =
        reinterpret_cast<uintptr_t>(out.raw_data()) % 16 == 0 && out.size(dim) * inner * element % 16 == 0;
    for (const Tensor& t : inputs) {
      if (t.numel() == 0) continue;
      packs = packs && reinterpret_cast<uintptr_t>(t.raw_data()) % 16 == 0 &&
              t.shape()[static_cast<size_t>(dim)] * inner * element % 16 == 0;
    }
    if (packs) {
      launch_rows<uint4>(inputs, dim, out, 16 / element, stream);
      return;
    }
  }
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
