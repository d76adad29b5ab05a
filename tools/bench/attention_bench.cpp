// attention_bench: scaled_dot_product_attention (forward, forward+backward) and batched matmul at
// ViT/LLM-like shapes, timed with CUDA events on the compute stream: a warm-up, then `rounds` timings of
// `reps` calls each; the median per call is printed. The PyTorch twin is tools/reference/attention_bench.py
// (same rows, same names, same method); scripts/device_stage_attention.sh runs both.
// LIFTOFF_ATTENTION_FUSED=0 times the plain path (GEMM, softmax, GEMM) instead of the fused ones;
// --kernels flash runs Liftoff's fused kernels on every row (family by length), simple|pipelined one family
// of them (flash.h), cudnn cuDNN's fused attention (cudnn_sdpa.h); auto (default) the automatic choice
// (path.h).
// Each sdpa row says which path ran (cudnn when cuDNN executed its calls); cuDNN plan failures go to stderr.
//   attention_bench [--dtype bf16|f16] [--reps 20] [--rounds 7] [--only NAME] [--kernels auto]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "liftoff.h"
#include "ops/attention/cudnn_sdpa.h"
#include "ops/attention/flash.h"
#include "ops/attention/path.h"
#include "runtime/config.h"

namespace {

using namespace liftoff;

struct Row {
  std::string name;
  std::function<void()> forward, forward_backward;
  bool attention = false;
};

double median_ms(const std::function<void()>& fn, Device device, int reps, int rounds) {
  for (int i = 0; i < 3; ++i) fn();
  synchronize(device);
  const Stream stream = Stream::of(device);
  Event start(device, true), end(device, true);
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    start.record(stream);
    for (int i = 0; i < reps; ++i) fn();
    end.record(stream);
    end.synchronize();
    times.push_back(Event::elapsed_ms(start, end) / reps);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Leaves requiring grad; each forward+backward starts with no gradient (as PyTorch's grad = None).
struct Leaves {
  std::vector<Tensor> tensors;
  void clear_grads() const {
    for (const Tensor& t : tensors) t.set_grad(Tensor());
  }
};

Row attention_row(int64_t b, int64_t h, int64_t l, int64_t d, bool causal, DType dtype, Device device,
                  Generator& gen) {
  const Shape shape = {b, h, l, d};
  Leaves in{{randn(shape, gen, 0, 1, dtype, device), randn(shape, gen, 0, 1, dtype, device),
             randn(shape, gen, 0, 1, dtype, device)}};
  for (const Tensor& t : in.tensors) t.set_requires_grad(true);
  const Tensor grad = randn(shape, gen, 0, 1, dtype, device);
  const auto forward = [in, causal] {
    NoGradGuard no_grad;
    scaled_dot_product_attention(in.tensors[0], in.tensors[1], in.tensors[2], Tensor(), 0.0, causal);
  };
  const auto forward_backward = [in, causal, grad] {
    in.clear_grads();
    scaled_dot_product_attention(in.tensors[0], in.tensors[1], in.tensors[2], Tensor(), 0.0, causal)
        .backward(grad);
  };
  const std::string name = str_cat("sdpa_B", b, "_H", h, "_L", l, "_D", d, causal ? "_causal" : "");
  return {name, forward, forward_backward, true};
}

Row matmul_row(int64_t batch, int64_t m, int64_t k, int64_t n, DType dtype, Device device, Generator& gen) {
  Leaves in{{randn({batch, m, k}, gen, 0, 1, dtype, device), randn({batch, k, n}, gen, 0, 1, dtype, device)}};
  for (const Tensor& t : in.tensors) t.set_requires_grad(true);
  const Tensor grad = randn({batch, m, n}, gen, 0, 1, dtype, device);
  const auto forward = [in] {
    NoGradGuard no_grad;
    bmm(in.tensors[0], in.tensors[1]);
  };
  const auto forward_backward = [in, grad] {
    in.clear_grads();
    bmm(in.tensors[0], in.tensors[1]).backward(grad);
  };
  return {str_cat("bmm_", batch, "x", m, "x", k, "x", n), forward, forward_backward};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"attention_bench: scaled_dot_product_attention and bmm timings (CUDA events, median)"};
  std::string dtype_arg = "bf16", only;
  int reps = 20, rounds = 7;
  app.add_option("--dtype", dtype_arg, "bf16 or f16")->capture_default_str();
  app.add_option("--reps", reps, "calls per timing")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "timings (median reported)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--only", only, "run only the rows whose name contains this text");
  std::string kernels = "auto";
  app.add_option("--kernels", kernels,
                 "fused attention: auto (the automatic choice), flash (Liftoff's kernels), simple or "
                 "pipelined (one family of them), cudnn (cuDNN's fused attention)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "flash", "simple", "pipelined", "cudnn"}));
  CLI11_PARSE(app, argc, argv);
  try {
    const DType dtype = parse_dtype(dtype_arg);
    LIFTOFF_CHECK(dtype == DType::bf16 || dtype == DType::f16, ValueError, "--dtype ", dtype_arg,
                  ": expected bf16 or f16");
    set_flash_kernels(kernels == "simple"      ? FlashKernels::simple
                      : kernels == "pipelined" ? FlashKernels::pipelined
                                               : FlashKernels::automatic);
    set_attention_path(kernels == "cudnn"  ? AttentionPath::cudnn
                       : kernels == "auto" ? AttentionPath::automatic
                                           : AttentionPath::flash);
    const Device device = Device::cuda();
    Generator gen(1);
    const std::vector<Row> rows = {
        attention_row(128, 3, 65, 64, false, dtype, device, gen),   // vit_tiny at 32 px
        attention_row(32, 12, 197, 64, false, dtype, device, gen),  // ViT-B/16 at 224 px
        attention_row(8, 16, 1024, 64, false, dtype, device, gen),  // LLM-like
        attention_row(8, 16, 1024, 64, true, dtype, device, gen),   //
        attention_row(4, 16, 4096, 128, true, dtype, device, gen),  // long context
        matmul_row(384, 65, 64, 65, dtype, device, gen),            // vit_tiny's q k^T
        matmul_row(384, 197, 64, 197, dtype, device, gen),          // ViT-B's q k^T
        matmul_row(128, 1024, 1024, 64, dtype, device, gen),        // P v at L 1024
        matmul_row(16, 1024, 4096, 1024, dtype, device, gen),       // an MLP-sized product
    };
    std::printf("%-36s %12s %12s %8s\n", "case", "fwd_ms", "fwd_bwd_ms", "path");
    for (const Row& row : rows) {
      if (!only.empty() && row.name.find(only) == std::string::npos) continue;
      const int64_t cudnn_before = cudnn_sdpa_executions();
      const double fwd = median_ms(row.forward, device, reps, rounds);
      const double both = median_ms(row.forward_backward, device, reps, rounds);
      // Which path the row's calls took: cuDNN when it ran them, else ours or plain (path.h).
      const char* path = !row.attention                                     ? "-"
                         : cudnn_sdpa_executions() > cudnn_before           ? "cudnn"
                         : *config::get_bool(config::Knob::attention_fused) ? "ours"
                                                                            : "plain";
      std::printf("%-36s %12.4f %12.4f %8s\n", row.name.c_str(), fwd, both, path);
      std::fflush(stdout);
    }
    const std::string failures = cudnn_sdpa_failures();
    if (!failures.empty())
      std::fprintf(stderr, "attention_bench: cuDNN plans that did not build:\n%s", failures.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "attention_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
