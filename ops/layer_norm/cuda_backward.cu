// CUDA layer/group norm backward (kernels.h). The input gradient as the forward reads x (cuda_forward.cu):
// layer norm rows up to 8192 values in registers, group norm and longer rows looped over. The weight/bias
// gradients: a deterministic two-stage reduction (per-chunk partial sums written to a buffer, then summed in
// chunk order), no atomics; for layer norm rows up to 4096 values the first stage is fused into the
// input-gradient kernel (backward_tile_kernel, or for 16-bit rows the variant set_layer_norm_backward
// picks: cuda_backward_rows.cuh), so the backward reads gy and x once.
#include <algorithm>

#include "ops/layer_norm/cuda_backward_rows.cuh"
#include "ops/layer_norm/cuda_common.cuh"
#include "runtime/cuda/check.h"

namespace liftoff::cuda {

namespace {
using namespace row_norm_kernels;

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gy * weight.
template <int TPR, class T>
__global__ void __launch_bounds__(kBlock)
    input_grad_kernel(const T* gy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd, const T* weight,
                      T* gx, int64_t rows, int64_t cols, Affine affine, bool vec) {
  using A = acc_t<T>;
  __shared__ A scratch[kBlock / kWarp];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kBlock / TPR) + threadIdx.x / TPR;
  const bool active = row < rows;
  const int64_t base = (active ? row : 0) * cols;
  const A mu = active ? mean[row] : A(0), r = active ? rstd[row] : A(0);
  auto grad = [&](int64_t j, T g) {
    const A v = convert<A>(g);
    return weight != nullptr ? v * convert<A>(weight[affine.index(row, j)]) : v;
  };
  A sum_g = A(0), sum_gx = A(0);
  if (active)
    for_row<TPR>(gy + base, cols, vec, [&](int64_t j, T g) {
      const A gw = grad(j, g);
      sum_g += gw;
      sum_gx += gw * (convert<A>(x[base + j]) - mu) * r;
    });
  const A count = static_cast<A>(cols > 0 ? cols : 1);
  const A mean_g = row_sum<TPR>(sum_g, scratch) / count;
  const A mean_gx = row_sum<TPR>(sum_gx, scratch) / count;
  if (!active) return;
  for_row<TPR>(gy + base, cols, vec, [&](int64_t j, T g) {
    const A xhat = (convert<A>(x[base + j]) - mu) * r;
    gx[base + j] = convert<T>(r * (grad(j, g) - mean_g - xhat * mean_gx));
  });
}

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = gy * weight, the row in registers.
template <int G, int E, int V, class T>
__global__ void __launch_bounds__(kBlock)
    input_grad_tile_kernel(const T* gy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd,
                           const T* weight, T* gx, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  using Tile = RowTile<G, E, V>;
  __shared__ A scratch[kBlock / kWarp];
  const int lane = threadIdx.x % G;
  const int64_t row = blockIdx.x * static_cast<int64_t>(Tile::kGroupsPerBlock) + threadIdx.x / G;
  const bool active = row < rows;
  const int64_t offset = (active ? row : 0) * cols;
  const int64_t valid = active ? cols : 0;
  const A mu = active ? mean[row] : A(0), r = active ? rstd[row] : A(0);
  A g[E], xhat[E];
  Tile::load(gy + offset, valid, lane, g, A(0));  // zero past the row: adds nothing below
  Tile::load(x + offset, valid, lane, xhat, A(0));
  if (weight != nullptr) {
    A w[E];
    Tile::load(weight, cols, lane, w, A(0));
#pragma unroll
    for (int e = 0; e < E; ++e) g[e] *= w[e];
  }
  A sum_g = A(0), sum_gx = A(0);
#pragma unroll
  for (int e = 0; e < E; ++e) {
    xhat[e] = (xhat[e] - mu) * r;
    sum_g += g[e];
    sum_gx += g[e] * xhat[e];
  }
  const A count = static_cast<A>(cols);
  const A mean_g = group_all_reduce<G>(sum_g, AddOp{}, scratch) / count;
  const A mean_gx = group_all_reduce<G>(sum_gx, AddOp{}, scratch) / count;
  if (!active) return;
#pragma unroll
  for (int e = 0; e < E; ++e) g[e] = r * (g[e] - mean_g - xhat[e] * mean_gx);
  Tile::store(gx + offset, cols, lane, g);
}

// Writes a block's per-column sums into out[col]: sums[e * kBlock + t] holds thread t's sum for its column
// Tile::column(lane, e); the groups of the block hold the same columns and are added in group order
// (deterministic). Call after a barrier that follows the last update of `sums`.
template <class Tile, int E, class A>
__device__ __forceinline__ void store_block_column_sums(const A* sums, A* out, int64_t cols) {
  constexpr int G = kBlock / Tile::kGroupsPerBlock;
  const int lane = threadIdx.x % G;
  if (threadIdx.x >= G) return;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    A total = sums[e * kBlock + lane];
    for (int k = 1; k < Tile::kGroupsPerBlock; ++k) total += sums[e * kBlock + k * G + lane];
    const int64_t col = Tile::column(lane, e);
    if (col < cols) out[col] = total;
  }
}

// Layer norm backward in one pass over gy and x: gx as input_grad_tile_kernel, and each thread adds gy *
// xhat (weight) and gy (bias) of its columns over the rows its group visits (the grid is one wave; groups
// stride over the rows), then the block's sums go to partials [2][gridDim.x][cols] for finish_kernel. The
// per-thread column sums live in shared memory (a slot per thread and value: no bank conflicts) and the
// registers they free hold the next round's gy and x, fetched before this round's reductions, so a thread
// keeps loads in flight across the block's barriers. 16-bit data also asks L2 for the round after (a bulk
// prefetch: no registers): a thread holds only 16 bytes of each of gy and x of a 1024-value bf16 row, half
// the bytes in flight of f32 for the same work a round (bf16 forward+backward measured 70-73% of the copy
// against 89-97% for its forward alone; f32 94%); a second row fetched into registers spilled at the cap.
// The register cap: 4 blocks an SM for 8 packed values a thread in f32 accumulation (64 registers hold
// them without spills), 2 at 16 values (128 registers), the others take what they need.
template <int E, int V, class T>
constexpr int backward_tile_min_blocks() {
  if (E > 8) return 2;
  return V > 1 && sizeof(acc_t<T>) == 4 ? 4 : 1;
}

template <int G, int E, int V, class T>
__global__ void __launch_bounds__(kBlock, backward_tile_min_blocks<E, V, T>())
    backward_tile_kernel(const T* gy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd, const T* weight,
                         T* gx, acc_t<T>* partials, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  using Tile = RowTile<G, E, V>;
  using Raw = typename Tile::template Raw<T>;
  __shared__ ValuePair<A> scratch[kBlock / kWarp];
  __shared__ A sums_w[E * kBlock], sums_b[E * kBlock];
  const int lane = threadIdx.x % G;
  const int64_t groups = static_cast<int64_t>(gridDim.x) * Tile::kGroupsPerBlock;
  const int64_t first = blockIdx.x * static_cast<int64_t>(Tile::kGroupsPerBlock) + threadIdx.x / G;
  const A count = static_cast<A>(cols);
  A* const my_w = sums_w + threadIdx.x;  // value e at my_w[e * kBlock]
  A* const my_b = sums_b + threadIdx.x;
#pragma unroll
  for (int e = 0; e < E; ++e) my_w[e * kBlock] = my_b[e * kBlock] = A(0);
  Raw weight_raw;
  if (weight != nullptr) Tile::fetch(weight, cols, lane, weight_raw);
  Raw gy_next, x_next;
  A mu_next = A(0), r_next = A(0);
  auto fetch_row = [&](int64_t row) {
    if (row >= rows) return;
    Tile::fetch(gy + row * cols, cols, lane, gy_next);
    Tile::fetch(x + row * cols, cols, lane, x_next);
    mu_next = mean[row];
    r_next = rstd[row];
  };
  // 16-bit data: the row after the next is asked of L2 as well (more bytes in flight, no registers held).
  auto prefetch_row = [&](int64_t row) {
    if (sizeof(T) != 2 || row >= rows) return;
    Tile::prefetch_l2(gy + row * cols, cols, lane);
    Tile::prefetch_l2(x + row * cols, cols, lane);
  };
  fetch_row(first);
  prefetch_row(first + groups);
  // Every thread runs the same rounds: the group reductions synchronise the block when G > 32.
  const int64_t rounds = (rows + groups - 1) / groups;
  for (int64_t round = 0; round < rounds; ++round) {
    const int64_t row = first + round * groups;
    const bool active = row < rows;
    const int64_t valid = active ? cols : 0;
    const A mu = active ? mu_next : A(0), r = active ? r_next : A(0);
    A g[E], xhat[E];
    Tile::unpack(gy_next, valid, lane, g, A(0));  // zero outside the row: adds nothing below
    Tile::unpack(x_next, valid, lane, xhat, A(0));
    if (round + 1 < rounds) fetch_row(row + groups);
#pragma unroll
    for (int e = 0; e < E; ++e) {
      xhat[e] = (xhat[e] - mu) * r;
      my_w[e * kBlock] += g[e] * xhat[e];
      my_b[e * kBlock] += g[e];
    }
    if (weight != nullptr) {
      A w[E];
      Tile::unpack(weight_raw, cols, lane, w, A(0));
#pragma unroll
      for (int e = 0; e < E; ++e) g[e] *= w[e];
    }
    ValuePair<A> sums{A(0), A(0)};  // sum(g), sum(g * xhat)
#pragma unroll
    for (int e = 0; e < E; ++e) {
      sums.first += g[e];
      sums.second += g[e] * xhat[e];
    }
    sums = group_all_reduce<G>(sums, AddOp{}, scratch);
    const A mean_g = sums.first / count, mean_gx = sums.second / count;
    if (round + 2 < rounds) prefetch_row(row + 2 * groups);
    if (active) {
#pragma unroll
      for (int e = 0; e < E; ++e) g[e] = r * (g[e] - mean_g - xhat[e] * mean_gx);
      Tile::store(gx + row * cols, cols, lane, g);
    }
  }
  __syncthreads();
  store_block_column_sums<Tile, E>(sums_w, partials + blockIdx.x * cols, cols);
  store_block_column_sums<Tile, E>(sums_b, partials + (gridDim.x + blockIdx.x) * cols, cols);
}

// The fused backward's tiles: 8 values per thread for rows up to 2048 values, 16 up to 4096 (f32
// accumulation only: 2 x 16 x 256 f64 sums exceed the 48 KB of static shared memory); launch(G, E, V).
// False for longer rows and group norm.
constexpr int64_t kFusedBackwardLimit = int64_t{kBlock} * 16;

template <class T, class Launch>
bool launch_backward_tile(const RowNormShape& s, std::initializer_list<const void*> pointers,
                          Launch&& launch) {
  using std::integral_constant;
  if (s.groups != 1 || s.inner != 1 || s.cols == 0 || s.cols > kFusedBackwardLimit) return false;
  auto with_pack = [&](auto g, auto e) {
    dispatch_pack<T, decltype(e)::value>(s.cols, pointers, [&](auto v) { launch(g, e, v); });
  };
  using Eight = integral_constant<int, 8>;
  if (s.cols <= 8 * 8) {
    with_pack(integral_constant<int, 8>{}, Eight{});
  } else if (s.cols <= 32 * 8) {
    with_pack(integral_constant<int, 32>{}, Eight{});
  } else if (s.cols <= 64 * 8) {
    with_pack(integral_constant<int, 64>{}, Eight{});
  } else if (s.cols <= 128 * 8) {
    with_pack(integral_constant<int, 128>{}, Eight{});
  } else if (s.cols <= kBlock * 8) {
    with_pack(integral_constant<int, kBlock>{}, Eight{});
  } else if constexpr (sizeof(acc_t<T>) > 4) {
    return false;
  } else {
    with_pack(integral_constant<int, kBlock>{}, integral_constant<int, 16>{});
  }
  return true;
}

// One wave of `kernel` (with `shared_bytes` of dynamic shared memory) on `device`, at most the blocks that
// `rows` rows of `groups_per_block` need.
template <class Kernel>
unsigned one_wave(Kernel kernel, int device, int64_t rows, int groups_per_block, int shared_bytes = 0) {
  int sms = 0, per_sm = 0;
  LIFTOFF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  LIFTOFF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlock, shared_bytes));
  const int64_t needed = (rows + groups_per_block - 1) / groups_per_block;
  return static_cast<unsigned>(std::clamp<int64_t>(needed, 1, int64_t{sms} * std::max(per_sm, 1)));
}

// Layer norm's weight/bias gradients, stage 1: block (32, 8) sums 32 columns over one chunk of rows;
// partials [chunks, cols] (weight) and [chunks, cols] (bias) after it.
template <class T>
__global__ void column_partials_kernel(const T* gy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd,
                                       acc_t<T>* partials, int64_t rows, int64_t cols, int64_t chunks) {
  using A = acc_t<T>;
  __shared__ A sw[8][kWarp + 1], sb[8][kWarp + 1];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWarp + threadIdx.x;
  const int64_t chunk = blockIdx.y;
  const int64_t per_chunk = (rows + chunks - 1) / chunks;
  const int64_t end = (chunk + 1) * per_chunk < rows ? (chunk + 1) * per_chunk : rows;
  A w = A(0), b = A(0);
  if (col < cols) {
    for (int64_t row = chunk * per_chunk + threadIdx.y; row < end; row += blockDim.y) {
      const A g = convert<A>(gy[row * cols + col]);
      w += g * (convert<A>(x[row * cols + col]) - mean[row]) * rstd[row];
      b += g;
    }
  }
  sw[threadIdx.y][threadIdx.x] = w;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    for (int k = 1; k < 8; ++k) {
      w += sw[k][threadIdx.x];
      b += sb[k][threadIdx.x];
    }
    partials[chunk * cols + col] = w;
    partials[(chunks + chunk) * cols + col] = b;
  }
}

// Group norm's weight/bias gradients, stage 1: one block per (image n, channel c) sums its inner values
// (contiguous, inside row n * G + c / (C/G)); partials [N, C] (weight) then [N, C] (bias).
template <class T>
__global__ void __launch_bounds__(kBlock)
    channel_partials_kernel(const T* gy, const T* x, const acc_t<T>* mean, const acc_t<T>* rstd,
                            acc_t<T>* partials, int64_t images, int64_t channels, int64_t groups,
                            int64_t inner) {
  using A = acc_t<T>;
  __shared__ A scratch[kBlock / kWarp];
  const int64_t n = blockIdx.y, c = blockIdx.x;
  const int64_t per_group = channels / groups;
  const int64_t row = n * groups + c / per_group;
  const int64_t offset = row * per_group * inner + (c % per_group) * inner;
  const A mu = mean[row], r = rstd[row];
  A w = A(0), b = A(0);
  for (int64_t i = threadIdx.x; i < inner; i += kBlock) {
    const A g = convert<A>(gy[offset + i]);
    w += g * (convert<A>(x[offset + i]) - mu) * r;
    b += g;
  }
  w = row_sum<kBlock>(w, scratch);
  b = row_sum<kBlock>(b, scratch);
  if (threadIdx.x == 0) {
    partials[n * channels + c] = w;
    partials[(images + n) * channels + c] = b;
  }
}

// Stage 2: out[a] = sum over chunks of partials[chunk, a] (weight partials, then bias partials). Block
// (8, 32): 8 adjacent outputs (a whole 32-byte sector of each chunk's row) and 32 lanes adding chunks y,
// y + 32, ... in order, then the 32 lane sums in order. Narrow blocks spread the partials over the GPU:
// 1024 outputs take 128 blocks (32-wide blocks left a few hundred chunks to 32 SMs, latency bound).
constexpr int kFinishOutputs = 8;
constexpr int kFinishLanes = 32;

template <class T>
__global__ void finish_kernel(const acc_t<T>* partials, T* gw, T* gb, int64_t chunks, int64_t size) {
  using A = acc_t<T>;
  __shared__ A sw[kFinishLanes][kFinishOutputs + 1], sb[kFinishLanes][kFinishOutputs + 1];
  const int64_t a = static_cast<int64_t>(blockIdx.x) * kFinishOutputs + threadIdx.x;
  A w = A(0), b = A(0);
  if (a < size) {
#pragma unroll 4
    for (int64_t c = threadIdx.y; c < chunks; c += kFinishLanes) {
      w += partials[c * size + a];
      b += partials[(chunks + c) * size + a];
    }
  }
  sw[threadIdx.y][threadIdx.x] = w;
  sb[threadIdx.y][threadIdx.x] = b;
  __syncthreads();
  if (threadIdx.y == 0 && a < size) {
    for (int k = 1; k < kFinishLanes; ++k) {
      w += sw[k][threadIdx.x];
      b += sb[k][threadIdx.x];
    }
    if (gw != nullptr) gw[a] = convert<T>(w);
    if (gb != nullptr) gb[a] = convert<T>(b);
  }
}

template <class T>
void launch_finish(const acc_t<T>* partials, const Tensor& gw, const Tensor& gb, int64_t chunks, int64_t size,
                   cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((size + kFinishOutputs - 1) / kFinishOutputs);
  finish_kernel<T><<<blocks, dim3(kFinishOutputs, kFinishLanes), 0, stream>>>(
      partials, gw.defined() ? static_cast<T*>(gw.raw_data()) : nullptr,
      gb.defined() ? static_cast<T*>(gb.raw_data()) : nullptr, chunks, size);
  LIFTOFF_LAUNCH_CHECK();
}

template <class T>
void affine_grad(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& gw,
                 const Tensor& gb, const RowNormShape& s, int device) {
  using A = acc_t<T>;
  const cudaStream_t stream = compute_stream(device);
  const int64_t size = s.affine_size();
  const bool per_column = s.groups == 1 && s.inner == 1;
  // Per column: about 64 rows per chunk, at most 256 chunks. Per channel: one chunk per image.
  const int64_t images = s.rows / s.groups;
  const int64_t chunks = per_column ? std::clamp<int64_t>(s.rows / 64, 1, 256) : std::max<int64_t>(images, 1);
  const Tensor partials = Tensor::empty({2 * chunks * size}, mean.dtype(), gy.device());
  A* pd = static_cast<A*>(partials.raw_data());
  if (per_column) {
    LIFTOFF_CHECK(chunks <= 65535, ShapeError, "layer_norm backward: too many row chunks");
    const dim3 grid(static_cast<unsigned>((s.cols + kWarp - 1) / kWarp), static_cast<unsigned>(chunks));
    column_partials_kernel<T><<<grid, dim3(kWarp, 8), 0, stream>>>(ptr<T>(gy), ptr<T>(x), ptr<A>(mean),
                                                                   ptr<A>(rstd), pd, s.rows, s.cols, chunks);
  } else {
    LIFTOFF_CHECK(images <= 65535, ShapeError, "group_norm backward: batch ", images,
                  " exceeds the weight-gradient kernel's grid (65535); split the batch");
    if (images == 0) partials.zero_();
    const dim3 grid(static_cast<unsigned>(size), static_cast<unsigned>(images));
    if (images > 0)
      channel_partials_kernel<T><<<grid, kBlock, 0, stream>>>(
          ptr<T>(gy), ptr<T>(x), ptr<A>(mean), ptr<A>(rstd), pd, images, size, s.groups, s.inner);
  }
  LIFTOFF_LAUNCH_CHECK();
  launch_finish<T>(pd, gw, gb, chunks, size, stream);
}
// backward_rows_kernel<G, E, R, T> (one wave) and the finish kernel (kernels.h's arguments).
template <int G, int E, int R, class T>
void launch_backward_rows_kernel(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                                 const Tensor& weight, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                                 const RowNormShape& s, int device) {
  const auto kernel = backward_rows_kernel<G, E, R, T>;
  constexpr int kShared = rows_shared_bytes<E>();
  if constexpr (kShared > 48 * 1024)  // an opt-in attribute call, allowed during graph capture
    LIFTOFF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kShared));
  const unsigned blocks = one_wave(kernel, device, s.rows, kBlock / G, kShared);
  const Tensor partials = Tensor::empty({2 * int64_t{blocks} * s.cols}, mean.dtype(), gy.device());
  float* pd = static_cast<float*>(partials.raw_data());
  const cudaStream_t stream = compute_stream(device);
  kernel<<<blocks, kBlock, kShared, stream>>>(ptr<T>(gy), ptr<T>(x), ptr<float>(mean), ptr<float>(rstd),
                                              ptr<T>(weight), static_cast<T*>(gx.raw_data()), pd, s.rows,
                                              s.cols);
  LIFTOFF_LAUNCH_CHECK();
  launch_finish<T>(pd, gw, gb, blocks, s.cols, stream);
}
}  // namespace

void row_norm_backward(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& rstd,
                       const Tensor& weight, const Tensor& gx, const Tensor& gw, const Tensor& gb,
                       const RowNormShape& s) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  dispatch_device_float(gy.dtype(), "layer/group norm backward", [&](auto tag) {
    using T = decltype(tag);
    using A = acc_t<T>;
    const bool affine_grads = (gw.defined() || gb.defined()) && s.affine_size() > 0;
    const std::initializer_list<const void*> pointers = {gy.raw_data(), x.raw_data(), gx.raw_data(),
                                                         weight.defined() ? weight.raw_data() : nullptr};
    const bool fuse = gx.defined() && s.rows > 0 && affine_grads;
    if (fuse &&
        launch_backward_rows<T>(resolved_layer_norm_backward(), s, pointers, [&](auto g, auto e, auto r) {
          launch_backward_rows_kernel<decltype(g)::value, decltype(e)::value, decltype(r)::value, T>(
              gy, x, mean, rstd, weight, gx, gw, gb, s, device);
        }))
      return;
    const bool fused =
        fuse && launch_backward_tile<T>(s, pointers, [&](auto g, auto e, auto v) {
          constexpr int G = decltype(g)::value;
          const auto kernel = backward_tile_kernel<G, decltype(e)::value, decltype(v)::value, T>;
          const unsigned blocks = one_wave(kernel, device, s.rows, kBlock / G);
          const Tensor partials = Tensor::empty({2 * int64_t{blocks} * s.cols}, mean.dtype(), gy.device());
          A* pd = static_cast<A*>(partials.raw_data());
          kernel<<<blocks, kBlock, 0, compute_stream(device)>>>(
              ptr<T>(gy), ptr<T>(x), ptr<A>(mean), ptr<A>(rstd), ptr<T>(weight),
              static_cast<T*>(gx.raw_data()), pd, s.rows, s.cols);
          LIFTOFF_LAUNCH_CHECK();
          launch_finish<T>(pd, gw, gb, blocks, s.cols, compute_stream(device));
        });
    if (fused) return;
    const bool tiled = gx.defined() && s.rows > 0 && launch_tile<T>(s, pointers, [&](auto g, auto e, auto v) {
                         constexpr int G = decltype(g)::value;
                         input_grad_tile_kernel<G, decltype(e)::value, decltype(v)::value, T>
                             <<<tile_blocks<G>(s.rows), kBlock, 0, compute_stream(device)>>>(
                                 ptr<T>(gy), ptr<T>(x), ptr<A>(mean), ptr<A>(rstd), ptr<T>(weight),
                                 static_cast<T*>(gx.raw_data()), s.rows, s.cols);
                         LIFTOFF_LAUNCH_CHECK();
                       });
    if (gx.defined() && s.rows > 0 && !tiled) {
      const bool vec = use_vectors<T>(s, {gy.raw_data()});
      by_row_width(s, [&](auto tpr) {
        constexpr int TPR = decltype(tpr)::value;
        const int64_t blocks = (s.rows + kBlock / TPR - 1) / (kBlock / TPR);
        input_grad_kernel<TPR, T><<<static_cast<unsigned>(blocks), kBlock, 0, compute_stream(device)>>>(
            ptr<T>(gy), ptr<T>(x), ptr<A>(mean), ptr<A>(rstd), ptr<T>(weight), static_cast<T*>(gx.raw_data()),
            s.rows, s.cols, affine_of(s), vec);
        LIFTOFF_LAUNCH_CHECK();
      });
    }
    if (affine_grads) affine_grad<T>(gy, x, mean, rstd, gw, gb, s, device);
  });
}

}  // namespace liftoff::cuda
