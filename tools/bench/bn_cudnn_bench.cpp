// bn_cudnn_bench: would cuDNN's one-launch channels-last batch norm beat Liftoff's own passes on the panel's
// small layers? Training-mode batch norm followed by ReLU (or ReLU6), per channels-last shape, in one
// process:
//   ours fwd   cuda::batch_norm_forward's statistics, then batch_norm_apply with the ReLU epilogue (what a
//              user's relu(bn(x)) runs: the normalize is deferred so that the ReLU folds into it),
//   ours bwd   cuda::batch_norm_backward with the ReLU mask (gradient sums + input gradient),
//   cudnn fwd / bwd   cudnnBatchNormalizationForwardTrainingEx / BackwardEx, BN_ACTIVATION, in the modes
//              SPATIAL_PERSISTENT (NVIDIA's single-kernel NHWC path) and SPATIAL.
// Each is captured `reps` times into one CUDA graph and timed over replays with CUDA events (the median of
// `rounds`), so the figures are device time per call without host launch cost, as in a captured step. Each
// cuDNN row is checked against ours (largest absolute difference of y, dx, dgamma). A mode or activation
// cuDNN refuses is printed with its status. Not run in CI (needs a GPU).
//   bn_cudnn_bench [--dtype bf16|f16] [--act relu|relu6] [--reps 20] [--rounds 7]
#include <cuda_runtime.h>
#include <cudnn.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "liftoff.h"
#include "ops/batch_norm2d/kernels.h"
#include "runtime/cuda/context.h"
#include "runtime/cuda/cudnn_loader.h"
#include "runtime/graph.h"

namespace {

using namespace liftoff;

// cuDNN's legacy batch-norm entry points are not among those the loader forwards: looked up by name.
#define BENCH_CUDNN(name) reinterpret_cast<decltype(&name)>(cuda::cudnn_symbol(#name))

struct BnShape {
  const char* model;
  int64_t n, c, h;
};

// Median device milliseconds per call of fn, captured reps times into one graph and replayed.
double graph_ms(const std::function<void()>& fn, Device device, int reps, int rounds) {
  fn();  // allocations and first-use set-up outside the capture
  synchronize(device);
  CudaGraph graph(device);
  graph.begin_capture();
  for (int i = 0; i < reps; ++i) fn();
  graph.end_capture();
  cudaStream_t stream = cuda::compute_stream(device.index);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) graph.replay();
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    cudaEventRecord(start, stream);
    graph.replay();
    cudaEventRecord(stop, stream);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms / reps);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> va = a.to(DType::f32).contiguous().to_vector<float>();
  const std::vector<float> vb = b.to(DType::f32).contiguous().to_vector<float>();
  double worst = 0;
  for (size_t i = 0; i < va.size(); ++i) worst = std::max(worst, std::fabs(double(va[i]) - vb[i]));
  return worst;
}

struct Descs {
  cudnnTensorDescriptor_t x = nullptr, param = nullptr;
  cudnnActivationDescriptor_t act = nullptr;
  ~Descs() {
    if (x) BENCH_CUDNN(cudnnDestroyTensorDescriptor)(x);
    if (param) BENCH_CUDNN(cudnnDestroyTensorDescriptor)(param);
    if (act) BENCH_CUDNN(cudnnDestroyActivationDescriptor)(act);
  }
};

std::string status_text(cudnnStatus_t s) {
  return BENCH_CUDNN(cudnnGetErrorString)(s);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"cuDNN's channels-last batch norm + ReLU against Liftoff's passes (device time, graphs)"};
  std::string dtype_arg = "bf16", act_arg = "relu";
  int reps = 20, rounds = 7;
  app.add_option("--dtype", dtype_arg, "bf16 or f16")->capture_default_str();
  app.add_option("--act", act_arg, "relu or relu6 (cuDNN: clipped ReLU at 6)")->capture_default_str();
  app.add_option("--reps", reps, "calls per graph")->capture_default_str();
  app.add_option("--rounds", rounds, "timed replays (median reported)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    const Device device = Device::parse("cuda");
    const DType dtype = parse_dtype(dtype_arg);
    const bool relu6 = act_arg == "relu6";
    const cudnnDataType_t data_type = dtype == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    // Batch-norm inputs of the panel's models at their panel batch (MobileNetV2 at 32 px has 19 distinct).
    const std::vector<BnShape> shapes = {
        {"mobilenet_v2", 128, 32, 32},  {"mobilenet_v2", 128, 16, 32}, {"mobilenet_v2", 128, 96, 32},
        {"mobilenet_v2", 128, 96, 16},  {"mobilenet_v2", 128, 24, 16}, {"mobilenet_v2", 128, 144, 16},
        {"mobilenet_v2", 128, 144, 8},  {"mobilenet_v2", 128, 32, 8},  {"mobilenet_v2", 128, 192, 8},
        {"mobilenet_v2", 128, 192, 4},  {"mobilenet_v2", 128, 64, 4},  {"mobilenet_v2", 128, 384, 4},
        {"mobilenet_v2", 128, 96, 4},   {"mobilenet_v2", 128, 576, 4}, {"mobilenet_v2", 128, 576, 2},
        {"mobilenet_v2", 128, 160, 2},  {"mobilenet_v2", 128, 960, 2}, {"mobilenet_v2", 128, 320, 2},
        {"mobilenet_v2", 128, 1280, 2}, {"resnet18", 128, 64, 32},     {"resnet18", 128, 128, 16},
        {"resnet18", 128, 256, 8},      {"resnet18", 128, 512, 4},     {"resnet50", 64, 64, 56},
        {"resnet50", 64, 256, 56}};
    const double eps = 1e-5, momentum = 0.1, cap = relu6 ? 6.0 : kNoReluCap;
    cudnnHandle_t handle = cuda::cudnn_handle(device.index);
    Generator gen(5);
    std::printf("cuDNN %zu, %s, %s; ms per call (device time, captured)\n", cudnnGetVersion(),
                dtype_arg.c_str(), act_arg.c_str());
    std::printf("%-13s %-16s %8s %8s | %-10s %8s %8s %9s %9s %9s\n", "model", "[N,C,H]", "ours fwd",
                "ours bwd", "cudnn mode", "fwd", "bwd", "err y", "err dx", "err dgam");
    double sum_ours_f = 0, sum_ours_b = 0, sum_cudnn_f[2] = {0, 0}, sum_cudnn_b[2] = {0, 0};
    for (const BnShape& s : shapes) {
      auto activation = [&] {
        Tensor t = Tensor::empty({s.n, s.c, s.h, s.h}, dtype, device, MemoryFormat::channels_last);
        t.copy_(randn({s.n, s.c, s.h, s.h}, gen, 0.5, 2.0));
        return t;
      };
      const Tensor x = activation(), gy = activation();
      const Tensor gamma = randn({s.c}, gen, 1.0, 0.2).to(device),
                   beta = randn({s.c}, gen, 0.3, 0.2).to(device);
      const Tensor run_mean = Tensor::zeros({s.c}, DType::f32, device),
                   run_var = Tensor::ones({s.c}, DType::f32, device);
      auto like_x = [&] { return Tensor::empty(x.shape(), dtype, device, MemoryFormat::channels_last); };
      auto per_channel = [&] { return Tensor::empty({s.c}, DType::f32, device); };
      NoGradGuard no_grad;

      // Ours.
      const Tensor y = like_x(), mean = per_channel(), invstd = per_channel();
      BnEpilogue epilogue;
      epilogue.relu = true;
      epilogue.relu_cap = cap;
      // As a user's model runs it: the statistics at the call, the normalize pass with the folded ReLU after
      // (ops/batch_norm2d/fusion.h).
      BnEpilogue stats_only;
      stats_only.skip_normalize = true;
      auto ours_forward = [&] {
        cuda::batch_norm_forward(x, gamma, beta, run_mean, run_var, true, momentum, eps, stats_only, y, mean,
                                 invstd);
        cuda::batch_norm_apply(x, gamma, beta, mean, invstd, epilogue, y);
      };
      const Tensor gx = like_x(), gw = per_channel(), gb = per_channel();
      auto ours_backward = [&] {
        cuda::batch_norm_backward(x, gy, gamma, Tensor(), mean, invstd, true, y, cap, gx, gw, gb, Tensor());
      };
      const double ours_f = graph_ms(ours_forward, device, reps, rounds);
      ours_forward();
      const double ours_b = graph_ms(ours_backward, device, reps, rounds);
      ours_backward();
      sum_ours_f += ours_f;
      sum_ours_b += ours_b;
      const std::string name = str_cat("[", s.n, ",", s.c, ",", s.h, "]");

      // cuDNN, per mode.
      const int modes[2] = {CUDNN_BATCHNORM_SPATIAL_PERSISTENT, CUDNN_BATCHNORM_SPATIAL};
      for (int m = 0; m < 2; ++m) {
        const auto mode = static_cast<cudnnBatchNormMode_t>(modes[m]);
        const char* mode_name = m == 0 ? "persistent" : "spatial";
        Descs d;
        BENCH_CUDNN(cudnnCreateTensorDescriptor)(&d.x);
        BENCH_CUDNN(cudnnCreateTensorDescriptor)(&d.param);
        BENCH_CUDNN(cudnnCreateActivationDescriptor)(&d.act);
        BENCH_CUDNN(cudnnSetTensor4dDescriptor)
        (d.x, CUDNN_TENSOR_NHWC, data_type, int(s.n), int(s.c), int(s.h), int(s.h));
        BENCH_CUDNN(cudnnDeriveBNTensorDescriptor)(d.param, d.x, mode);
        BENCH_CUDNN(cudnnSetActivationDescriptor)
        (d.act, relu6 ? CUDNN_ACTIVATION_CLIPPED_RELU : CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, cap);
        const auto ops = CUDNN_BATCHNORM_OPS_BN_ACTIVATION;
        size_t fwd_ws = 0, bwd_ws = 0, reserve = 0;
        cudnnStatus_t st = BENCH_CUDNN(cudnnGetBatchNormalizationForwardTrainingExWorkspaceSize)(
            handle, mode, ops, d.x, nullptr, d.x, d.param, d.act, &fwd_ws);
        if (st == CUDNN_STATUS_SUCCESS)
          st = BENCH_CUDNN(cudnnGetBatchNormalizationBackwardExWorkspaceSize)(
              handle, mode, ops, d.x, d.x, d.x, nullptr, d.x, d.param, d.act, &bwd_ws);
        if (st == CUDNN_STATUS_SUCCESS)
          st = BENCH_CUDNN(cudnnGetBatchNormalizationTrainingExReserveSpaceSize)(handle, mode, ops, d.act,
                                                                                 d.x, &reserve);
        const Tensor ws = Tensor::empty({int64_t(std::max(fwd_ws, bwd_ws)) + 16}, DType::u8, device);
        const Tensor rs = Tensor::empty({int64_t(reserve) + 16}, DType::u8, device);
        const Tensor cy = like_x(), cmean = per_channel(), cinvstd = per_channel();
        const Tensor cgx = like_x(), cgw = per_channel(), cgb = per_channel();
        const Tensor crun_mean = Tensor::zeros({s.c}, DType::f32, device),
                     crun_var = Tensor::ones({s.c}, DType::f32, device);
        const float one = 1.f, zero = 0.f;
        cudnnStatus_t fwd_status = st, bwd_status = st;
        auto cudnn_forward = [&] {
          fwd_status = BENCH_CUDNN(cudnnBatchNormalizationForwardTrainingEx)(
              handle, mode, ops, &one, &zero, d.x, x.raw_data(), nullptr, nullptr, d.x, cy.raw_data(),
              d.param, gamma.raw_data(), beta.raw_data(), momentum, crun_mean.raw_data(), crun_var.raw_data(),
              eps, cmean.raw_data(), cinvstd.raw_data(), d.act, ws.raw_data(), fwd_ws, rs.raw_data(),
              reserve);
        };
        auto cudnn_backward = [&] {
          bwd_status = BENCH_CUDNN(cudnnBatchNormalizationBackwardEx)(
              handle, mode, ops, &one, &zero, &one, &zero, d.x, x.raw_data(), d.x, cy.raw_data(), d.x,
              gy.raw_data(), nullptr, nullptr, d.x, cgx.raw_data(), d.param, gamma.raw_data(),
              beta.raw_data(), cgw.raw_data(), cgb.raw_data(), eps, cmean.raw_data(), cinvstd.raw_data(),
              d.act, ws.raw_data(), bwd_ws, rs.raw_data(), reserve);
        };
        if (st == CUDNN_STATUS_SUCCESS) cudnn_forward();
        if (fwd_status != CUDNN_STATUS_SUCCESS) {
          std::printf("%-13s %-16s %8.4f %8.4f | %-10s refused: %s\n", s.model, name.c_str(), ours_f, ours_b,
                      mode_name, status_text(fwd_status).c_str());
          synchronize(device);
          continue;
        }
        double cudnn_f = 0, cudnn_b = 0;
        try {
          cudnn_f = graph_ms(cudnn_forward, device, reps, rounds);
        } catch (const Error& e) {
          std::printf("%-13s %-16s %8.4f %8.4f | %-10s forward capture failed: %.160s\n", s.model,
                      name.c_str(), ours_f, ours_b, mode_name, e.what());
          continue;
        }
        cudnn_forward();
        cudnn_backward();
        if (bwd_status != CUDNN_STATUS_SUCCESS) {
          std::printf("%-13s %-16s %8.4f %8.4f | %-10s %8.4f backward refused: %s\n", s.model, name.c_str(),
                      ours_f, ours_b, mode_name, cudnn_f, status_text(bwd_status).c_str());
          synchronize(device);
          continue;
        }
        try {
          cudnn_b = graph_ms(cudnn_backward, device, reps, rounds);
        } catch (const Error& e) {
          std::printf("%-13s %-16s %8.4f %8.4f | %-10s %8.4f backward capture failed: %.160s\n", s.model,
                      name.c_str(), ours_f, ours_b, mode_name, cudnn_f, e.what());
          continue;
        }
        cudnn_backward();
        synchronize(device);
        sum_cudnn_f[m] += cudnn_f;
        sum_cudnn_b[m] += cudnn_b;
        std::printf("%-13s %-16s %8.4f %8.4f | %-10s %8.4f %8.4f %9.2e %9.2e %9.2e\n", s.model, name.c_str(),
                    ours_f, ours_b, mode_name, cudnn_f, cudnn_b, max_abs_diff(y, cy), max_abs_diff(gx, cgx),
                    max_abs_diff(gw, cgw));
      }
    }
    std::printf(
        "sums (rows where cuDNN ran in both modes may differ): ours %.4f / %.4f, persistent %.4f / %.4f, "
        "spatial %.4f / %.4f\n",
        sum_ours_f, sum_ours_b, sum_cudnn_f[0], sum_cudnn_b[0], sum_cudnn_f[1], sum_cudnn_b[1]);
  } catch (const Error& e) {
    std::fprintf(stderr, "bn_cudnn_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
