#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <cstdint>

#include "ops/common/index_dtype.h"
#include "ops/embedding/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
template <class T, class I>
__global__ void embedding_forward_kernel(const I* idx, const T* w, int64_t num, int64_t dim, int64_t total,
                                         T* out) {
  LIFTOFF_GRID_STRIDE_LOOP(i, total) {
    const int64_t p = i / dim;
    const int64_t r = static_cast<int64_t>(idx[p]);
    // A bad index cannot throw here without a host sync: poison its row instead.
    out[i] = (r >= 0 && r < num) ? w[r * dim + (i - p * dim)] : convert<T>(NAN);
  }
}

// Sort keys: the row, or `num` (sorted last, then skipped) for the padding row and bad indices.
template <class I>
__global__ void make_keys_kernel(const I* idx, int64_t n, int64_t num, int64_t padding, uint32_t* keys,
                                 int32_t* positions) {
  LIFTOFF_GRID_STRIDE_LOOP(p, n) {
    const int64_t r = static_cast<int64_t>(idx[p]);
    keys[p] = static_cast<uint32_t>((r >= 0 && r < num && r != padding) ? r : num);
    positions[p] = static_cast<int32_t>(p);
  }
}

// Thread (k, d): where sorted entry k starts a run of equal keys, sums column d of gy over the run's
// positions (ascending, as the sort is stable) into that row of gw. Neighbouring threads read neighbouring
// columns.
template <class T>
__global__ void embedding_runs_kernel(const uint32_t* keys, const int32_t* positions, const T* gy, int64_t n,
                                      int64_t num, int64_t dim, T* gw) {
  using A = acc_t<T>;
  LIFTOFF_GRID_STRIDE_LOOP(i, n * dim) {
    const int64_t k = i / dim;
    const uint32_t key = keys[k];
    if (key >= num || (k > 0 && keys[k - 1] == key)) continue;
    const int64_t d = i - k * dim;
    A sum = A(0);
    for (int64_t j = k; j < n && keys[j] == key; ++j) sum += convert<A>(gy[positions[j] * dim + d]);
    gw[static_cast<int64_t>(key) * dim + d] = convert<T>(sum);
  }
}

int key_bits(int64_t num) {
  int bits = 1;
  while (bits < 32 && (int64_t{1} << bits) <= num) ++bits;
  return bits;
}
}  // namespace

void embedding_forward(const Tensor& indices, const Tensor& weight, const Tensor& out) {
  const int device = weight.device().index;
  DeviceGuard guard(device);
  const int64_t total = out.numel();
  if (total == 0) return;
  dispatch_device_float(weight.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    dispatch_index(indices.dtype(), "embedding", [&](auto itag) {
      using I = decltype(itag);
      embedding_forward_kernel<T, I><<<grid_for(total), kBlock, 0, compute_stream(device)>>>(
          indices.data<I>(), static_cast<const T*>(weight.raw_data()), weight.size(0), weight.size(1), total,
          static_cast<T*>(out.raw_data()));
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

void embedding_backward(const Tensor& indices, const Tensor& gy, int64_t padding, const Tensor& gweight) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = compute_stream(device);
  const int64_t n = indices.numel(), num = gweight.size(0), dim = gweight.size(1);
  LIFTOFF_CUDA_CHECK(cudaMemsetAsync(gweight.raw_data(), 0, gweight.nbytes(), stream));  // rows never indexed
  if (n == 0 || dim == 0) return;
  const Device dev = gy.device();
  const Tensor keys_in = Tensor::empty({n}, DType::i32, dev), keys = Tensor::empty({n}, DType::i32, dev);
  const Tensor pos_in = Tensor::empty({n}, DType::i32, dev), pos = Tensor::empty({n}, DType::i32, dev);
  auto* k_in = static_cast<uint32_t*>(keys_in.raw_data());
  auto* k_out = static_cast<uint32_t*>(keys.raw_data());
  dispatch_index(indices.dtype(), "embedding backward", [&](auto itag) {
    using I = decltype(itag);
    make_keys_kernel<I><<<grid_for(n), kBlock, 0, stream>>>(indices.data<I>(), n, num, padding, k_in,
                                                            pos_in.data<int32_t>());
    LIFTOFF_LAUNCH_CHECK();
  });
  // Stable radix sort over the bits that `num` needs; the temporary size is computed on the host, no sync.
  const int end_bit = key_bits(num);
  size_t temp_bytes = 0;
  LIFTOFF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k_in, k_out, pos_in.data<int32_t>(),
                                                     pos.data<int32_t>(), static_cast<int>(n), 0, end_bit,
                                                     stream));
  const Tensor temp = Tensor::empty({static_cast<int64_t>(temp_bytes) + 1}, DType::u8, dev);
  LIFTOFF_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, k_in, k_out,
                                                     pos_in.data<int32_t>(), pos.data<int32_t>(),
                                                     static_cast<int>(n), 0, end_bit, stream));
  dispatch_device_float(gy.dtype(), "embedding backward", [&](auto tag) {
    using T = decltype(tag);
    embedding_runs_kernel<T><<<grid_for(n * dim), kBlock, 0, stream>>>(
        k_out, pos.data<int32_t>(), static_cast<const T*>(gy.raw_data()), n, num, dim,
        static_cast<T*>(gweight.raw_data()));
    LIFTOFF_LAUNCH_CHECK();
  });
}

}  // namespace liftoff::cuda
