// CUDA layer/group norm forward (kernels.h). Layer norm rows up to 8192 values: the row in registers
// (row_tile.cuh: a warp per row up to 1024 values, a block beyond, 16-byte packs), so x is read once;
// statistics in f32 (f64 for f64 data), the variance centred on the mean from the registers (no
// cancellation). Group norm and longer rows: a group of TPR threads per row looping over it (two passes, the
// second mostly from L1/L2).
#include "ops/layer_norm/cuda_common.cuh"
#include "runtime/cuda/check.h"

namespace liftoff::cuda {

namespace {
using namespace row_norm_kernels;

template <int TPR, class T>
__global__ void __launch_bounds__(kBlock)
    forward_kernel(const T* x, const T* weight, const T* bias, T* y, acc_t<T>* mean, acc_t<T>* rstd,
                   int64_t rows, int64_t cols, Affine affine, double eps, bool vec) {
  using A = acc_t<T>;
  __shared__ A scratch[kBlock / kWarp];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kBlock / TPR) + threadIdx.x / TPR;
  const bool active = row < rows;  // inactive threads still take part in row_sum's barriers
  const T* xr = x + (active ? row : 0) * cols;
  A sum = A(0);
  if (active) for_row<TPR>(xr, cols, vec, [&](int64_t, T v) { sum += convert<A>(v); });
  const A count = static_cast<A>(cols > 0 ? cols : 1);
  const A mu = row_sum<TPR>(sum, scratch) / count;
  A sq = A(0);
  if (active)
    for_row<TPR>(xr, cols, vec, [&](int64_t, T v) {
      const A d = convert<A>(v) - mu;
      sq += d * d;
    });
  const A r = A(1) / sqrt(row_sum<TPR>(sq, scratch) / count + static_cast<A>(eps));
  if (!active) return;
  if (threadIdx.x % TPR == 0) {
    mean[row] = mu;
    rstd[row] = r;
  }
  T* yr = y + row * cols;
  for_row<TPR>(xr, cols, vec, [&](int64_t j, T v) {
    A out = (convert<A>(v) - mu) * r;
    const int64_t a = affine.index(row, j);
    if (weight != nullptr) out *= convert<A>(weight[a]);
    if (bias != nullptr) out += convert<A>(bias[a]);
    yr[j] = convert<T>(out);
  });
}

// Layer norm rows held in registers (weight and bias per column, read by the same packs).
template <int G, int E, int V, class T>
__global__ void __launch_bounds__(kBlock)
    forward_tile_kernel(const T* x, const T* weight, const T* bias, T* y, acc_t<T>* mean, acc_t<T>* rstd,
                        int64_t rows, int64_t cols, double eps) {
  using A = acc_t<T>;
  using Tile = RowTile<G, E, V>;
  __shared__ A scratch[kBlock / kWarp];
  const int lane = threadIdx.x % G;
  const int64_t row = blockIdx.x * static_cast<int64_t>(Tile::kGroupsPerBlock) + threadIdx.x / G;
  const bool active = row < rows;  // every thread stays for the group's reductions
  const int64_t offset = (active ? row : 0) * cols;
  A v[E];
  Tile::load(x + offset, active ? cols : 0, lane, v, A(0));
  A sum = A(0);
#pragma unroll
  for (int e = 0; e < E; ++e) sum += v[e];
  const A count = static_cast<A>(cols);
  const A mu = group_all_reduce<G>(sum, AddOp{}, scratch) / count;
  A sq = A(0);
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const A d = Tile::column(lane, e) < cols ? v[e] - mu : A(0);
    sq += d * d;
  }
  const A r = A(1) / sqrt(group_all_reduce<G>(sq, AddOp{}, scratch) / count + static_cast<A>(eps));
  if (!active) return;
  if (lane == 0) {
    mean[row] = mu;
    rstd[row] = r;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) v[e] = (v[e] - mu) * r;
  if (weight != nullptr) {
    A w[E];
    Tile::load(weight, cols, lane, w, A(1));
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] *= w[e];
  }
  if (bias != nullptr) {
    A b[E];
    Tile::load(bias, cols, lane, b, A(0));
#pragma unroll
    for (int e = 0; e < E; ++e) v[e] += b[e];
  }
  Tile::store(y + offset, cols, lane, v);
}
}  // namespace

void row_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y,
                      const Tensor& mean, const Tensor& rstd, const RowNormShape& s) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  if (s.rows == 0) return;
  dispatch_device_float(x.dtype(), "layer/group norm", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const Affine affine = affine_of(s);
    const bool tiled = launch_tile<T>(
        s,
        {x.raw_data(), y.raw_data(), weight.defined() ? weight.raw_data() : nullptr,
         bias.defined() ? bias.raw_data() : nullptr},
        [&](auto g, auto e, auto v) {
          constexpr int G = decltype(g)::value;
          forward_tile_kernel<G, decltype(e)::value, decltype(v)::value, T>
              <<<tile_blocks<G>(s.rows), kBlock, 0, compute_stream(device)>>>(
                  ptr<T>(x), ptr<T>(weight), ptr<T>(bias), static_cast<T*>(y.raw_data()),
                  static_cast<A*>(mean.raw_data()), static_cast<A*>(rstd.raw_data()), s.rows, s.cols, s.eps);
          LIFTOFF_LAUNCH_CHECK();
        });
    if (tiled) return;
    // Weight and bias are read per value, not by packs.
    const bool vec = use_vectors<T>(s, {x.raw_data(), y.raw_data()});
    by_row_width(s, [&](auto tpr) {
      constexpr int TPR = decltype(tpr)::value;
      const int64_t blocks = (s.rows + kBlock / TPR - 1) / (kBlock / TPR);
      forward_kernel<TPR, T><<<static_cast<unsigned>(blocks), kBlock, 0, compute_stream(device)>>>(
          ptr<T>(x), ptr<T>(weight), ptr<T>(bias), static_cast<T*>(y.raw_data()),
          static_cast<A*>(mean.raw_data()), static_cast<A*>(rstd.raw_data()), s.rows, s.cols, affine, s.eps,
          vec);
      LIFTOFF_LAUNCH_CHECK();
    });
  });
}

}  // namespace liftoff::cuda
