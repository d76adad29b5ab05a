// conv_bn_stats_bench: would batch norm's statistics pass pay for itself inside the convolution? For
// channels-last convolution shapes of the panel's models it times, in one process:
//   conv      Liftoff's conv2d forward (the engine its search keeps),
//   bn train  batch_norm2d in training mode on that output (statistics pass + normalize),
//   bn eval   batch_norm2d in eval mode (the normalize alone), so train - eval is the statistics pass,
// and, per fusion form, cuDNN's graph API asked for the convolution with the per-channel sum and sum of
// squares of its output in the same graph: `genstats` (the GenStats operation) and `reduce` (two reduction
// operations, one after a pointwise square). Every engine configuration the heuristics (modes A and fallback)
// offer is finalized (`finalize`: the slowest one's time, run-time compilation included) and timed; the
// fastest that runs is reported with its sums' largest relative error against float64 sums of the same output
// read back. `saves` = conv + (bn train - bn eval) - fused: what a step would gain per layer. Not run in CI
// (needs a GPU).
//   conv_bn_stats_bench [--dtype bf16|f16|f32] [--reps 20] [--rounds 5]
#include <cudnn.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "liftoff.h"
#include "ops/conv2d/cudnn_graph.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cudnn_backend.h"
#include "tools/bench/median_time.h"

namespace {

using namespace liftoff;
using cuda::BackendDesc;

struct ConvShape {
  const char* model;
  int64_t n, c, h, k, r, stride;
};

constexpr int64_t kX = 1, kW = 2, kY = 3, kSum = 4, kSqSum = 5, kSquare = 6;

// The benched shape as conv2d's CUDA path describes it (channels-last, padding r / 2).
Conv2dShape conv_shape(const ConvShape& s) {
  const int64_t pad = s.r / 2, oh = (s.h + 2 * pad - s.r) / s.stride + 1;
  Conv2dShape g{s.n, s.c, s.h, s.h, s.k, s.r, s.r, oh, oh, s.stride, pad};
  g.channels_last = true;
  return g;
}

// The convolution and its output statistics as one operation graph; the descriptors live as long as it.
struct FusedGraph {
  std::vector<BackendDesc> parts;
  BackendDesc graph{CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR};
};

void build(FusedGraph& fg, bool genstats, cudnnHandle_t handle, const ConvShape& s, DType dtype) {
  using cuda::conv_graph::make_tensor;
  const Conv2dShape g = conv_shape(s);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  auto& p = fg.parts;
  p.push_back(make_tensor(kX, dtype, g.n, g.c, g.h, g.w, true));
  p.push_back(make_tensor(kW, dtype, g.k, g.c, g.r, g.s, true));
  p.push_back(make_tensor(kY, dtype, g.n, g.k, g.oh, g.ow, true));
  p.push_back(make_tensor(kSum, DType::f32, 1, g.k, 1, 1, true));
  p.push_back(make_tensor(kSqSum, DType::f32, 1, g.k, 1, 1, true));
  const BackendDesc &x = p[0], &w = p[1], &y = p[2], &sum = p[3], &sqsum = p[4];
  BackendDesc conv = cuda::conv_graph::make_convolution(g);
  const float alpha = 1.0f, beta = 0.0f;
  BackendDesc conv_op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  conv_op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, x)
      .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, w)
      .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, y)
      .set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha)
      .set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
  conv_op.finalize();
  std::vector<cudnnBackendDescriptor_t> ops{conv_op.get()};
  p.push_back(std::move(conv));
  p.push_back(std::move(conv_op));
  if (genstats) {
    const cudnnGenStatsMode_t stats_mode = CUDNN_GENSTATS_SUM_SQSUM;
    BackendDesc op(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &stats_mode)
        .set(CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32)
        .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_XDESC, y)
        .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, sum)
        .set_desc(CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, sqsum);
    op.finalize();
    ops.push_back(op.get());
    p.push_back(std::move(op));
  } else {
    p.push_back(make_tensor(kSquare, DType::f32, g.n, g.k, g.oh, g.ow, true, /*is_virtual=*/true));
    const BackendDesc& square = p.back();
    const cudnnPointwiseMode_t mul = CUDNN_POINTWISE_MUL;
    BackendDesc pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mul)
        .set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    pw.finalize();
    BackendDesc square_op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    square_op.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, y)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, y)
        .set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, square);
    square_op.finalize();
    const cudnnReduceTensorOp_t add = CUDNN_REDUCE_TENSOR_ADD;
    BackendDesc reduction(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    reduction.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &add)
        .set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    reduction.finalize();
    const auto reduce_into = [&](const BackendDesc& from, const BackendDesc& into) {
      BackendDesc op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
      op.set_desc(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, from)
          .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, into)
          .set_desc(CUDNN_ATTR_OPERATION_REDUCTION_DESC, reduction);
      op.finalize();
      return op;
    };
    BackendDesc sum_op = reduce_into(y, sum), sqsum_op = reduce_into(square, sqsum);
    ops.push_back(square_op.get());
    ops.push_back(sum_op.get());
    ops.push_back(sqsum_op.get());
    for (BackendDesc* d : {&pw, &square_op, &reduction, &sum_op, &sqsum_op}) p.push_back(std::move(*d));
  }
  fg.graph
      .set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops.size()),
           ops.data())
      .set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  fg.graph.finalize();
}

bool compiles_at_run_time(const BackendDesc& config) {
  BackendDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  cuda::engine_global_index(config, &engine);
  cudnnBackendBehaviorNote_t notes[CUDNN_BEHAVIOR_NOTE_TYPE_COUNT];
  int64_t count = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE,
                               CUDNN_BEHAVIOR_NOTE_TYPE_COUNT, &count, notes) != CUDNN_STATUS_SUCCESS) {
    return false;
  }
  return std::find(notes, notes + count, CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION) != notes + count;
}

struct Fused {
  std::string note = "no engine ran";
  double ms = 0, worst_finalize_ms = 0, sum_error = 0, sqsum_error = 0;
  int64_t engine = -1;
  int configs = 0, ran = 0;
  bool runtime_compiled = false;
};

double max_relative_error(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    worst = std::max(worst, std::abs(got[i] - want[i]) / std::max(1.0, std::abs(want[i])));
  }
  return worst;
}

Fused time_fused(bool genstats, const ConvShape& s, DType dtype, const Tensor& x, const Tensor& w, int reps,
                 int rounds) {
  Fused best;
  const Device device = x.device();
  cudnnHandle_t handle = cuda::cudnn_handle(device.index);
  FusedGraph fg;
  try {
    build(fg, genstats, handle, s, dtype);
  } catch (const Error& e) {
    best.note = str_cat("graph refused: ", e.what());
    return best;
  }
  const Conv2dShape g = conv_shape(s);
  const Tensor y = Tensor::empty({g.n, g.k, g.oh, g.ow}, dtype, device, MemoryFormat::channels_last);
  const Tensor sum = Tensor::zeros({s.k}, DType::f32, device),
               sqsum = Tensor::zeros({s.k}, DType::f32, device);
  std::vector<BackendDesc> configs;
  for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
    try {
      for (BackendDesc& c : cuda::heuristic_engine_configs(fg.graph, mode, 16))
        configs.push_back(std::move(c));
    } catch (const Error& e) {
      best.note = str_cat("heuristics refused: ", e.what());
    }
  }
  best.configs = static_cast<int>(configs.size());
  for (const BackendDesc& config : configs) {
    BackendDesc plan(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    const auto began = std::chrono::steady_clock::now();
    int64_t workspace = 0, count = 0;
    try {
      plan.set_desc(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config)
          .set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      plan.finalize();
      cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1,
                               &count, &workspace);
    } catch (const Error& e) {
      best.note = str_cat("plan refused: ", e.what());
      continue;
    }
    const double finalize_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count();
    best.worst_finalize_ms = std::max(best.worst_finalize_ms, finalize_ms);
    const Tensor ws = Tensor::empty({std::max<int64_t>(workspace, 16)}, DType::u8, device);
    void* pointers[5] = {x.raw_data(), w.raw_data(), y.raw_data(), sum.raw_data(), sqsum.raw_data()};
    const int64_t uids[5] = {kX, kW, kY, kSum, kSqSum};
    void* ws_ptr = ws.raw_data();
    BackendDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 5, uids)
        .set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 5, pointers)
        .set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws_ptr);
    pack.finalize();
    const auto run = [&] {
      const cudnnStatus_t status = cudnnBackendExecute(handle, plan.get(), pack.get());
      if (status != CUDNN_STATUS_SUCCESS) throw BackendError(cudnnGetErrorString(status));
    };
    try {
      sum.zero_();
      sqsum.zero_();
      run();
      synchronize(device);
    } catch (const Error& e) {
      best.note = str_cat("execute refused: ", e.what());
      continue;
    }
    ++best.ran;
    // Reference sums of the output this engine wrote, in float64.
    const std::vector<float> values = y.to(DType::f32).contiguous().to_vector<float>();  // NCHW order
    std::vector<double> want_sum(s.k, 0.0), want_sq(s.k, 0.0);
    const int64_t plane = g.oh * g.ow;
    for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) {
      const int64_t channel = (i / plane) % s.k;
      want_sum[channel] += values[i];
      want_sq[channel] += static_cast<double>(values[i]) * values[i];
    }
    const double sum_error = max_relative_error(sum.to_vector<float>(), want_sum);
    const double sq_error = max_relative_error(sqsum.to_vector<float>(), want_sq);
    const double ms = 1e3 * bench::median_seconds(run, device, reps, rounds);
    if (best.engine < 0 || ms < best.ms) {
      best.ms = ms;
      best.engine = cuda::engine_global_index(config);
      best.runtime_compiled = compiles_at_run_time(config);
      best.sum_error = sum_error;
      best.sqsum_error = sq_error;
      best.note = "";
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conv_bn_stats_bench: batch norm's statistics inside the convolution (cuDNN graph API)"};
  std::string dtype_arg = "bf16";
  int reps = 20, rounds = 5;
  app.add_option("--dtype", dtype_arg, "bf16, f16 or f32")->capture_default_str();
  app.add_option("--reps", reps, "launches per timing")->capture_default_str();
  app.add_option("--rounds", rounds, "timings (median reported)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows as they come: a run cut short keeps them
  try {
    const Device device = Device::parse("cuda");
    const DType dtype = parse_dtype(dtype_arg);
    // Convolutions of the panel's models (channels-last, batch as in the panel rows).
    const std::vector<ConvShape> shapes = {
        {"resnet18", 128, 64, 32, 64, 3, 1},      {"resnet18", 128, 128, 16, 128, 3, 1},
        {"resnet18", 128, 256, 8, 256, 3, 1},     {"resnet18", 128, 512, 4, 512, 3, 1},
        {"resnet18", 128, 64, 32, 128, 3, 2},     {"mobilenet_v2", 128, 24, 16, 144, 1, 1},
        {"mobilenet_v2", 128, 144, 16, 24, 1, 1}, {"mobilenet_v2", 128, 192, 8, 32, 1, 1},
        {"mobilenet_v2", 128, 384, 4, 64, 1, 1},  {"mobilenet_v2", 128, 960, 2, 160, 1, 1},
        {"resnet50", 64, 64, 56, 256, 1, 1},      {"resnet50", 64, 256, 56, 64, 1, 1},
        {"resnet50", 64, 64, 56, 64, 3, 1}};
    Generator gen(11);
    std::printf("%-13s %-22s %8s %8s %8s | %-8s %7s %5s %4s %10s %8s %9s %9s %8s\n", "model",
                "[N,C,H]->K rxr s", "conv ms", "bn trn", "bn eval", "form", "engine", "rtc", "ran",
                "finalize", "fused", "err sum", "err sq", "saves");
    for (const ConvShape& s : shapes) {
      Tensor x = Tensor::empty({s.n, s.c, s.h, s.h}, dtype, device, MemoryFormat::channels_last);
      x.copy_(randn({s.n, s.c, s.h, s.h}, gen));
      Tensor w = Tensor::empty({s.k, s.c, s.r, s.r}, dtype, device, MemoryFormat::channels_last);
      w.copy_(randn({s.k, s.c, s.r, s.r}, gen, 0.0, 1.0 / std::sqrt(static_cast<double>(s.c * s.r * s.r))));
      NoGradGuard no_grad;
      const int64_t pad = s.r / 2;
      const double conv_ms =
          1e3 * bench::median_seconds([&] { conv2d(x, w, Tensor(), s.stride, pad); }, device, reps, rounds);
      const Tensor y = conv2d(x, w, Tensor(), s.stride, pad);
      const Tensor gamma = Tensor::ones({s.k}, DType::f32, device),
                   beta = Tensor::zeros({s.k}, DType::f32, device);
      const Tensor mean = Tensor::zeros({s.k}, DType::f32, device),
                   var = Tensor::ones({s.k}, DType::f32, device);
      const double train_ms =
          1e3 *
          bench::median_seconds([&] { batch_norm2d(y, gamma, beta, mean, var, true); }, device, reps, rounds);
      const double eval_ms =
          1e3 * bench::median_seconds([&] { batch_norm2d(y, gamma, beta, mean, var, false); }, device, reps,
                                      rounds);
      const std::string name =
          str_cat("[", s.n, ",", s.c, ",", s.h, "]->", s.k, " ", s.r, "x", s.r, " s", s.stride);
      for (bool genstats : {true, false}) {
        const Fused f = time_fused(genstats, s, dtype, x, w, reps, rounds);
        const char* form = genstats ? "genstats" : "reduce";
        if (f.engine < 0) {
          std::printf("%-13s %-22s %8.4f %8.4f %8.4f | %-8s %d configs: %s\n", s.model, name.c_str(), conv_ms,
                      train_ms, eval_ms, form, f.configs, f.note.substr(0, 160).c_str());
          continue;
        }
        std::printf(
            "%-13s %-22s %8.4f %8.4f %8.4f | %-8s %7lld %5s %2d/%-2d %7.1f ms %8.4f %9.2e %9.2e %8.4f\n",
            s.model, name.c_str(), conv_ms, train_ms, eval_ms, form, static_cast<long long>(f.engine),
            f.runtime_compiled ? "yes" : "no", f.ran, f.configs, f.worst_finalize_ms, f.ms, f.sum_error,
            f.sqsum_error, conv_ms + (train_ms - eval_ms) - f.ms);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "conv_bn_stats_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
