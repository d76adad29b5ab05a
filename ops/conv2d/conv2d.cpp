#include "ops/conv2d/conv2d.h"

#include "ops/cast/cast.h"
#include "ops/common/layout.h"
#include "ops/conv2d/fusion.h"
#include "ops/conv2d/kernels.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/branches.h"
#include "runtime/dispatch.h"
#include "runtime/profile/flops.h"

namespace liftoff {

namespace {
Conv2dShape check_conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                         int64_t padding, int64_t dilation, int64_t groups) {
  LIFTOFF_CHECK(x.defined(), ValueError, "conv2d: the input tensor is undefined");
  LIFTOFF_CHECK(weight.defined(), ValueError, "conv2d: the weight tensor is undefined");
  LIFTOFF_CHECK(x.dim() == 4, ShapeError, "conv2d: expected a 4-D input [N, C, H, W], got ",
                shape_str(x.shape()));
  LIFTOFF_CHECK(weight.dim() == 4, ShapeError, "conv2d: expected a 4-D weight [K, C/groups, R, S], got ",
                shape_str(weight.shape()));
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  LIFTOFF_CHECK(is_floating(x.dtype()), DTypeError, "conv2d: input ", shape_str(xs), " has dtype ",
                dtype_name(x.dtype()), "; expected a floating dtype");
  LIFTOFF_CHECK(weight.dtype() == x.dtype(), DTypeError, "conv2d: input ", shape_str(xs), " is ",
                dtype_name(x.dtype()), " but weight ", shape_str(ws), " is ", dtype_name(weight.dtype()),
                "; cast one of them");
  LIFTOFF_CHECK(weight.device() == x.device(), DeviceError, "conv2d: input ", shape_str(xs), " is on ",
                x.device().str(), " but weight ", shape_str(ws), " is on ", weight.device().str());
  if (bias.defined()) {
    LIFTOFF_CHECK(bias.dim() == 1 && bias.size(0) == ws[0], ShapeError, "conv2d: bias ",
                  shape_str(bias.shape()), " does not match weight ", shape_str(ws), "; expected [", ws[0],
                  "]");
    LIFTOFF_CHECK(bias.dtype() == x.dtype(), DTypeError, "conv2d: input ", shape_str(xs), " is ",
                  dtype_name(x.dtype()), " but bias ", shape_str(bias.shape()), " is ",
                  dtype_name(bias.dtype()));
    LIFTOFF_CHECK(bias.device() == x.device(), DeviceError, "conv2d: input ", shape_str(xs), " is on ",
                  x.device().str(), " but bias ", shape_str(bias.shape()), " is on ", bias.device().str());
  }
  LIFTOFF_CHECK(groups >= 1, ValueError, "conv2d: groups must be positive, got ", groups);
  LIFTOFF_CHECK(xs[1] % groups == 0 && ws[0] % groups == 0, ShapeError, "conv2d: input ", shape_str(xs),
                " has ", xs[1], " channels and weight ", shape_str(ws), " has ", ws[0],
                " filters; both must be divisible by groups = ", groups);
  LIFTOFF_CHECK(xs[1] == ws[1] * groups, ShapeError, "conv2d: input ", shape_str(xs), " has ", xs[1],
                " channels but weight ", shape_str(ws), " expects ", ws[1], " x groups (", groups,
                ") = ", ws[1] * groups, "; a weight for groups = g is [K, C/g, R, S]");
  LIFTOFF_CHECK(ws[0] >= 1 && ws[1] >= 1 && ws[2] >= 1 && ws[3] >= 1, ShapeError, "conv2d: weight ",
                shape_str(ws), " must have positive sizes (filters, channels, kernel)");
  LIFTOFF_CHECK(xs[0] >= 0 && xs[2] >= 1 && xs[3] >= 1, ShapeError, "conv2d: input ", shape_str(xs),
                " must have a positive height and width");
  LIFTOFF_CHECK(stride >= 1, ValueError, "conv2d: stride must be positive, got ", stride, " (input ",
                shape_str(xs), ", weight ", shape_str(ws), ")");
  LIFTOFF_CHECK(dilation >= 1, ValueError, "conv2d: dilation must be positive, got ", dilation);
  LIFTOFF_CHECK(padding >= 0, ValueError, "conv2d: padding must be non-negative, got ", padding);
  // The kernel's extent with dilation: a window made only of padding is almost always a mistake.
  const int64_t extent_r = dilation * (ws[2] - 1) + 1, extent_s = dilation * (ws[3] - 1) + 1;
  LIFTOFF_CHECK(padding < extent_r && padding < extent_s, ValueError, "conv2d: padding ", padding,
                " is too large for kernel ", ws[2], "x", ws[3], " with dilation ", dilation, " (weight ",
                shape_str(ws), "); it must be smaller than the kernel's extent");
  Conv2dShape g{};
  g.n = xs[0];
  g.c = xs[1];
  g.h = xs[2];
  g.w = xs[3];
  g.k = ws[0];
  g.r = ws[2];
  g.s = ws[3];
  g.stride = stride;
  g.padding = padding;
  g.dilation = dilation;
  g.groups = groups;
  const int64_t span_h = g.h + 2 * padding - extent_r;
  const int64_t span_w = g.w + 2 * padding - extent_s;
  LIFTOFF_CHECK(span_h >= 0 && span_w >= 0, ShapeError, "conv2d: input ", shape_str(xs), " with padding ",
                padding, " is smaller than kernel ", extent_r, "x", extent_s, " (weight ", shape_str(ws),
                ", dilation ", dilation, "); the output would be empty");
  g.oh = span_h / stride + 1;
  g.ow = span_w / stride + 1;
  return g;
}
}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& weight_in, const Tensor& bias_in, int64_t stride,
              int64_t padding, int64_t dilation, int64_t groups) {
  DType half = DType::f32;
  if (weight_in.defined() && autocast_applies({input, weight_in, bias_in}, &half)) {
    return conv2d(cast(input, half), cast(weight_in, half),
                  bias_in.defined() ? cast(bias_in, half) : Tensor(), stride, padding, dilation, groups);
  }
  Conv2dShape g = check_conv2d(input, weight_in, bias_in, stride, padding, dilation, groups);
  // Channels-last runs cuDNN in NHWC (its tensor-core kernels for f16/bf16): the weight goes KRSC (a small
  // copy unless it is channels-last already), the output and the input gradient stay NHWC. Under autocast an
  // NCHW input is converted here, once: the ops after it keep the layout (ops/common/layout.h).
  const MemoryFormat format = conv_memory_format(input);
  g.channels_last = format == MemoryFormat::channels_last;
  if (counting_flops()) add_flops(gemm_flops(g.n * g.oh * g.ow, g.k, g.cg() * g.r * g.s));
  const MemoryFormat weight_format = weight_in.memory_format();
  const Tensor x = input.contiguous(format);
  const Tensor w = weight_in.detach().contiguous(format);
  const Tensor b = bias_in.defined() ? bias_in.contiguous() : Tensor();
  Tensor y = Tensor::empty({g.n, g.k, g.oh, g.ow}, x.dtype(), x.device(), format);
  // With the bias deferred, a relu that follows adds it in its own pass (ops/conv2d/fusion.h).
  const bool defer_bias = b.defined() && detail::conv_defers_bias(x);
  LIFTOFF_DISPATCH(x.device(), conv2d_forward, x, w, defer_bias ? Tensor() : b, y, g);
  if (defer_bias) detail::defer_conv_bias(y, b, g.channels_last);
  // Record against the caller's tensors: contiguous() of a strided input is a raw copy without grad edges.
  if (should_record({input, weight_in, bias_in})) {
    // Keep only what backward reads: x for the weight gradient, the weight for the input gradient.
    const Tensor x_saved = weight_in.requires_grad() ? x.detach() : Tensor();
    const Tensor w_saved = input.requires_grad() ? w.detach() : Tensor();
    record(
        y, "conv2d", {input, weight_in, bias_in},
        [x_saved, w_saved, g, dtype = x.dtype(), format, weight_format](const Tensor& gy_in,
                                                                        const NeedsGrad& needs) {
          LIFTOFF_CHECK(gy_in.shape() == Shape({g.n, g.k, g.oh, g.ow}) && gy_in.dtype() == dtype, ShapeError,
                        "conv2d backward: gradient ", shape_str(gy_in.shape()), " ",
                        dtype_name(gy_in.dtype()), " does not match the output [", g.n, ", ", g.k, ", ", g.oh,
                        ", ", g.ow, "] ", dtype_name(dtype));
          const Tensor gy = gy_in.contiguous(format);
          const Device dev = gy.device();
          // The input's gradient is added into one already waiting for it (a residual block's skip path)
          // when that one has this layout: the kernels write the sum (on CUDA the faster of cuDNN's beta = 1
          // and a separate sum, timed per shape), the engine skips its own.
          const Shape x_shape{g.n, g.c, g.h, g.w};
          const Tensor waiting = needs[0] ? waiting_gradient(0) : Tensor();
          const bool accumulate = waiting.defined() && waiting.shape() == x_shape &&
                                  waiting.dtype() == dtype && waiting.device() == dev &&
                                  waiting.is_contiguous(format);
          // Everything is allocated on the compute stream, also what the side lane writes: its memory then
          // returns to the compute stream's cache when freed, in that stream's order.
          const Tensor gx = accumulate ? waiting
                            : needs[0] ? Tensor::empty(x_shape, dtype, dev, format)
                                       : Tensor();
          const Tensor gw = needs[1] ? Tensor::empty({g.k, g.cg(), g.r, g.s}, dtype, dev, format) : Tensor();
          const Tensor gb = needs[2] ? Tensor::empty({g.k}, dtype, dev) : Tensor();
          // The weight's gradient in the weight's own layout (a KCRS parameter gets a KCRS gradient).
          const bool convert = gw.defined() && !gw.is_contiguous(weight_format);
          const Tensor gw_out = convert ? Tensor::empty(gw.shape(), dtype, dev, weight_format) : gw;
          const auto weight_and_bias = [&] {
            LIFTOFF_DISPATCH(dev, conv2d_backward, x_saved, w_saved, gy, Tensor(), gw, gb, g);
            if (convert) gw_out.copy_(gw);
            return std::vector<Tensor>{gw_out, gb};
          };
          // With the input's gradient needed too, the weight's goes to the backward's side lane when it
          // runs one (runtime/branches.h): only the leaf reads it, the chain of input gradients goes on.
          detail::BackwardSideLane* side = detail::active_side_lane();
          if (needs[0] && (needs[1] || needs[2]) && side != nullptr) {
            const std::vector<Tensor> wb = side->run({x_saved, w_saved, gy, gw}, weight_and_bias);
            LIFTOFF_DISPATCH(dev, conv2d_backward, x_saved, w_saved, gy, gx, Tensor(), Tensor(), g,
                             accumulate);
            return std::vector<Tensor>{gx, wb[0], wb[1]};
          }
          LIFTOFF_DISPATCH(dev, conv2d_backward, x_saved, w_saved, gy, gx, gw, gb, g, accumulate);
          if (convert) gw_out.copy_(gw);
          return std::vector<Tensor>{gx, gw_out, gb};
        });
  }
  return y;
}

MemoryFormat conv2d_memory_format(const Tensor& x) {
  return conv_memory_format(x);
}

}  // namespace liftoff
