// Batch norm on CUDA with own kernels rather than cuDNN: the channel count (16..64) is far below the SM
// count, so each channel's reduction is split over several blocks (partial moments per block, merged in a
// fixed order by the channel's last block: deterministic, no float atomics), and the same code serves
// f16/bf16 input with f32 weight/statistics, f32 and f64 (cuDNN's legacy batch-norm API is deprecated in
// cuDNN 9).
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <mutex>
#include <type_traits>

#include "ops/batch_norm2d/cuda_nhwc_resident.cuh"
#include "ops/batch_norm2d/kernels.h"
#include "runtime/config.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {
// Channels-last and not also contiguous (with C == 1 or H * W == 1 both layouts are the same bytes, and the
// NCHW kernels serve).
bool nhwc_layout(const Tensor& x) {
  return x.is_channels_last() && !x.is_contiguous();
}

// Every non-null pointer is 16-byte aligned (the vector kernels' loads and stores).
bool aligned16(std::initializer_list<const void*> data) {
  for (const void* p : data) {
    if (p != nullptr && reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// The grid of an NHWC reduction (cuda_nhwc_kernels.cuh): lanes threads per tile of lanes * vec channels (a
// power of two up to a warp), tiles across C, and row splits so the grid fills every SM about twice while
// each thread still loads at least ~8 vectors. Every split is a partial the tile's last block merges, so
// fewer and fuller blocks beat more of them (twice session 8's four blocks per SM doubled ResNet-50's
// batch-norm time in session 9). With cap_merge the splits also stop where the merge would take more than
// kMaxMergeRounds: right for the statistics (one tensor read), wrong for the gradient, whose three tensors
// need the blocks (capped, MobileNetV2's 144-channel layers went from 30 to 43 us).
struct NhwcGrid {
  int lanes = 1;
  int64_t tiles = 1, splits = 1;
};
NhwcGrid nhwc_grid(int device, int64_t rows, int64_t channels, int vec, bool cap_merge) {
  int sms = 0;
  LIFTOFF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  NhwcGrid g;
  const int64_t vectors = channels / vec;
  while (g.lanes < 32 && g.lanes < vectors) g.lanes *= 2;
  g.tiles = (vectors + g.lanes - 1) / g.lanes;
  const int64_t rows_per_pass = kReduceBlock / g.lanes;
  // Two blocks per SM (their registers allow no third): rounding up would start a second wave of a few
  // blocks (2048 channels: 16 tiles x 17 splits = 272 blocks for 264 places ran ResNet-50's last layers at
  // 1.8 TB/s).
  const int64_t by_fill = std::max<int64_t>(1, 2 * static_cast<int64_t>(sms) / g.tiles);
  const int64_t by_work = (rows + rows_per_pass * 8 - 1) / (rows_per_pass * 8);
  const int64_t merge_groups = std::max<int64_t>(kReduceBlock / (g.lanes * vec), 1);
  const int64_t by_merge = cap_merge ? merge_groups * kMergeInFlight * kMaxMergeRounds : by_fill;
  g.splits = std::clamp<int64_t>(std::min({by_fill, by_work, by_merge}), 1, 65535);
  LIFTOFF_CHECK(g.tiles <= 65535, ShapeError, "batch_norm2d: ", channels, " channels exceed the CUDA grid");
  return g;
}

// Whether the reductions sweep their rows from the last back (sweep_rows; LIFTOFF_BN_SWEEP).
bool reductions_sweep_backward() {
  return config::get_string(config::Knob::bn_sweep).value_or("auto") != "forward";
}

// Blocks of kBlock threads of `kernel` one SM holds at once (the occupancy API, asked once per kernel and
// device).
int blocks_per_sm(const void* kernel, int device) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, int> known;
  const std::lock_guard<std::mutex> lock(mutex);
  const auto [it, added] = known.try_emplace({kernel, device}, 0);
  if (added) {
    LIFTOFF_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&it->second, kernel, kBlock, 0));
  }
  return std::max(it->second, 1);
}

// The grid of an NHWC elementwise pass (normalize, input gradient): blocks of lanes x (kBlock / lanes)
// threads over tiles of lanes * vec channels and row blocks, each thread at least a few rows, and no more
// blocks than the SMs hold at once: a second wave would walk the rows from row 0 again, after the first had
// pushed the rows the reduction left in L2 out of it.
struct ElementwiseGrid {
  dim3 grid, block;
};
ElementwiseGrid nhwc_elementwise_grid(int device, int64_t rows, int64_t channels, int vec,
                                      const void* kernel) {
  int sms = 0;
  LIFTOFF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t vectors = channels / vec;
  int lanes = 1;
  while (lanes < 32 && lanes < vectors) lanes *= 2;
  const int64_t tiles = (vectors + lanes - 1) / lanes;
  const int64_t rows_per_block = kBlock / lanes;
  const int64_t by_rows = (rows + rows_per_block * 4 - 1) / (rows_per_block * 4);
  const int64_t by_fill =
      std::max<int64_t>(1, static_cast<int64_t>(blocks_per_sm(kernel, device)) * sms / tiles);
  const int64_t row_blocks = std::clamp<int64_t>(std::min(by_rows, by_fill), 1, 65535);
  LIFTOFF_CHECK(tiles <= 0x7fffffff, ShapeError, "batch_norm2d: ", channels,
                " channels exceed the CUDA grid");
  return {dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(row_blocks)),
          dim3(static_cast<unsigned>(lanes), static_cast<unsigned>(rows_per_block))};
}

// Launches an NHWC reduction kernel with 16-byte vectors when C allows and the data are aligned, else one
// channel per thread: launch(vec_tag, grid) with vec_tag an std::integral_constant.
template <class T, class Launch>
void launch_nhwc_reduction(int device, int64_t rows, int64_t channels, bool cap_merge,
                           std::initializer_list<const void*> data, Launch&& launch) {
  constexpr int vec = kNhwcVec<T>;
  if (channels % vec == 0 && aligned16(data)) {
    launch(std::integral_constant<int, vec>{}, nhwc_grid(device, rows, channels, vec, cap_merge));
  } else {
    launch(std::integral_constant<int, 1>{}, nhwc_grid(device, rows, channels, 1, cap_merge));
  }
}

// Launches an NHWC elementwise kernel the same way: launch(vec_tag).
template <class T, class Launch>
void launch_nhwc_elementwise(int64_t channels, std::initializer_list<const void*> data, Launch&& launch) {
  constexpr int vec = kNhwcVec<T>;
  if (channels % vec == 0 && aligned16(data)) {
    launch(std::integral_constant<int, vec>{});
  } else {
    launch(std::integral_constant<int, 1>{});
  }
}

// Whether a channels-last training batch norm of x runs each pass in one launch (cuda_nhwc_resident.cuh):
// rows that fit a block's registers, f16/bf16/f32 (f64 keeps the split kernels), LIFTOFF_BN_RESIDENT not off.
bool resident_fits(const Tensor& x) {
  const bool enabled = config::get_string(config::Knob::bn_resident).value_or("auto") != "off";
  return enabled && nhwc_layout(x) && x.dtype() != DType::f64 &&
         x.size(0) * x.size(2) * x.size(3) <= kResidentMaxRows;
}

// Launches a resident kernel: launch(vec_tag, passes_tag), 16-byte vectors when C and the data allow, one
// pass for up to kResidentThreads rows, else kResidentMaxPasses (predicated).
template <class T, class Launch>
void launch_resident(int64_t rows, int64_t channels, std::initializer_list<const void*> data,
                     Launch&& launch) {
  launch_nhwc_elementwise<T>(channels, data, [&](auto vec_tag) {
    if (rows <= kResidentThreads) {
      launch(vec_tag, std::integral_constant<int, 1>{});
    } else {
      launch(vec_tag, std::integral_constant<int, kResidentMaxPasses>{});
    }
  });
}

// Arrival counters of last_block_of_channel, one per channel: the stream's own set (runtime/cuda/context.h),
// so concurrent branches never share them.
unsigned* channel_counters(int device) {
  static_assert(kArrivalCounters >= 65535, "one counter per channel, up to the grid's y limit");
  return arrival_counters(device);
}

// Splits per channel: enough blocks to fill every SM a few times over, each with at least one element per
// thread.
int splits_for(int device, int64_t count, int64_t channels) {
  int sms = 0;
  LIFTOFF_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  int64_t splits = (count + 4095) / 4096;
  splits = std::max<int64_t>(splits, (4 * static_cast<int64_t>(sms) + channels - 1) / channels);
  splits = std::min<int64_t>(splits, (count + kReduceBlock - 1) / kReduceBlock);
  return static_cast<int>(std::clamp<int64_t>(splits, 1, 1024));
}

struct PlaneGrid {
  dim3 grid, block;
};
PlaneGrid plane_grid(int64_t planes, int64_t hw) {
  const int threads = hw <= 64 ? 64 : (hw <= 128 ? 128 : 256);
  const int64_t pixel_blocks = std::min<int64_t>((hw + threads - 1) / threads, 65535);
  LIFTOFF_CHECK(planes <= 0x7fffffff, ShapeError, "batch_norm2d: ", planes,
                " planes (N * C) exceed the CUDA grid");
  return {dim3(static_cast<unsigned>(planes), static_cast<unsigned>(std::max<int64_t>(pixel_blocks, 1))),
          dim3(static_cast<unsigned>(threads))};
}

unsigned channel_blocks(int64_t channels) {
  return static_cast<unsigned>((channels + kFinalizeBlock - 1) / kFinalizeBlock);
}

// y = bn(x) with the saved statistics (+ residual) (ReLU): the normalize pass alone.
template <class T, class W>
void apply_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& save_mean,
                 const Tensor& save_invstd, const BnEpilogue& epilogue, const Tensor& y) {
  using A = acc_t<T>;
  cudaStream_t stream = compute_stream(x.device().index);
  const int64_t batch = x.size(0), channels = x.size(1), hw = x.size(2) * x.size(3);
  const A* sm = static_cast<const A*>(save_mean.raw_data());
  const A* si = static_cast<const A*>(save_invstd.raw_data());
  const T* xp = static_cast<const T*>(x.raw_data());
  const W* w = static_cast<const W*>(weight.raw_data());
  const W* b = static_cast<const W*>(bias.raw_data());
  const T* residual =
      epilogue.residual.defined() ? static_cast<const T*>(epilogue.residual.raw_data()) : nullptr;
  T* out = static_cast<T*>(y.raw_data());
  const A cap = static_cast<A>(epilogue.relu_cap);
  const int64_t total = batch * hw * channels;
  if (total == 0) return;
  if (nhwc_layout(x)) {
    launch_nhwc_elementwise<T>(channels, {xp, out, residual}, [&](auto vec_tag) {
      constexpr int vec = decltype(vec_tag)::value;
      const auto kernel = normalize_nhwc_kernel<T, W, A, vec>;
      const ElementwiseGrid eg = nhwc_elementwise_grid(x.device().index, batch * hw, channels, vec,
                                                       reinterpret_cast<const void*>(kernel));
      kernel<<<eg.grid, eg.block, 0, stream>>>(xp, sm, si, w, b, NhwcRows{channels, batch * hw}, residual,
                                               epilogue.relu, cap, out);
      LIFTOFF_LAUNCH_CHECK();
    });
    return;
  }
  const PlaneGrid pg = plane_grid(batch * channels, hw);
  normalize_kernel<T, W, A>
      <<<pg.grid, pg.block, 0, stream>>>(xp, sm, si, w, b, channels, hw, residual, epilogue.relu, cap, out);
  LIFTOFF_LAUNCH_CHECK();
}

template <class T, class W>
void forward_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                   const Tensor& running_var, bool training, double momentum, double eps,
                   const BnEpilogue& epilogue, const Tensor& y, const Tensor& save_mean,
                   const Tensor& save_invstd) {
  using A = acc_t<T>;
  const int device = x.device().index;
  cudaStream_t stream = compute_stream(device);
  const int64_t channels = x.size(1);
  const int64_t count = x.size(0) * x.size(2) * x.size(3);
  W* rm = running_mean.defined() ? static_cast<W*>(running_mean.raw_data()) : nullptr;
  W* rv = running_var.defined() ? static_cast<W*>(running_var.raw_data()) : nullptr;
  A* sm = static_cast<A*>(save_mean.raw_data());
  A* si = static_cast<A*>(save_invstd.raw_data());
  int64_t* tracked = epilogue.batches_tracked.defined()
                         ? static_cast<int64_t*>(epilogue.batches_tracked.raw_data())
                         : nullptr;
  if (!training) {
    running_stats_kernel<A, W><<<channel_blocks(channels), kFinalizeBlock, 0, stream>>>(
        rm, rv, channels, static_cast<A>(eps), sm, si);
    LIFTOFF_LAUNCH_CHECK();
  } else if (resident_fits(x)) {
    if constexpr (!std::is_same_v<T, double>) {
      const T* xp = static_cast<const T*>(x.raw_data());
      const T* residual =
          epilogue.residual.defined() ? static_cast<const T*>(epilogue.residual.raw_data()) : nullptr;
      // Deferred (skip_normalize): the statistics alone; the normalize pass comes with its epilogue later.
      T* out = epilogue.skip_normalize ? nullptr : static_cast<T*>(y.raw_data());
      const StatsFinalize<A, W> finalize{
          static_cast<A>(count), static_cast<A>(eps), static_cast<A>(momentum), rm, rv, sm, si, tracked};
      launch_resident<T>(count, channels, {xp, residual, out}, [&](auto vec_tag, auto passes_tag) {
        constexpr int vec = decltype(vec_tag)::value, passes = decltype(passes_tag)::value;
        forward_resident_nhwc_kernel<T, A, W, vec, passes>
            <<<static_cast<unsigned>(channels / vec), kResidentThreads, 0, stream>>>(
                xp, channels, count, static_cast<const W*>(weight.raw_data()),
                static_cast<const W*>(bias.raw_data()), finalize, residual, epilogue.relu,
                static_cast<A>(epilogue.relu_cap), out);
        LIFTOFF_LAUNCH_CHECK();
      });
    }
    return;  // normalized too, unless deferred
  } else if (nhwc_layout(x)) {
    const T* xp = static_cast<const T*>(x.raw_data());
    const StatsFinalize<A, W> finalize{
        static_cast<A>(count), static_cast<A>(eps), static_cast<A>(momentum), rm, rv, sm, si, tracked};
    launch_nhwc_reduction<T>(
        device, count, channels, /*cap_merge=*/true, {xp}, [&](auto vec_tag, const NhwcGrid& g) {
          constexpr int vec = decltype(vec_tag)::value;
          const Tensor partial = Tensor::empty({channels, g.splits, 2}, DTypeOf<A>::value, x.device());
          stats_nhwc_kernel<T, A, W, vec>
              <<<dim3(static_cast<unsigned>(g.tiles), static_cast<unsigned>(g.splits)), kReduceBlock, 0,
                 stream>>>(xp, channels, count, reductions_sweep_backward(), g.lanes,
                           static_cast<A*>(partial.raw_data()), channel_counters(device), finalize);
          LIFTOFF_LAUNCH_CHECK();
        });
  } else {
    LIFTOFF_CHECK(channels <= 65535, ShapeError, "batch_norm2d: ", channels,
                  " channels exceed the CUDA grid");
    const int splits = splits_for(device, count, channels);
    const int64_t chunk = (count + splits - 1) / splits;
    const Tensor partial = Tensor::empty({channels, splits, 3}, DTypeOf<A>::value, x.device());
    const StatsFinalize<A, W> finalize{
        static_cast<A>(count), static_cast<A>(eps), static_cast<A>(momentum), rm, rv, sm, si, tracked};
    stats_partial_kernel<T, A, W><<<dim3(splits, static_cast<unsigned>(channels)), kReduceBlock, 0, stream>>>(
        static_cast<const T*>(x.raw_data()), channels, x.size(2) * x.size(3), count, chunk,
        static_cast<A*>(partial.raw_data()), channel_counters(device), finalize);
    LIFTOFF_LAUNCH_CHECK();
  }
  if (!epilogue.skip_normalize) apply_typed<T, W>(x, weight, bias, save_mean, save_invstd, epilogue, y);
}

template <class T, class W>
void backward_typed(const Tensor& x, const Tensor& grad_y, const Tensor& weight, const Tensor& bias,
                    const Tensor& save_mean, const Tensor& save_invstd, bool training, const Tensor& y_relu,
                    double relu_cap, const Tensor& grad_x, const Tensor& grad_weight, const Tensor& grad_bias,
                    const Tensor& grad_residual) {
  using A = acc_t<T>;
  const A cap = static_cast<A>(relu_cap);
  const int device = x.device().index;
  cudaStream_t stream = compute_stream(device);
  const int64_t batch = x.size(0), channels = x.size(1), hw = x.size(2) * x.size(3);
  const int64_t count = batch * hw;
  LIFTOFF_CHECK(channels <= 65535, ShapeError, "batch_norm2d backward: ", channels,
                " channels exceed the CUDA grid");
  const A* sm = static_cast<const A*>(save_mean.raw_data());
  const A* si = static_cast<const A*>(save_invstd.raw_data());
  const T* mask = y_relu.defined() ? static_cast<const T*>(y_relu.raw_data()) : nullptr;
  const bool nhwc = nhwc_layout(x);
  const Tensor coeff = Tensor::empty({channels, 3}, DTypeOf<A>::value, x.device());
  const GradFinalize<A, W> finalize{static_cast<A>(count),
                                    si,
                                    static_cast<const W*>(weight.raw_data()),
                                    training,
                                    grad_weight.defined() ? static_cast<W*>(grad_weight.raw_data()) : nullptr,
                                    grad_bias.defined() ? static_cast<W*>(grad_bias.raw_data()) : nullptr,
                                    static_cast<A*>(coeff.raw_data())};
  T* gx = grad_x.defined() ? static_cast<T*>(grad_x.raw_data()) : nullptr;
  T* gres = grad_residual.defined() ? static_cast<T*>(grad_residual.raw_data()) : nullptr;
  const T* xp = static_cast<const T*>(x.raw_data());
  const T* gyp = static_cast<const T*>(grad_y.raw_data());
  if (nhwc && resident_fits(x)) {
    if constexpr (!std::is_same_v<T, double>) {
      launch_resident<T>(count, channels, {xp, gyp, mask, gx, gres}, [&](auto vec_tag, auto passes_tag) {
        constexpr int vec = decltype(vec_tag)::value, passes = decltype(passes_tag)::value;
        backward_resident_nhwc_kernel<T, A, W, vec, passes>
            <<<static_cast<unsigned>(channels / vec), kResidentThreads, 0, stream>>>(
                xp, gyp, mask, cap, sm, channels, count, finalize, gx, gres);
        LIFTOFF_LAUNCH_CHECK();
      });
    }
    return;
  }
  if (nhwc) {
    // The split passes recompute the ReLU's mask from x where they can (no residual: bias given), reading
    // one tensor fewer each (MaskFromX).
    MaskFromX<A, W> from_x;
    if (mask != nullptr && bias.defined() &&
        config::get_string(config::Knob::bn_mask).value_or("auto") != "read") {
      from_x = {static_cast<const W*>(weight.raw_data()), static_cast<const W*>(bias.raw_data()), si};
      mask = nullptr;
    }
    // A residual's gradient under the output's ReLU mask is the masked gy: the sums pass writes it, and the
    // input gradient reads it in place of gy and the mask.
    T* masked_out = mask != nullptr ? gres : nullptr;
    launch_nhwc_reduction<T>(
        device, count, channels, /*cap_merge=*/false, {xp, gyp, mask, masked_out},
        [&](auto vec_tag, const NhwcGrid& g) {
          constexpr int vec = decltype(vec_tag)::value;
          const Tensor partial = Tensor::empty({channels, g.splits, 2}, DTypeOf<A>::value, x.device());
          grad_nhwc_kernel<T, A, W, vec>
              <<<dim3(static_cast<unsigned>(g.tiles), static_cast<unsigned>(g.splits)), kReduceBlock, 0,
                 stream>>>(xp, gyp, mask, from_x, cap, sm, channels, count, reductions_sweep_backward(),
                           g.lanes, static_cast<A*>(partial.raw_data()), channel_counters(device), finalize,
                           masked_out);
          LIFTOFF_LAUNCH_CHECK();
        });
    if (masked_out != nullptr) {
      gyp = masked_out;
      mask = nullptr;
      gres = nullptr;
    }
    const int64_t total = count * channels;
    if ((gx == nullptr && gres == nullptr) || total == 0) return;
    launch_nhwc_elementwise<T>(channels, {xp, gyp, mask, gx, gres}, [&](auto vec_tag) {
      constexpr int vec = decltype(vec_tag)::value;
      const auto kernel = grad_input_nhwc_kernel<T, A, W, vec>;
      const ElementwiseGrid eg =
          nhwc_elementwise_grid(device, count, channels, vec, reinterpret_cast<const void*>(kernel));
      kernel<<<eg.grid, eg.block, 0, stream>>>(xp, gyp, mask, from_x, cap, sm,
                                               static_cast<const A*>(coeff.raw_data()),
                                               NhwcRows{channels, count}, gx, gres);
      LIFTOFF_LAUNCH_CHECK();
    });
    return;
  }
  const int splits = splits_for(device, std::max<int64_t>(count, 1), channels);
  const int64_t chunk = (count + splits - 1) / splits;
  const Tensor partial = Tensor::empty({channels, splits, 2}, DTypeOf<A>::value, x.device());
  grad_partial_kernel<T, A, W><<<dim3(splits, static_cast<unsigned>(channels)), kReduceBlock, 0, stream>>>(
      static_cast<const T*>(x.raw_data()), static_cast<const T*>(grad_y.raw_data()), mask, cap, sm, channels,
      hw, count, chunk, static_cast<A*>(partial.raw_data()), channel_counters(device), finalize);
  LIFTOFF_LAUNCH_CHECK();
  if ((gx == nullptr && gres == nullptr) || count == 0) return;
  const PlaneGrid pg = plane_grid(batch * channels, hw);
  grad_input_kernel<T, A><<<pg.grid, pg.block, 0, stream>>>(
      static_cast<const T*>(x.raw_data()), static_cast<const T*>(grad_y.raw_data()), mask, cap, sm,
      static_cast<const A*>(coeff.raw_data()), channels, hw, gx, gres);
  LIFTOFF_LAUNCH_CHECK();
}

// Calls fn(T{}, W{}): W is T, or float for f16/bf16 input with f32 parameters.
template <class Fn>
void dispatch_bn(const Tensor& x, const Tensor& weight, const char* op, Fn&& fn) {
  dispatch_device_float(x.dtype(), op, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (IsHalfType<T>::value) {
      if (weight.dtype() == DType::f32) {
        fn(T{}, float{});
        return;
      }
    }
    fn(T{}, T{});
  });
}
}  // namespace

void batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& running_mean,
                        const Tensor& running_var, bool training, double momentum, double eps,
                        const BnEpilogue& epilogue, const Tensor& y, const Tensor& save_mean,
                        const Tensor& save_invstd) {
  DeviceGuard guard(x.device().index);
  if (x.size(1) == 0) return;
  dispatch_bn(x, weight, "batch_norm2d", [&](auto t, auto w) {
    forward_typed<decltype(t), decltype(w)>(x, weight, bias, running_mean, running_var, training, momentum,
                                            eps, epilogue, y, save_mean, save_invstd);
  });
}

bool batch_norm_one_launch(const Tensor& x) {
  return resident_fits(x);
}

void batch_norm_apply(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& save_mean,
                      const Tensor& save_invstd, const BnEpilogue& epilogue, const Tensor& y) {
  DeviceGuard guard(x.device().index);
  if (x.size(1) == 0) return;
  dispatch_bn(x, weight, "batch_norm2d", [&](auto t, auto w) {
    apply_typed<decltype(t), decltype(w)>(x, weight, bias, save_mean, save_invstd, epilogue, y);
  });
}

void batch_norm_backward(const Tensor& x, const Tensor& grad_y, const Tensor& weight, const Tensor& bias,
                         const Tensor& save_mean, const Tensor& save_invstd, bool training,
                         const Tensor& y_relu, double relu_cap, const Tensor& grad_x,
                         const Tensor& grad_weight, const Tensor& grad_bias, const Tensor& grad_residual) {
  DeviceGuard guard(x.device().index);
  if (x.size(1) == 0) return;
  dispatch_bn(x, weight, "batch_norm2d backward", [&](auto t, auto w) {
    backward_typed<decltype(t), decltype(w)>(x, grad_y, weight, bias, save_mean, save_invstd, training,
                                             y_relu, relu_cap, grad_x, grad_weight, grad_bias, grad_residual);
  });
}

}  // namespace liftoff::cuda
