// CUDA conv2d: the convolutions run through cuDNN with per-shape plans (cudnn_plans.h: the algorithm search,
// the device's plan cache), channels-last depthwise ones through our own kernels (depthwise.h), and the
// forward and weight gradient of channels-last ones with few input channels too (few_channels.h); this file
// adds the bias and computes its gradient with its own kernels.
#include <algorithm>
#include <atomic>

#include "ops/conv2d/cudnn_plans.h"
#include "ops/conv2d/depthwise.h"
#include "ops/conv2d/few_channels.h"
#include "ops/conv2d/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cuda_types.cuh"

namespace liftoff::cuda {

namespace {

// out = y + bias[channel], then max(., 0) when relu; out may be y. nhwc: y is channels-last (the channel is
// the innermost index).
template <class T>
__global__ void add_bias_kernel(const T* y, const T* bias, T* out, int64_t n, int64_t plane, int64_t channels,
                                bool nhwc, bool relu) {
  LIFTOFF_GRID_STRIDE_LOOP(i, n) {
    const int64_t ch = nhwc ? i % channels : (i / plane) % channels;
    const acc_t<T> v = convert<acc_t<T>>(y[i]) + convert<acc_t<T>>(bias[ch]);
    // As relu's kernel: rounding to T is monotonic and keeps 0, so the bits equal the unfused pair's.
    out[i] = convert<T>(!relu || v > acc_t<T>(0) ? v : acc_t<T>(0));
  }
}

std::atomic<int64_t>& bias_relu_folds() {
  static std::atomic<int64_t> count{0};
  return count;
}

// gb[k] = sum over images and pixels of gy[:, k], in two deterministic passes: each channel's images*plane
// values are cut into `chunks` equal ranges, one block per (range, channel) writes its partial sum, then one
// block per channel adds its partials in range order. (One block per channel left a 32-channel layer at 224
// px with 32 busy blocks: 11.9 of 41.7 ms per step on the H200.)
template <class T>
__global__ void bias_grad_partial_kernel(const T* gy, acc_t<T>* partials, int64_t images, int64_t channels,
                                         int64_t plane, int64_t chunks, bool nhwc) {
  using A = acc_t<T>;
  __shared__ A partial[kBlock];
  const int64_t ch = blockIdx.y;
  const int64_t chunk = blockIdx.x;
  const int64_t count = images * plane;
  const int64_t per_chunk = (count + chunks - 1) / chunks;
  const int64_t begin = chunk * per_chunk;
  const int64_t end = begin + per_chunk < count ? begin + per_chunk : count;
  A sum = A(0);
  if (nhwc) {
    for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) sum += convert<A>(gy[j * channels + ch]);
  } else {
    // Walk whole planes (contiguous runs) so threads read neighbouring values and skip most divisions.
    int64_t img = begin / plane;
    int64_t pix = begin - img * plane;
    int64_t j = begin;
    while (j < end) {
      const int64_t run = (plane - pix) < (end - j) ? (plane - pix) : (end - j);
      const T* row = gy + (img * channels + ch) * plane + pix;
      for (int64_t t = threadIdx.x; t < run; t += blockDim.x) sum += convert<A>(row[t]);
      j += run;
      ++img;
      pix = 0;
    }
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (int offset = kBlock / 2; offset > 0; offset >>= 1) {
    if (threadIdx.x < offset) partial[threadIdx.x] += partial[threadIdx.x + offset];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[ch * chunks + chunk] = partial[0];
}

template <class T>
__global__ void bias_grad_finish_kernel(const acc_t<T>* partials, T* gb, int64_t channels, int64_t chunks) {
  const int64_t ch = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (ch >= channels) return;
  acc_t<T> sum = acc_t<T>(0);
  for (int64_t c = 0; c < chunks; ++c) sum += partials[ch * chunks + c];
  gb[ch] = convert<T>(sum);
}

void require_contiguous(const Tensor& t, const char* what) {
  if (t.defined()) {
    LIFTOFF_CHECK(t.is_contiguous(), ValueError, "conv2d (CUDA): internal: ", what, " ", shape_str(t.shape()),
                  " must be contiguous");
  }
}

// A 4-D tensor (x, w, y or a gradient of one) in the plan's layout.
void require_layout(const Tensor& t, const Conv2dShape& g, const char* what) {
  if (!t.defined()) return;
  const bool ok = g.channels_last ? t.is_channels_last() : t.is_contiguous();
  LIFTOFF_CHECK(ok, ValueError, "conv2d (CUDA): internal: ", what, " ", shape_str(t.shape()),
                " with strides ", shape_str(t.strides()), " must be ",
                g.channels_last ? "channels-last" : "contiguous");
}
}  // namespace

void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                    const Conv2dShape& g) {
  const int device = x.device().index;
  DeviceGuard guard(device);
  if (g.n == 0) return;
  require_layout(x, g, "input");
  require_layout(w, g, "weight");
  require_layout(y, g, "output");
  const DType dtype = x.dtype();
  if (depthwise::applies(g, dtype)) {
    depthwise::forward(x, w, y, g);
  } else if (few_channels::applies(g, dtype)) {
    few_channels::forward(x, w, y, g);
  } else {
    const conv_plans::Call call{conv_graph::Direction::forward, {x.raw_data(), w.raw_data(), y.raw_data()}};
    conv_plans::run(device, dtype, g, &call, 1);
  }
  if (bias.defined()) conv2d_add_bias(y, bias, y, g.channels_last, false);
}

void conv2d_add_bias(const Tensor& y, const Tensor& bias, const Tensor& out, bool channels_last, bool relu) {
  const int device = y.device().index;
  DeviceGuard guard(device);
  require_contiguous(bias, "bias");
  const int64_t n = y.numel();
  if (n == 0) return;
  const int64_t channels = y.size(1), plane = y.size(2) * y.size(3);
  dispatch_device_float(y.dtype(), "conv2d", [&](auto tag) {
    using T = decltype(tag);
    add_bias_kernel<T><<<grid_for(n), kBlock, 0, compute_stream(device)>>>(
        static_cast<const T*>(y.raw_data()), static_cast<const T*>(bias.raw_data()),
        static_cast<T*>(out.raw_data()), n, plane, channels, channels_last, relu);
    LIFTOFF_LAUNCH_CHECK();
  });
  if (relu) bias_relu_folds().fetch_add(1, std::memory_order_relaxed);
}

int64_t conv_bias_relu_folds() {
  return bias_relu_folds().load(std::memory_order_relaxed);
}

void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dShape& g, bool accumulate_gx) {
  const int device = gy.device().index;
  DeviceGuard guard(device);
  require_layout(gy, g, "output gradient");
  require_layout(gx, g, "input gradient");
  require_layout(gw, g, "weight gradient");
  require_contiguous(gb, "bias gradient");
  const DType dtype = gy.dtype();
  if (gb.defined() && g.k > 0) {
    // About 1024 blocks in all, at least 8192 values each; a fixed split: the sum does not depend on timing.
    const int64_t count = g.n * g.oh * g.ow;
    const int64_t chunks =
        std::max<int64_t>(1, std::min<int64_t>(count / 8192, std::max<int64_t>(1, 1024 / g.k)));
    LIFTOFF_CHECK(g.k <= 65535, ShapeError, "conv2d backward: ", g.k,
                  " output channels exceed the bias kernel's "
                  "grid (65535)");
    const DType acc = dtype == DType::f64 ? DType::f64 : DType::f32;
    const Tensor partials = Tensor::empty({g.k * chunks}, acc, gy.device());
    dispatch_device_float(dtype, "conv2d backward", [&](auto tag) {
      using T = decltype(tag);
      using A = acc_t<T>;
      const dim3 grid(static_cast<unsigned>(chunks), static_cast<unsigned>(g.k));
      bias_grad_partial_kernel<T><<<grid, kBlock, 0, compute_stream(device)>>>(
          static_cast<const T*>(gy.raw_data()), static_cast<A*>(partials.raw_data()), g.n, g.k, g.oh * g.ow,
          chunks, g.channels_last);
      LIFTOFF_LAUNCH_CHECK();
      const auto finish_blocks = static_cast<unsigned>((g.k + kBlock - 1) / kBlock);
      bias_grad_finish_kernel<T><<<finish_blocks, kBlock, 0, compute_stream(device)>>>(
          static_cast<const A*>(partials.raw_data()), static_cast<T*>(gb.raw_data()), g.k, chunks);
      LIFTOFF_LAUNCH_CHECK();
    });
  } else if (gb.defined()) {
    gb.zero_();
  }
  if (!gx.defined() && !gw.defined()) return;
  if (gx.defined() && accumulate_gx && depthwise::applies(g, dtype)) {
    // The depthwise kernels overwrite: the input gradient is computed aside and added.
    const Tensor gx_aside = Tensor::empty(gx.shape(), dtype, gx.device(), gx.memory_format());
    conv2d_backward(x, w, gy, gx_aside, gw, Tensor(), g);
    accumulate_into(gx, gx_aside);
    return;
  }
  if (g.n == 0) {
    if (gw.defined()) gw.zero_();
    return;
  }
  require_layout(x, g, "input");
  require_layout(w, g, "weight");
  // Only what a direction needs is defined (the front saves w only for gx, x only for gw).
  if (depthwise::applies(g, dtype)) {
    if (gx.defined()) depthwise::backward_data(gy, w, gx, g);
    if (gw.defined()) depthwise::backward_weight(x, gy, gw, g);
    return;
  }
  // The few-channel kernels take the weight gradient; the input gradient stays with cuDNN.
  const bool own_weight_gradient = gw.defined() && few_channels::applies_to_weight_gradient(g, dtype);
  if (own_weight_gradient) few_channels::backward_weight(x, gy, gw, g);
  auto data_of = [](const Tensor& t) { return t.defined() ? t.raw_data() : nullptr; };
  conv_plans::Call calls[2];
  size_t count = 0;
  if (gx.defined()) {
    calls[count++] = {
        conv_graph::Direction::backward_data, {data_of(gx), data_of(w), gy.raw_data()}, accumulate_gx};
  }
  if (gw.defined() && !own_weight_gradient) {
    calls[count++] = {conv_graph::Direction::backward_filter, {data_of(x), data_of(gw), gy.raw_data()}};
  }
  if (count > 0) conv_plans::run(device, dtype, g, calls, count);
}

}  // namespace liftoff::cuda
