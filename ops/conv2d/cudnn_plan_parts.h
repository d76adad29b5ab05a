// conv2d's cuDNN plan and the legacy API's calls, per direction (internal: ops/conv2d/cudnn_plans.cpp is the
// only includer). A Plan holds one shape's legacy descriptors and, per direction, what the search chose (the
// legacy algorithm and a graph-API plan that beat it), plus how backward data adds into a gradient already
// there. The direction traits (Forward, BackwardData, BackwardFilter) give the search one routine for the
// three directions: the plan's slot, the workspace query, cudnnFind*AlgorithmEx, cudnnGet*Algorithm_v7 and
// the execute call, each in its direction's argument order.
#pragma once
#include <cudnn.h>

#include <climits>
#include <cstddef>
#include <memory>

#include "ops/conv2d/cudnn_graph.h"
#include "ops/conv2d/kernels.h"
#include "runtime/cuda/check.h"
#include "runtime/dtype.h"
#include "runtime/error.h"

namespace liftoff::cuda::conv_plans {
namespace {  // NOLINT: included by one translation unit

using conv_graph::Buffers;
using conv_graph::Direction;

cudnnDataType_t cudnn_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return CUDNN_DATA_FLOAT;
    case DType::f64:
      return CUDNN_DATA_DOUBLE;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    default:
      throw DTypeError(
          str_cat("conv2d: dtype ", dtype_name(dtype), " is not supported on CUDA (f32, f64, f16, bf16)"));
  }
}

// f16/bf16 accumulate in f32 on tensor cores; f32 may use TF32 (cuDNN's default math, as PyTorch's default).
cudnnDataType_t compute_dtype(DType dtype) {
  return dtype == DType::f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
}
cudnnMathType_t initial_math(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16 ? CUDNN_TENSOR_OP_MATH : CUDNN_DEFAULT_MATH;
}

// alpha/beta are double for f64 data, float otherwise.
const void* scalar_one(DType dtype) {
  static const float one_f = 1.0f;
  static const double one_d = 1.0;
  return dtype == DType::f64 ? static_cast<const void*>(&one_d) : static_cast<const void*>(&one_f);
}
const void* scalar_zero(DType dtype) {
  static const float zero_f = 0.0f;
  static const double zero_d = 0.0;
  return dtype == DType::f64 ? static_cast<const void*>(&zero_d) : static_cast<const void*>(&zero_f);
}

// The tensors' layout: NCHW (filters KCRS), or NHWC (filters KRSC: cuDNN's tensor-core convolutions want the
// filter in the activations' layout) when the front passes channels-last tensors.
enum class Layout { nchw, nhwc };

// What one direction's search chose: the legacy algorithm, and a graph-API plan that beat it (null: the
// legacy algorithm runs).
template <class Algo>
struct Choice {
  bool found = false;
  bool provisional = false;  // a first guess made under QuickTuningScope: searched on a later use outside it
  Algo algo{};
  size_t workspace_bytes = 0;
  std::shared_ptr<conv_graph::GraphPlan> graph;
};

// One direction: its own convolution descriptor (it carries the math type its algorithm was timed with).
template <class Algo>
struct DirectionPlan {
  cudnnConvolutionDescriptor_t conv = nullptr;
  Choice<Algo> choice;
};

struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
};

// How the input gradient is added into one already there (Call::accumulate), chosen by timing the three
// ways on the shape's first such call: a graph plan built with beta = 1 (searched like the others), the
// legacy algorithm with beta = 1, or aside (the direction's own choice into a temporary, then the engine's
// sum). cuDNN's beta = 1 epilogues are not free: with the chosen engine's own beta = 1 plan,
// ResNet-18's 64-channel input gradients at batch 512 went from 210 to 350 us where the sum took 127 (H100,
// session 28).
struct AccumulateChoice {
  enum class Way { unset, graph, legacy, aside };
  Way way = Way::unset;
  std::shared_ptr<conv_graph::GraphPlan> graph;  // way == graph
};

struct Plan {
  Descriptors tensors;
  DirectionPlan<cudnnConvolutionFwdAlgo_t> forward;
  DirectionPlan<cudnnConvolutionBwdDataAlgo_t> backward_data;
  DirectionPlan<cudnnConvolutionBwdFilterAlgo_t> backward_filter;
  AccumulateChoice accumulate;  // backward data's

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    // Best effort: a destructor must not throw.
    if (tensors.x) cudnnDestroyTensorDescriptor(tensors.x);
    if (tensors.y) cudnnDestroyTensorDescriptor(tensors.y);
    if (tensors.w) cudnnDestroyFilterDescriptor(tensors.w);
    if (forward.conv) cudnnDestroyConvolutionDescriptor(forward.conv);
    if (backward_data.conv) cudnnDestroyConvolutionDescriptor(backward_data.conv);
    if (backward_filter.conv) cudnnDestroyConvolutionDescriptor(backward_filter.conv);
  }
};

// Direction traits: what differs between the three directions of the legacy API (the plan's slot, the
// workspace query, cudnnFind*AlgorithmEx, cudnnGet*Algorithm_v7 and the execute call, each with the
// direction's argument order). Buffers' roles: conv_graph::Buffers.
struct Forward {
  using Algo = cudnnConvolutionFwdAlgo_t;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  static constexpr Direction kDirection = Direction::forward;
  static DirectionPlan<Algo>& of(Plan& p) { return p.forward; }
  static cudnnStatus_t workspace_size(cudnnHandle_t h, const Descriptors& t,
                                      cudnnConvolutionDescriptor_t conv, Algo algo, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, t.x, t.w, conv, t.y, algo, bytes);
  }
  static void find(cudnnHandle_t h, const Descriptors& t, cudnnConvolutionDescriptor_t conv, const Buffers& b,
                   int* returned, Perf* perf, void* ws, size_t ws_bytes) {
    LIFTOFF_CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithmEx(h, t.x, b.x, t.w, b.w, conv, t.y, b.y,
                                                               kAlgoCount, returned, perf, ws, ws_bytes));
  }
  static void guess(cudnnHandle_t h, const Descriptors& t, cudnnConvolutionDescriptor_t conv, int* returned,
                    Perf* perf) {
    LIFTOFF_CUDNN_CHECK(
        cudnnGetConvolutionForwardAlgorithm_v7(h, t.x, t.w, conv, t.y, kAlgoCount, returned, perf));
  }
  static void execute(cudnnHandle_t h, const void* one, const void* beta, const Descriptors& t,
                      cudnnConvolutionDescriptor_t conv, Algo algo, const Buffers& b, void* ws,
                      size_t ws_bytes) {
    LIFTOFF_CUDNN_CHECK(
        cudnnConvolutionForward(h, one, t.x, b.x, t.w, b.w, conv, algo, ws, ws_bytes, beta, t.y, b.y));
  }
};

struct BackwardData {
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  static constexpr Direction kDirection = Direction::backward_data;
  static DirectionPlan<Algo>& of(Plan& p) { return p.backward_data; }
  static cudnnStatus_t workspace_size(cudnnHandle_t h, const Descriptors& t,
                                      cudnnConvolutionDescriptor_t conv, Algo algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, t.w, t.y, conv, t.x, algo, bytes);
  }
  static void find(cudnnHandle_t h, const Descriptors& t, cudnnConvolutionDescriptor_t conv, const Buffers& b,
                   int* returned, Perf* perf, void* ws, size_t ws_bytes) {
    LIFTOFF_CUDNN_CHECK(cudnnFindConvolutionBackwardDataAlgorithmEx(
        h, t.w, b.w, t.y, b.y, conv, t.x, b.x, kAlgoCount, returned, perf, ws, ws_bytes));
  }
  static void guess(cudnnHandle_t h, const Descriptors& t, cudnnConvolutionDescriptor_t conv, int* returned,
                    Perf* perf) {
    LIFTOFF_CUDNN_CHECK(
        cudnnGetConvolutionBackwardDataAlgorithm_v7(h, t.w, t.y, conv, t.x, kAlgoCount, returned, perf));
  }
  static void execute(cudnnHandle_t h, const void* one, const void* beta, const Descriptors& t,
                      cudnnConvolutionDescriptor_t conv, Algo algo, const Buffers& b, void* ws,
                      size_t ws_bytes) {
    LIFTOFF_CUDNN_CHECK(
        cudnnConvolutionBackwardData(h, one, t.w, b.w, t.y, b.y, conv, algo, ws, ws_bytes, beta, t.x, b.x));
  }
};

struct BackwardFilter {
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  static constexpr int kAlgoCount = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT;
  static constexpr Direction kDirection = Direction::backward_filter;
  static DirectionPlan<Algo>& of(Plan& p) { return p.backward_filter; }
  static cudnnStatus_t workspace_size(cudnnHandle_t h, const Descriptors& t,
                                      cudnnConvolutionDescriptor_t conv, Algo algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, t.x, t.y, conv, t.w, algo, bytes);
  }
  static void find(cudnnHandle_t h, const Descriptors& t, cudnnConvolutionDescriptor_t conv, const Buffers& b,
                   int* returned, Perf* perf, void* ws, size_t ws_bytes) {
    LIFTOFF_CUDNN_CHECK(cudnnFindConvolutionBackwardFilterAlgorithmEx(
        h, t.x, b.x, t.y, b.y, conv, t.w, b.w, kAlgoCount, returned, perf, ws, ws_bytes));
  }
  static void guess(cudnnHandle_t h, const Descriptors& t, cudnnConvolutionDescriptor_t conv, int* returned,
                    Perf* perf) {
    LIFTOFF_CUDNN_CHECK(
        cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, t.x, t.y, conv, t.w, kAlgoCount, returned, perf));
  }
  static void execute(cudnnHandle_t h, const void* one, const void* beta, const Descriptors& t,
                      cudnnConvolutionDescriptor_t conv, Algo algo, const Buffers& b, void* ws,
                      size_t ws_bytes) {
    LIFTOFF_CUDNN_CHECK(
        cudnnConvolutionBackwardFilter(h, one, t.x, b.x, t.y, b.y, conv, algo, ws, ws_bytes, beta, t.w, b.w));
  }
};

int as_int(int64_t value, const Conv2dShape& g) {
  LIFTOFF_CHECK(value <= INT_MAX, ShapeError, "conv2d: input [", g.n, ", ", g.c, ", ", g.h, ", ", g.w,
                "] with weight [", g.k, ", ", g.cg(), ", ", g.r, ", ", g.s,
                "] exceeds cuDNN's 32-bit sizes; split the batch");
  return static_cast<int>(value);
}

void make_conv_descriptor(cudnnConvolutionDescriptor_t* desc, const Conv2dShape& g, DType dtype) {
  LIFTOFF_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(desc));
  LIFTOFF_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
      *desc, as_int(g.padding, g), as_int(g.padding, g), as_int(g.stride, g), as_int(g.stride, g),
      as_int(g.dilation, g), as_int(g.dilation, g), CUDNN_CROSS_CORRELATION, compute_dtype(dtype)));
  LIFTOFF_CUDNN_CHECK(cudnnSetConvolutionMathType(*desc, initial_math(dtype)));
  if (g.groups != 1) LIFTOFF_CUDNN_CHECK(cudnnSetConvolutionGroupCount(*desc, as_int(g.groups, g)));
}

std::unique_ptr<Plan> make_plan(DType dtype, const Conv2dShape& g, Layout layout) {
  as_int(g.n * g.c * g.h * g.w, g);
  as_int(g.n * g.k * g.oh * g.ow, g);
  as_int(g.k * g.cg() * g.r * g.s, g);
  auto plan = std::make_unique<Plan>();
  Descriptors& t = plan->tensors;
  const cudnnDataType_t dt = cudnn_dtype(dtype);
  // Sizes are given as (n, c, h, w) in both formats; the format says how memory is ordered.
  const cudnnTensorFormat_t format = layout == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  LIFTOFF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&t.x));
  LIFTOFF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t.x, format, dt, as_int(g.n, g), as_int(g.c, g),
                                                 as_int(g.h, g), as_int(g.w, g)));
  LIFTOFF_CUDNN_CHECK(cudnnCreateTensorDescriptor(&t.y));
  LIFTOFF_CUDNN_CHECK(cudnnSetTensor4dDescriptor(t.y, format, dt, as_int(g.n, g), as_int(g.k, g),
                                                 as_int(g.oh, g), as_int(g.ow, g)));
  LIFTOFF_CUDNN_CHECK(cudnnCreateFilterDescriptor(&t.w));
  // A grouped filter is [K, C/groups, R, S]; the group count is on the convolution descriptors.
  LIFTOFF_CUDNN_CHECK(cudnnSetFilter4dDescriptor(t.w, dt, format, as_int(g.k, g), as_int(g.cg(), g),
                                                 as_int(g.r, g), as_int(g.s, g)));
  make_conv_descriptor(&plan->forward.conv, g, dtype);
  make_conv_descriptor(&plan->backward_data.conv, g, dtype);
  make_conv_descriptor(&plan->backward_filter.conv, g, dtype);
  int dims[4] = {0, 0, 0, 0};
  LIFTOFF_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->forward.conv, t.x, t.w, &dims[0], &dims[1],
                                                            &dims[2], &dims[3]));
  LIFTOFF_CHECK(dims[0] == g.n && dims[1] == g.k && dims[2] == g.oh && dims[3] == g.ow, BackendError,
                "conv2d: cuDNN computes output [", dims[0], ", ", dims[1], ", ", dims[2], ", ", dims[3],
                "] but Liftoff expects [", g.n, ", ", g.k, ", ", g.oh, ", ", g.ow, "]");
  return plan;
}

}  // namespace
}  // namespace liftoff::cuda::conv_plans
