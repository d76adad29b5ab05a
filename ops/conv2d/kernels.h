// Kernels behind conv2d() and conv_transpose2d() (which runs them with the roles of x and y swapped): inputs
// are checked by the front and outputs allocated. x, w, y and the gradients
// are contiguous, or, when channels_last is set (CUDA only), channels-last: x, y, gy, gx NHWC and w, gw KRSC.
#pragma once
#include "runtime/tensor.h"

namespace liftoff {

// Geometry of one conv2d call, computed once by the front.
struct Conv2dShape {
  int64_t n, c, h, w;  // input
  int64_t k, r, s;     // filters
  int64_t oh, ow;      // output
  int64_t stride, padding;
  bool channels_last = false;  // the tensors' layout (set by the front for channels-last CUDA input)
  // c and k split into `groups` independent convolutions (w is [K, C/groups, R, S]); taps `dilation` apart.
  int64_t groups = 1, dilation = 1;
  int64_t cg() const { return c / groups; }  // input channels per group (the weight's second size)
  int64_t kg() const { return k / groups; }  // filters per group
};

namespace cpu {
// y = conv(x, w) + bias; bias may be undefined.
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                    const Conv2dShape& g);
// Writes each defined gradient (gx, gw, gb) from gy; undefined ones are skipped. accumulate_gx: gx holds a
// gradient already, and the input gradient is added to it.
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dShape& g, bool accumulate_gx = false);
}  // namespace cpu
namespace cuda {
// Which cuDNN API runs the convolutions. automatic (default): per shape and direction, the faster of the
// legacy API's best algorithm and the graph API's best engine, both timed on the first call's buffers.
// legacy / graph force one (graph where an engine exists for the shape; f64 and --deterministic stay
// legacy). LIFTOFF_CONV_ENGINES=auto|legacy|graph sets it at start; shapes already planned keep their plan
// under the old setting, as it is part of the plan's key.
enum class ConvEngines { automatic, legacy, graph };
void set_conv_engines(ConvEngines engines);
ConvEngines conv_engines();
// Convolutions (any direction) run through a graph-API plan so far in this process.
int64_t conv_graph_executions();
// Convolutions (any direction) run by the own channels-last depthwise kernels so far in this process
// (ops/conv2d/depthwise.h; LIFTOFF_DEPTHWISE=cudnn sends them to cuDNN instead).
int64_t depthwise_executions();
// Forward passes and weight gradients run by the own channels-last few-input-channel kernels so far in this
// process (ops/conv2d/few_channels.h; LIFTOFF_FEW_CHANNEL_CONV=cudnn sends them to cuDNN instead).
int64_t few_channel_executions();
// Input gradients cuDNN added into a gradient already there (conv2d_backward's accumulate_gx) so far in
// this process.
int64_t conv_accumulated_input_gradients();
// Convolution shapes planned on the device so far (each plan holds its three directions' choices).
int64_t conv_plan_count(int device);
void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                    const Conv2dShape& g);
// accumulate_gx as on the CPU: cuDNN adds the input gradient into gx itself (beta = 1).
void conv2d_backward(const Tensor& x, const Tensor& w, const Tensor& gy, const Tensor& gx, const Tensor& gw,
                     const Tensor& gb, const Conv2dShape& g, bool accumulate_gx = false);
// out = y + bias (per channel of the 4-D output y, NCHW or, with channels_last, NHWC), then ReLU when relu;
// out (y's shape and layout) may be y itself. ops/conv2d/fusion.h defers the bias add to fold a ReLU into it.
void conv2d_add_bias(const Tensor& y, const Tensor& bias, const Tensor& out, bool channels_last, bool relu);
// ReLUs folded into a convolution's bias add (conv2d_add_bias with relu) so far in this process.
int64_t conv_bias_relu_folds();
}  // namespace cuda
}  // namespace liftoff
