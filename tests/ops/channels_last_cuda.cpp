// Channels-last (NHWC) CUDA inputs through the layout-preserving ops: each op runs on channels-last CUDA
// tensors and is compared with the CPU reference on the same values in NCHW, forward and backward; the output
// and the input gradients must stay channels-last.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ops/add/add.h"
#include "ops/avg_pool2d/avg_pool2d.h"
#include "ops/batch_norm2d/batch_norm2d.h"
#include "ops/binary/binary.h"
#include "ops/cast/cast.h"
#include "ops/conv2d/conv2d.h"
#include "ops/conv2d/kernels.h"
#include "ops/global_avg_pool2d/global_avg_pool2d.h"
#include "ops/max_pool2d/max_pool2d.h"
#include "ops/relu/relu.h"
#include "ops/unary/unary.h"
#include "runtime/autocast.h"
#include "runtime/autograd.h"
#include "runtime/config.h"
#include "tests/common/cuda_test.h"
#include "tests/common/parity.h"

namespace liftoff {
namespace {

constexpr MemoryFormat kCl = MemoryFormat::channels_last;

struct ClInput {
  Tensor value;               // f32 on the CPU; requires_grad when its gradient is checked
  DType dtype = DType::f32;   // on the device
  bool channels_last = true;  // 4-D inputs: channels-last on the device (else contiguous)
};

struct Tol {
  double atol, rtol;
  double param_atol;  // for gradients of inputs that are not 4-D (weights, biases)
};

// The CPU runs fn in f32 NCHW on the values the device sees (rounded to each input's device dtype).
::testing::AssertionResult channels_last_parity(const testing::TensorFn& fn,
                                                const std::vector<ClInput>& inputs, Tol tol,
                                                bool expect_channels_last = true,
                                                std::vector<Tensor>* device_grads = nullptr,
                                                bool whole_graph = false) {
  const Device cuda = Device::cuda(0);
  std::vector<Tensor> cpu, dev;
  for (const ClInput& in : inputs) {
    if (!in.value.defined()) {
      cpu.emplace_back();
      dev.emplace_back();
      continue;
    }
    const bool grad = in.value.requires_grad();
    Tensor c = in.value.detach().to(in.dtype).to(DType::f32).clone();
    const MemoryFormat format = in.value.dim() == 4 && in.channels_last ? kCl : MemoryFormat::contiguous;
    Tensor d = Tensor::empty(in.value.shape(), in.dtype, cuda, format);
    d.copy_(in.value.detach());
    if (grad) {
      c.set_requires_grad(true);
      d.set_requires_grad(true);
    }
    cpu.push_back(c);
    dev.push_back(d);
  }
  const Tensor y_cpu = fn(cpu);
  const Tensor y_dev = fn(dev);
  if (y_dev.dim() == 4 && y_dev.is_channels_last() != expect_channels_last) {
    return ::testing::AssertionFailure()
           << "output " << shape_str(y_dev.shape()) << " has strides " << shape_str(y_dev.strides())
           << "; expected " << (expect_channels_last ? "channels-last" : "contiguous");
  }
  auto r = testing::all_close(y_dev.to(Device::cpu(), DType::f32), y_cpu, tol.atol, tol.rtol);
  if (!r) return ::testing::AssertionFailure() << "forward: " << r.message();
  if (!y_cpu.requires_grad()) return ::testing::AssertionSuccess();

  const Tensor g = testing::random_tensor(y_cpu.shape(), 777, 0.5, 1.5, DType::f32);
  y_cpu.backward(g.to(y_dev.dtype()).to(DType::f32));
  Tensor g_dev = Tensor::empty(y_dev.shape(), y_dev.dtype(), cuda, y_dev.memory_format());
  g_dev.copy_(g);
  // A single op: its own node's gradients, exactly as the op hands them on (layout included). A chain of ops
  // (whole_graph): the leaves' gradients after a full backward.
  std::vector<Tensor> grads;
  if (whole_graph) {
    y_dev.backward(g_dev);
    for (const Tensor& d : dev) grads.push_back(d.defined() && d.requires_grad() ? d.grad() : Tensor());
  } else {
    grads = y_dev.grad_fn()->apply(g_dev);
  }
  if (device_grads != nullptr) *device_grads = grads;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!cpu[i].defined() || !cpu[i].requires_grad()) continue;
    if (i >= grads.size() || !grads[i].defined())
      return ::testing::AssertionFailure() << "input " << i << ": no CUDA gradient";
    if (cpu[i].dim() == 4 && inputs[i].channels_last && expect_channels_last &&
        !grads[i].is_channels_last()) {
      return ::testing::AssertionFailure() << "gradient of input " << i << " has strides "
                                           << shape_str(grads[i].strides()) << "; expected channels-last";
    }
    const double atol = cpu[i].dim() == 4 ? tol.atol : tol.param_atol;
    auto rg = testing::all_close(grads[i].to(Device::cpu(), DType::f32), cpu[i].grad(), atol, tol.rtol);
    if (!rg) return ::testing::AssertionFailure() << "gradient of input " << i << ": " << rg.message();
  }
  return ::testing::AssertionSuccess();
}

Tensor rnd(const Shape& shape, uint64_t seed, double low = -1, double high = 1, bool grad = true) {
  Tensor t = testing::random_tensor(shape, seed, low, high, DType::f32);
  if (grad) t.set_requires_grad(true);
  return t;
}

// A residual r for relu(batch_norm2d(x) + r) whose sum stays at least 0.02 from zero. The device and the CPU
// add the statistics in different orders, so a sum within about 1e-7 of zero can fall on the ReLU's other
// side on one of them: that element's input gradient is then a whole w * invstd * dy apart (the likely cause,
// reasoned rather than measured, of one element of 3.2 million failing in session 33 after a change of
// summation order). x and r are rounded to dtype first, as
// the device sees them; r keeps requires_grad.
Tensor residual_clear_of_relu(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& r,
                              DType dtype) {
  const Tensor xd = x.detach().to(dtype).to(DType::f32);
  const std::vector<float> z =
      batch_norm2d(xd, w.detach(), b.detach(), Tensor(), Tensor(), true).to_vector<float>();
  std::vector<float> values = r.detach().to(dtype).to(DType::f32).to_vector<float>();
  for (size_t i = 0; i < values.size(); ++i) {
    // 0.05 moves the sum past the band, and dtype's rounding of the moved value (at most 2^-7 here) keeps
    // it there.
    if (std::fabs(z[i] + values[i]) < 0.02f) values[i] += z[i] + values[i] >= 0 ? 0.05f : -0.05f;
  }
  Tensor out = Tensor::from_vector(values, r.shape());
  out.set_requires_grad(true);
  return out;
}

// ---- conv2d ----------------------------------------------------------------------------------------------

struct ConvCase {
  Shape x, w;
  bool bias;
  int64_t stride, padding;
};
// ResNet-20 layer kinds (stem, 3x3, strided 3x3, 1x1 projection) plus odd sizes.
const std::vector<ConvCase> kConvCases = {
    {{4, 3, 16, 16}, {16, 3, 3, 3}, false, 1, 1},   {{4, 16, 14, 14}, {32, 16, 3, 3}, false, 2, 1},
    {{4, 16, 14, 14}, {32, 16, 1, 1}, false, 2, 0}, {{3, 5, 9, 7}, {6, 5, 2, 3}, true, 2, 1},
    {{2, 8, 7, 7}, {8, 8, 3, 3}, true, 1, 1},
};

struct DTypeTol {
  DType dtype;
  Tol tol;
};

void expect_conv_cases_match_cpu() {
  // f32 may run TF32 in cuDNN; bf16/f16: 16-bit inputs and outputs, f32 accumulation.
  const DTypeTol kinds[] = {
      {DType::f32, {1e-2, 1e-2, 1e-2}}, {DType::bf16, {1e-1, 5e-2, 1e-1}}, {DType::f16, {3e-2, 2e-2, 3e-2}}};
  for (const DTypeTol& k : kinds) {
    for (const ConvCase& c : kConvCases) {
      const Tensor b = c.bias ? rnd({c.w[0]}, 3) : Tensor();
      const int64_t stride = c.stride, padding = c.padding;
      auto fn = [stride, padding](const std::vector<Tensor>& t) {
        return conv2d(t[0], t[1], t[2], stride, padding);
      };
      EXPECT_TRUE(channels_last_parity(
          fn, {{rnd(c.x, 1), k.dtype}, {rnd(c.w, 2, -0.5, 0.5), k.dtype}, {b, k.dtype}}, k.tol))
          << dtype_name(k.dtype) << " x " << shape_str(c.x) << " w " << shape_str(c.w);
    }
  }
}

TEST(ChannelsLastCuda, Conv2dMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  expect_conv_cases_match_cpu();
}

// The same through cuDNN's graph-API engines (the NHWC tensor-core kernels the automatic choice is after).
TEST(ChannelsLastCuda, Conv2dGraphApiEnginesMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
#if LIFTOFF_WITH_CUDA
  cuda::set_conv_engines(cuda::ConvEngines::graph);
  const int64_t before = cuda::conv_graph_executions();
  expect_conv_cases_match_cpu();
  EXPECT_GT(cuda::conv_graph_executions() - before, 20);
  cuda::set_conv_engines(cuda::ConvEngines::automatic);
#endif
}

// A KCRS (contiguous) weight with channels-last input: converted for cuDNN, its gradient comes back KCRS.
TEST(ChannelsLastCuda, Conv2dWithContiguousWeight) {
  LIFTOFF_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16}) {
    const Tol tol = dt == DType::f32 ? Tol{1e-2, 1e-2, 1e-2} : Tol{1e-1, 5e-2, 1e-1};
    std::vector<Tensor> grads;
    EXPECT_TRUE(channels_last_parity(
        [](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], Tensor(), 1, 1); },
        {{rnd({4, 16, 8, 8}, 5), dt}, {rnd({16, 16, 3, 3}, 6, -0.5, 0.5), dt, /*channels_last=*/false}}, tol,
        true, &grads))
        << dtype_name(dt);
    ASSERT_EQ(grads.size(), 3u);
    EXPECT_TRUE(grads[1].is_contiguous()) << shape_str(grads[1].strides());
  }
}

// f64 has no NHWC path: a channels-last f64 input is computed (correctly) in NCHW.
TEST(ChannelsLastCuda, Conv2dF64FallsBackToNchw) {
  LIFTOFF_REQUIRE_CUDA();
  EXPECT_TRUE(channels_last_parity(
      [](const std::vector<Tensor>& t) { return conv2d(t[0], t[1], t[2], 1, 1); },
      {{rnd({2, 4, 6, 6}, 7), DType::f64}, {rnd({5, 4, 3, 3}, 8), DType::f64}, {rnd({5}, 9), DType::f64}},
      {1e-5, 1e-5, 1e-5}, /*expect_channels_last=*/false));
}

// ---- batch norm ------------------------------------------------------------------------------------------

TEST(ChannelsLastCuda, BatchNormTrainingMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  auto fn = [](const std::vector<Tensor>& t) {
    return batch_norm2d(t[0], t[1], t[2], Tensor(), Tensor(), true);
  };
  // Many rows (several splits), channels that do not divide 256, a few big planes.
  for (const Shape& shape : {Shape{64, 16, 7, 7}, Shape{32, 24, 14, 14}, Shape{2, 3, 40, 40},
                             Shape{128, 16, 16, 16}, Shape{16, 64, 8, 8}}) {
    const int64_t c = shape[1];
    // f32: weight/bias gradients are sums of thousands of largely cancelling terms (see batch_norm2d_cuda).
    EXPECT_TRUE(channels_last_parity(fn, {{rnd(shape, 1, -1, 3)}, {rnd({c}, 2, 0.5, 1.5)}, {rnd({c}, 3)}},
                                     {1e-4, 1e-4, 5e-3}))
        << shape_str(shape);
    // AMP: bf16 activations, f32 parameters.
    EXPECT_TRUE(channels_last_parity(
        fn,
        {{rnd(shape, 1, -1, 3), DType::bf16}, {rnd({c}, 2, 0.5, 1.5), DType::f32}, {rnd({c}, 3), DType::f32}},
        {3e-2, 3e-2, 5e-2}))
        << "bf16 " << shape_str(shape);
  }
  // ResNet-20's bf16 shapes at batch 256: hundreds of splits merged by the last block.
  for (const Shape& shape : {Shape{256, 16, 28, 28}, Shape{256, 32, 14, 14}, Shape{256, 64, 7, 7}}) {
    const int64_t c = shape[1];
    EXPECT_TRUE(channels_last_parity(
        fn,
        {{rnd(shape, 4, -1, 3), DType::bf16}, {rnd({c}, 5, 0.5, 1.5), DType::f32}, {rnd({c}, 6), DType::f32}},
        {3e-2, 3e-2, 5e-2}))
        << "bf16 " << shape_str(shape);
  }
}

TEST(ChannelsLastCuda, BatchNormReluMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  auto with_residual = [](const std::vector<Tensor>& t) {
    return batch_norm2d_relu(t[0], t[1], t[2], Tensor(), Tensor(), true, 0.1, 1e-5, t[3]);
  };
  auto without = [](const std::vector<Tensor>& t) {
    return batch_norm2d_relu(t[0], t[1], t[2], Tensor(), Tensor(), true);
  };
  for (const Shape& shape : {Shape{64, 16, 7, 7}, Shape{8, 32, 14, 14}}) {
    const int64_t c = shape[1];
    for (DType dt : {DType::f32, DType::bf16}) {
      const Tol tol = dt == DType::f32 ? Tol{1e-4, 1e-4, 5e-3} : Tol{3e-2, 3e-2, 5e-2};
      EXPECT_TRUE(channels_last_parity(
          with_residual,
          {{rnd(shape, 7, -1, 3), dt}, {rnd({c}, 8, 0.5, 1.5)}, {rnd({c}, 9)}, {rnd(shape, 99), dt}}, tol))
          << dtype_name(dt) << " " << shape_str(shape);
      EXPECT_TRUE(channels_last_parity(
          without, {{rnd(shape, 7, -1, 3), dt}, {rnd({c}, 8, 0.5, 1.5)}, {rnd({c}, 9)}}, tol))
          << dtype_name(dt) << " " << shape_str(shape);
    }
  }
  // A contiguous residual with a channels-last input: converted to the input's layout.
  EXPECT_TRUE(channels_last_parity(with_residual,
                                   {{rnd({8, 16, 6, 6}, 1)},
                                    {rnd({16}, 2, 0.5, 1.5)},
                                    {rnd({16}, 3)},
                                    {rnd({8, 16, 6, 6}, 4), DType::f32, /*channels_last=*/false}},
                                   {1e-4, 1e-4, 5e-3}));
}

TEST(ChannelsLastCuda, BatchNormEvalMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  EXPECT_TRUE(channels_last_parity(
      [](const std::vector<Tensor>& t) { return batch_norm2d(t[0], t[1], t[2], t[3], t[4], false); },
      {{rnd({16, 8, 5, 5}, 10)},
       {rnd({8}, 11, 0.5, 1.5)},
       {rnd({8}, 12)},
       {rnd({8}, 13, -0.5, 0.5, false)},
       {rnd({8}, 14, 0.5, 2, false)}},
      {1e-5, 1e-5, 1e-4}));
}

TEST(ChannelsLastCuda, BatchNormRunningStatsMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda();
  const Tensor x = rnd({32, 16, 9, 9}, 20, -1, 3, false);
  const Tensor w = rnd({16}, 21, 0.5, 1.5, false), b = rnd({16}, 22, -1, 1, false);
  const Tensor rm_cpu = rnd({16}, 23, -0.5, 0.5, false), rv_cpu = rnd({16}, 24, 0.5, 2, false);
  const Tensor rm_gpu = rm_cpu.to(cuda), rv_gpu = rv_cpu.to(cuda);
  batch_norm2d(x, w, b, rm_cpu, rv_cpu, true);
  const Tensor y = batch_norm2d(x.to(cuda).contiguous(kCl), w.to(cuda), b.to(cuda), rm_gpu, rv_gpu, true);
  EXPECT_TRUE(y.is_channels_last());
  EXPECT_TRUE(testing::all_close(rm_gpu.to(Device::cpu()), rm_cpu, 1e-5, 1e-5));
  EXPECT_TRUE(testing::all_close(rv_gpu.to(Device::cpu()), rv_cpu, 1e-5, 1e-5));
}

// Inputs of at most 2048 rows (N * H * W) take one launch a pass (ops/batch_norm2d/cuda_nhwc_resident.cuh):
// one pass of rows, four predicated ones, the limit itself, a channel count the vectors do not divide, and
// just over the limit (the split kernels), each with a residual add and ReLU6 folded in (weights of 3-5 put
// outputs past the cap); the split kernels (LIFTOFF_BN_RESIDENT=off) pass the same checks. bf16 folds ReLU
// instead: rounding an output near 6 to bf16 flips ReLU6's mask against the f32 reference, a whole
// w * rstd * dy apart (seen on an H100 with either kernel), while rounding never flips a sign.
TEST(ChannelsLastCuda, BatchNormResidentMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  auto capped = [](const std::vector<Tensor>& t) {
    return relu6(batch_norm2d(t[0], t[1], t[2], Tensor(), Tensor(), true) + t[3]);
  };
  auto uncapped = [](const std::vector<Tensor>& t) {
    return relu(batch_norm2d(t[0], t[1], t[2], Tensor(), Tensor(), true) + t[3]);
  };
  for (const char* mode : {"auto", "off"}) {
    config::ScopedSetting setting(config::Knob::bn_resident, mode);
    for (const Shape& shape : {Shape{8, 24, 6, 6}, Shape{128, 40, 2, 2}, Shape{32, 16, 8, 8},
                               Shape{5, 13, 5, 5}, Shape{33, 16, 8, 8}}) {
      const int64_t c = shape[1];
      for (DType dt : {DType::f32, DType::bf16}) {
        const Tol tol = dt == DType::f32 ? Tol{1e-4, 1e-4, 5e-3} : Tol{3e-2, 3e-2, 5e-2};
        EXPECT_TRUE(channels_last_parity(
            dt == DType::f32 ? capped : uncapped,
            {{rnd(shape, 50, -1, 3), dt}, {rnd({c}, 51, 3, 5)}, {rnd({c}, 52, -1, 3)}, {rnd(shape, 53), dt}},
            tol))
            << mode << " " << dtype_name(dt) << " " << shape_str(shape);
      }
    }
  }
}

// The split kernels (more rows than one launch holds) sweep the reductions' rows either way
// (LIFTOFF_BN_SWEEP): both match the CPU, plain, with the ReLU's mask recomputed from x, and with a residual
// (the mask read). The shapes leave a partial last band (rows not a multiple of the grid's row groups), and
// 13 channels take the one-channel-a-thread kernels.
TEST(ChannelsLastCuda, BatchNormSweepsMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const testing::TensorFn plain = [](const std::vector<Tensor>& t) {
    return batch_norm2d(t[0], t[1], t[2], Tensor(), Tensor(), true);
  };
  const testing::TensorFn with_relu = [](const std::vector<Tensor>& t) {
    return relu(batch_norm2d(t[0], t[1], t[2], Tensor(), Tensor(), true));
  };
  const testing::TensorFn with_residual = [](const std::vector<Tensor>& t) {
    return relu(batch_norm2d(t[0], t[1], t[2], Tensor(), Tensor(), true) + t[3]);
  };
  const config::ScopedSetting split(config::Knob::bn_resident, "off");
  for (const char* sweep : {"auto", "forward"}) {
    const config::ScopedSetting sweep_setting(config::Knob::bn_sweep, sweep);
    for (const Shape& shape : {Shape{16, 24, 23, 23}, Shape{9, 13, 31, 31}, Shape{64, 64, 16, 16}}) {
      const int64_t c = shape[1];
      for (DType dt : {DType::f32, DType::bf16}) {
        const Tol tol = dt == DType::f32 ? Tol{1e-4, 1e-4, 5e-3} : Tol{3e-2, 3e-2, 5e-2};
        const Tensor x = rnd(shape, 70, -1, 3), w = rnd({c}, 71, 0.5, 1.5), b = rnd({c}, 72, -1, 1);
        const std::string where = std::string(sweep) + " " + dtype_name(dt) + " " + shape_str(shape);
        EXPECT_TRUE(channels_last_parity(plain, {{x, dt}, {w}, {b}}, tol)) << where << " plain";
        EXPECT_TRUE(channels_last_parity(with_relu, {{x, dt}, {w}, {b}}, tol)) << where << " relu";
        const Tensor r = residual_clear_of_relu(x, w, b, rnd(shape, 73), dt);
        EXPECT_TRUE(channels_last_parity(with_residual, {{x, dt}, {w}, {b}, {r, dt}}, tol))
            << where << " residual";
      }
    }
  }
}

// The one-launch statistics update the running statistics and count the batch as the CPU does.
TEST(ChannelsLastCuda, BatchNormResidentRunningStatsMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda();
  for (const Shape& shape : {Shape{128, 40, 2, 2}, Shape{16, 16, 9, 9}}) {
    const int64_t c = shape[1];
    const Tensor x = rnd(shape, 60, -1, 3, false).to(DType::bf16).to(DType::f32);
    const Tensor w = rnd({c}, 61, 0.5, 1.5, false), b = rnd({c}, 62, -1, 1, false);
    const Tensor rm_cpu = rnd({c}, 63, -0.5, 0.5, false), rv_cpu = rnd({c}, 64, 0.5, 2, false);
    const Tensor rm_gpu = rm_cpu.to(cuda), rv_gpu = rv_cpu.to(cuda);
    const Tensor tracked = Tensor::zeros({}, DType::i64, cuda);
    batch_norm2d(x, w, b, rm_cpu, rv_cpu, true);
    for (DType dt : {DType::bf16, DType::f32}) {
      const Tensor rm = rm_gpu.clone(), rv = rv_gpu.clone();
      const Tensor y = batch_norm2d(x.to(dt).to(cuda).contiguous(kCl), w.to(cuda), b.to(cuda), rm, rv, true,
                                    0.1, 1e-5, tracked);
      EXPECT_TRUE(y.is_channels_last()) << shape_str(shape);
      EXPECT_TRUE(testing::all_close(rm.to(Device::cpu()), rm_cpu, 1e-4, 1e-4)) << shape_str(shape);
      EXPECT_TRUE(testing::all_close(rv.to(Device::cpu()), rv_cpu, 1e-4, 1e-4)) << shape_str(shape);
    }
    EXPECT_EQ(tracked.to_vector<int64_t>()[0], 2) << shape_str(shape);
  }
}

// bf16 activations with f32 running statistics (autocast's layout) through the statistics grid whose splits
// the merge caps (one tile of 256 channels over 12,544 rows) and through three tiles with a partial last one:
// the running statistics the merging block loads before its merge update as on the CPU.
TEST(ChannelsLastCuda, BatchNormRunningStatsBf16WideTilesMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda();
  for (const Shape& shape : {Shape{64, 256, 14, 14}, Shape{16, 520, 6, 6}}) {
    const int64_t c = shape[1];
    const Tensor x = rnd(shape, 40, -1, 3, false).to(DType::bf16).to(DType::f32);  // values bf16 holds
    const Tensor w = rnd({c}, 41, 0.5, 1.5, false), b = rnd({c}, 42, -1, 1, false);
    const Tensor rm_cpu = rnd({c}, 43, -0.5, 0.5, false), rv_cpu = rnd({c}, 44, 0.5, 2, false);
    const Tensor rm_gpu = rm_cpu.to(cuda), rv_gpu = rv_cpu.to(cuda);
    batch_norm2d(x, w, b, rm_cpu, rv_cpu, true);
    const Tensor x_gpu = x.to(DType::bf16).to(cuda).contiguous(kCl);
    const Tensor y = batch_norm2d(x_gpu, w.to(cuda), b.to(cuda), rm_gpu, rv_gpu, true);
    EXPECT_TRUE(y.is_channels_last()) << shape_str(shape);
    EXPECT_TRUE(testing::all_close(rm_gpu.to(Device::cpu()), rm_cpu, 1e-4, 1e-4)) << shape_str(shape);
    EXPECT_TRUE(testing::all_close(rv_gpu.to(Device::cpu()), rv_cpu, 1e-4, 1e-4)) << shape_str(shape);
  }
}

// Any channel count stays channels-last: wide rows split into tiles of channels (several tiles per row, a
// partial last tile), counts that the 16-byte vectors do not divide (one channel per thread), a few rows.
TEST(ChannelsLastCuda, BatchNormWideAndOddChannels) {
  LIFTOFF_REQUIRE_CUDA();
  auto fn = [](const std::vector<Tensor>& t) {
    return batch_norm2d(t[0], t[1], t[2], Tensor(), Tensor(), true);
  };
  auto fused = [](const std::vector<Tensor>& t) {
    return batch_norm2d_relu(t[0], t[1], t[2], Tensor(), Tensor(), true, 0.1, 1e-5, t[3]);
  };
  for (const Shape& shape : {Shape{4, 300, 3, 3}, Shape{8, 2048, 7, 7}, Shape{16, 96, 5, 5},
                             Shape{3, 513, 4, 4}, Shape{64, 256, 14, 14}}) {
    const int64_t c = shape[1];
    EXPECT_TRUE(channels_last_parity(fn, {{rnd(shape, 30, -1, 3)}, {rnd({c}, 31, 0.5, 1.5)}, {rnd({c}, 32)}},
                                     {1e-4, 1e-4, 5e-3}))
        << shape_str(shape);
    const Tensor x = rnd(shape, 33, -1, 3), w = rnd({c}, 34, 0.5, 1.5), b = rnd({c}, 35);
    const Tensor r = residual_clear_of_relu(x, w, b, rnd(shape, 36), DType::bf16);
    EXPECT_TRUE(
        channels_last_parity(fused, {{x, DType::bf16}, {w}, {b}, {r, DType::bf16}}, {3e-2, 3e-2, 5e-2}))
        << "bf16 " << shape_str(shape);
  }
}

// ---- elementwise ops, cast, global average pool ---------------------------------------------------------

TEST(ChannelsLastCuda, ReluMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::bf16}) {
    EXPECT_TRUE(channels_last_parity([](const std::vector<Tensor>& t) { return relu(t[0]); },
                                     {{rnd({4, 16, 5, 7}, 40), dt}}, {0, 0, 0}))
        << dtype_name(dt);
  }
}

TEST(ChannelsLastCuda, AddMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  auto fn = [](const std::vector<Tensor>& t) { return add(t[0], t[1]); };
  for (DType dt : {DType::f32, DType::bf16}) {
    const double tol = dt == DType::f32 ? 1e-6 : 1e-2;
    EXPECT_TRUE(channels_last_parity(fn, {{rnd({4, 16, 5, 7}, 41), dt}, {rnd({4, 16, 5, 7}, 42), dt}},
                                     {tol, tol, tol}))
        << dtype_name(dt);
    // Mixed layouts: the second operand follows the first's.
    EXPECT_TRUE(channels_last_parity(
        fn, {{rnd({4, 16, 5, 7}, 43), dt}, {rnd({4, 16, 5, 7}, 44), dt, /*channels_last=*/false}},
        {tol, tol, tol}))
        << dtype_name(dt);
  }
}

TEST(ChannelsLastCuda, CastKeepsTheLayout) {
  LIFTOFF_REQUIRE_CUDA();
  EXPECT_TRUE(channels_last_parity([](const std::vector<Tensor>& t) { return cast(t[0], DType::bf16); },
                                   {{rnd({4, 16, 5, 7}, 50)}}, {0, 0, 0}));
  // Back to f32: the gradient is rounded to the input's bf16 (the CPU reference's input is f32 already).
  EXPECT_TRUE(channels_last_parity([](const std::vector<Tensor>& t) { return cast(t[0], DType::f32); },
                                   {{rnd({4, 16, 5, 7}, 51), DType::bf16}}, {0, 1e-2, 0}));
}

TEST(ChannelsLastCuda, GlobalAvgPoolMatchesCpu) {
  LIFTOFF_REQUIRE_CUDA();
  auto fn = [](const std::vector<Tensor>& t) { return global_avg_pool2d(t[0]); };
  // Large planes split the pixel sum over several blocks; C = 5 takes the unpacked gradient.
  for (const Shape& shape : {Shape{8, 64, 8, 8}, Shape{3, 5, 7, 9}, Shape{4, 64, 96, 96}}) {
    EXPECT_TRUE(channels_last_parity(fn, {{rnd(shape, 60)}}, {1e-5, 1e-5, 1e-5})) << shape_str(shape);
    EXPECT_TRUE(channels_last_parity(fn, {{rnd(shape, 61), DType::bf16}}, {1e-2, 1e-2, 1e-2}))
        << "bf16 " << shape_str(shape);
  }
}

// conv -> batch norm -> ReLU -> add -> global pool on a channels-last input: the layout holds through the
// chain, and the input's gradient sums its two paths (identity and conv).
TEST(ChannelsLastCuda, ResidualChainKeepsTheLayout) {
  LIFTOFF_REQUIRE_CUDA();
  auto fn = [](const std::vector<Tensor>& t) {
    const Tensor h =
        relu(batch_norm2d(conv2d(t[0], t[1], Tensor(), 1, 1), t[2], t[3], Tensor(), Tensor(), true));
    const Tensor sum = add(h, t[0]);
    if (h.is_cuda()) {
      EXPECT_TRUE(h.is_channels_last());
      EXPECT_TRUE(sum.is_channels_last());
    }
    return global_avg_pool2d(sum);
  };
  // f32 convolutions may run TF32 on the device: a ReLU mask can flip for values near 0.
  EXPECT_TRUE(channels_last_parity(fn,
                                   {{rnd({8, 16, 8, 8}, 70)},
                                    {rnd({16, 16, 3, 3}, 71, -0.3, 0.3)},
                                    {rnd({16}, 72, 0.5, 1.5)},
                                    {rnd({16}, 73)}},
                                   {1e-2, 1e-2, 2e-2}, true, nullptr, /*whole_graph=*/true));
}

// ---- pools -----------------------------------------------------------------------------------------------

// Max and average pooling keep channels-last (the stem's max pool of an ImageNet ResNet sits between two
// channels-last convolutions); overlapping windows (3/2/1) and plain 2x2 ones, odd sizes.
TEST(ChannelsLastCuda, PoolsMatchCpu) {
  LIFTOFF_REQUIRE_CUDA();
  struct PoolCase {
    Shape shape;
    int64_t kernel, stride, padding;
  };
  const PoolCase cases[] = {{{4, 16, 12, 12}, 3, 2, 1}, {{2, 5, 9, 7}, 2, 2, 0}, {{3, 8, 5, 6}, 3, 1, 1}};
  for (const PoolCase& c : cases) {
    const int64_t k = c.kernel, st = c.stride, pad = c.padding;
    for (DType dt : {DType::f32, DType::bf16}) {
      const double tol = dt == DType::f32 ? 1e-6 : 1e-2;
      // Distinct values (no ties) so that the maxima, and so the max-pool gradient, are well defined.
      EXPECT_TRUE(channels_last_parity(
          [k, st, pad](const std::vector<Tensor>& t) { return max_pool2d(t[0], k, st, pad); },
          {{rnd(c.shape, 80), dt}}, {tol, tol, tol}))
          << "max_pool2d " << dtype_name(dt) << " " << shape_str(c.shape) << " k" << k;
      EXPECT_TRUE(channels_last_parity(
          [k, st, pad](const std::vector<Tensor>& t) { return avg_pool2d(t[0], k, st, pad); },
          {{rnd(c.shape, 81), dt}}, {tol, tol, tol}))
          << "avg_pool2d " << dtype_name(dt) << " " << shape_str(c.shape) << " k" << k;
    }
  }
}

// ---- the runtime's layout choice
// ---------------------------------------------------------------------------

// Under bf16 autocast an NCHW f32 input of conv2d is converted once: the output is channels-last bf16, the
// input's gradient comes back f32 (through the autocast cast), and values match the CPU in f32 within bf16
// rounding. Without autocast f32 runs channels-last too; LIFTOFF_CONV_LAYOUT=input keeps NCHW.
TEST(ChannelsLastCuda, AutocastConvolutionRunsChannelsLast) {
  LIFTOFF_REQUIRE_CUDA();
  const Device cuda = Device::cuda(0);
  const Tensor x_cpu = rnd({4, 8, 10, 10}, 90);
  const Tensor w_cpu = rnd({16, 8, 3, 3}, 91, -0.3, 0.3);
  const Tensor y_cpu = conv2d(x_cpu, w_cpu, Tensor(), 1, 1);
  const Tensor g = testing::random_tensor(y_cpu.shape(), 92, -1, 1, DType::f32);
  y_cpu.backward(g);
  const Tensor x = x_cpu.detach().to(cuda).set_requires_grad(true);
  const Tensor w = w_cpu.detach().to(cuda).set_requires_grad(true);
  EXPECT_EQ(conv2d_memory_format(x), kCl);
  EXPECT_TRUE(conv2d(x, w, Tensor(), 1, 1).is_channels_last()) << "f32 without autocast runs channels-last";
  {
    config::ScopedSetting input_layout(config::Knob::conv_layout, "input");
    EXPECT_EQ(conv2d_memory_format(x), MemoryFormat::contiguous);
    EXPECT_FALSE(conv2d(x, w, Tensor(), 1, 1).is_channels_last()) << "LIFTOFF_CONV_LAYOUT=input keeps NCHW";
  }
  Tensor y;
  {
    AutocastGuard autocast(DType::bf16);
    EXPECT_EQ(conv2d_memory_format(x), kCl);
    EXPECT_EQ(conv2d_memory_format(x.to(DType::f64)), MemoryFormat::contiguous);
    y = conv2d(x, w, Tensor(), 1, 1);
  }
  EXPECT_EQ(y.dtype(), DType::bf16);
  EXPECT_TRUE(y.is_channels_last()) << shape_str(y.strides());
  EXPECT_TRUE(testing::all_close(y.to(Device::cpu(), DType::f32), y_cpu, 5e-2, 2e-2));
  y.backward(g.to(cuda).to(DType::bf16));
  ASSERT_TRUE(x.grad().defined() && w.grad().defined());
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  EXPECT_TRUE(testing::all_close(x.grad().to(Device::cpu()), x_cpu.grad(), 5e-2, 2e-2));
  EXPECT_TRUE(testing::all_close(w.grad().to(Device::cpu()), w_cpu.grad(), 2e-1, 2e-2));
}

}  // namespace
}  // namespace liftoff
