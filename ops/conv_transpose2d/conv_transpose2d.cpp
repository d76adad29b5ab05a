#include "ops/conv_transpose2d/conv_transpose2d.h"

#include "ops/cast/cast.h"
#include "ops/common/layout.h"
#include "ops/conv2d/kernels.h"
#include "ops/conv_transpose2d/kernels.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/dispatch.h"
#include "runtime/profile/flops.h"

namespace liftoff {

namespace {
void check_tensors(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  LIFTOFF_CHECK(x.defined(), ValueError, "conv_transpose2d: the input tensor is undefined");
  LIFTOFF_CHECK(weight.defined(), ValueError, "conv_transpose2d: the weight tensor is undefined");
  LIFTOFF_CHECK(x.dim() == 4, ShapeError, "conv_transpose2d: expected a 4-D input [N, Cin, H, W], got ",
                shape_str(x.shape()));
  LIFTOFF_CHECK(weight.dim() == 4, ShapeError,
                "conv_transpose2d: expected a 4-D weight [Cin, Cout/groups, kH, kW], got ",
                shape_str(weight.shape()));
  LIFTOFF_CHECK(is_floating(x.dtype()), DTypeError, "conv_transpose2d: input ", shape_str(x.shape()),
                " has dtype ", dtype_name(x.dtype()), "; expected a floating dtype");
  for (const Tensor* t : {&weight, &bias}) {
    if (!t->defined()) continue;
    const char* what = t == &weight ? "weight " : "bias ";
    LIFTOFF_CHECK(t->dtype() == x.dtype(), DTypeError, "conv_transpose2d: input ", shape_str(x.shape()),
                  " is ", dtype_name(x.dtype()), " but ", what, shape_str(t->shape()), " is ",
                  dtype_name(t->dtype()), "; cast one of them");
    LIFTOFF_CHECK(t->device() == x.device(), DeviceError, "conv_transpose2d: input ", shape_str(x.shape()),
                  " is on ", x.device().str(), " but ", what, shape_str(t->shape()), " is on ",
                  t->device().str());
  }
}

// The conv2d whose input gradient this transposed convolution is: its input is our output [N, Cout, Ho, Wo],
// its filters are our Cin input channels, its output is our input [N, Cin, H, W].
Conv2dShape check_geometry(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t stride,
                           int64_t padding, int64_t output_padding, int64_t groups, int64_t dilation) {
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  LIFTOFF_CHECK(groups >= 1, ValueError, "conv_transpose2d: groups must be positive, got ", groups);
  LIFTOFF_CHECK(stride >= 1 && dilation >= 1, ValueError, "conv_transpose2d: stride (", stride,
                ") and dilation (", dilation, ") must be positive");
  LIFTOFF_CHECK(padding >= 0 && output_padding >= 0, ValueError, "conv_transpose2d: padding (", padding,
                ") and output_padding (", output_padding, ") must be non-negative");
  LIFTOFF_CHECK(output_padding < stride, ValueError, "conv_transpose2d: output_padding ", output_padding,
                " must be smaller than stride ", stride, " (input ", shape_str(xs), ", weight ",
                shape_str(ws), ")");
  LIFTOFF_CHECK(xs[1] % groups == 0, ShapeError, "conv_transpose2d: input ", shape_str(xs), " has ", xs[1],
                " channels, not divisible by groups = ", groups);
  LIFTOFF_CHECK(ws[0] == xs[1], ShapeError, "conv_transpose2d: input ", shape_str(xs), " has ", xs[1],
                " channels but weight ", shape_str(ws), " expects ", ws[0],
                "; the weight is [Cin, Cout/groups, kH, kW]");
  LIFTOFF_CHECK(ws[1] >= 1 && ws[2] >= 1 && ws[3] >= 1, ShapeError, "conv_transpose2d: weight ",
                shape_str(ws), " must have positive sizes");
  LIFTOFF_CHECK(xs[0] >= 0 && xs[2] >= 1 && xs[3] >= 1, ShapeError, "conv_transpose2d: input ", shape_str(xs),
                " must have a positive height and width");
  const int64_t out_channels = ws[1] * groups;
  if (bias.defined()) {
    LIFTOFF_CHECK(bias.dim() == 1 && bias.size(0) == out_channels, ShapeError, "conv_transpose2d: bias ",
                  shape_str(bias.shape()), " does not match weight ", shape_str(ws), " with groups ", groups,
                  "; expected [", out_channels, "]");
  }
  Conv2dShape g{};
  g.n = xs[0];
  g.c = out_channels;
  g.h = (xs[2] - 1) * stride - 2 * padding + dilation * (ws[2] - 1) + output_padding + 1;
  g.w = (xs[3] - 1) * stride - 2 * padding + dilation * (ws[3] - 1) + output_padding + 1;
  LIFTOFF_CHECK(g.h >= 1 && g.w >= 1, ShapeError, "conv_transpose2d: input ", shape_str(xs), " with weight ",
                shape_str(ws), ", stride ", stride, " and padding ", padding, " gives an empty output ", g.h,
                "x", g.w, "; reduce the padding");
  g.k = xs[1];
  g.r = ws[2];
  g.s = ws[3];
  g.oh = xs[2];
  g.ow = xs[3];
  g.stride = stride;
  g.padding = padding;
  g.dilation = dilation;
  g.groups = groups;
  return g;
}

// gb[c] = sum of gy[:, c] (gy is the output [N, Cout, Ho, Wo]): conv2d's deterministic bias-gradient kernels,
// given a shape whose output is gy and with no other gradient asked for.
Tensor bias_grad(const Tensor& gy, const Conv2dShape& g) {
  Conv2dShape gb_shape = g;
  gb_shape.k = g.c;
  gb_shape.oh = g.h;
  gb_shape.ow = g.w;
  const Tensor gb = Tensor::empty({g.c}, gy.dtype(), gy.device());
  LIFTOFF_DISPATCH(gy.device(), conv2d_backward, Tensor(), Tensor(), gy, Tensor(), Tensor(), gb, gb_shape);
  return gb;
}
}  // namespace

Tensor conv_transpose2d(const Tensor& input, const Tensor& weight_in, const Tensor& bias_in, int64_t stride,
                        int64_t padding, int64_t output_padding, int64_t groups, int64_t dilation) {
  DType half = DType::f32;
  if (weight_in.defined() && autocast_applies({input, weight_in, bias_in}, &half)) {
    return conv_transpose2d(cast(input, half), cast(weight_in, half),
                            bias_in.defined() ? cast(bias_in, half) : Tensor(), stride, padding,
                            output_padding, groups, dilation);
  }
  check_tensors(input, weight_in, bias_in);
  Conv2dShape g =
      check_geometry(input, weight_in, bias_in, stride, padding, output_padding, groups, dilation);
  // The runtime's layout, as conv2d: channels-last under autocast on CUDA (or for a channels-last input),
  // cuDNN in NHWC with KRSC weights; f64 and the CPU NCHW.
  const MemoryFormat format = conv_memory_format(input);
  g.channels_last = format == MemoryFormat::channels_last;
  // The FLOPs of the convolution it is the adjoint of (output gradient [N, Cin, H, W] -> input [N, Cout,
  // ...]).
  if (counting_flops()) add_flops(gemm_flops(g.n * g.oh * g.ow, g.k, g.cg() * g.r * g.s));
  const MemoryFormat weight_format = weight_in.memory_format();
  const Tensor x = input.contiguous(format);
  const Tensor w = weight_in.detach().contiguous(format);
  Tensor y = Tensor::empty({g.n, g.c, g.h, g.w}, x.dtype(), x.device(), format);
  LIFTOFF_DISPATCH(x.device(), conv2d_backward, Tensor(), w, x, y, Tensor(), Tensor(), g);
  if (bias_in.defined()) LIFTOFF_DISPATCH(x.device(), conv_transpose2d_add_bias, y, bias_in.contiguous());
  if (should_record({input, weight_in, bias_in})) {
    const Tensor x_saved = weight_in.requires_grad() ? x.detach() : Tensor();
    const Tensor w_saved = input.requires_grad() ? w.detach() : Tensor();
    record(y, "conv_transpose2d", {input, weight_in, bias_in},
           [x_saved, w_saved, g, dtype = x.dtype(), format, weight_format](const Tensor& gy_in,
                                                                           const NeedsGrad& needs) {
             LIFTOFF_CHECK(gy_in.shape() == Shape({g.n, g.c, g.h, g.w}) && gy_in.dtype() == dtype, ShapeError,
                           "conv_transpose2d backward: gradient ", shape_str(gy_in.shape()), " ",
                           dtype_name(gy_in.dtype()), " does not match the output [", g.n, ", ", g.c, ", ",
                           g.h, ", ", g.w, "] ", dtype_name(dtype));
             const Tensor gy = gy_in.contiguous(format);
             const Device dev = gy.device();
             Tensor gx, gw;
             if (needs[0]) {  // the input gradient is the forward convolution of gy
               gx = Tensor::empty({g.n, g.k, g.oh, g.ow}, dtype, dev, format);
               LIFTOFF_DISPATCH(dev, conv2d_forward, gy, w_saved, Tensor(), gx, g);
             }
             if (needs[1]) {  // conv2d's weight gradient with gy as its input and x as its output gradient
               gw = Tensor::empty({g.k, g.cg(), g.r, g.s}, dtype, dev, format);
               LIFTOFF_DISPATCH(dev, conv2d_backward, gy, Tensor(), x_saved, Tensor(), gw, Tensor(), g);
               gw = gw.contiguous(weight_format);
             }
             const Tensor gb = needs[2] ? bias_grad(gy, g) : Tensor();
             return std::vector<Tensor>{gx, gw, gb};
           });
  }
  return y;
}

}  // namespace liftoff
