// depthwise_bench: channels-last depthwise conv2d (groups == C, 3x3, padding 1) at MobileNetV2's shapes,
// Liftoff's own kernels (LIFTOFF_DEPTHWISE=auto) against cuDNN (=cudnn) in the same process, per pass:
// forward, input gradient alone (bwd-data), weight gradient alone (bwd-weight; both run the recorded backward
// of a conv2d whose other input needs no gradient), and forward + both gradients (no bias). Each runs `reps`
// times between two device synchronisations after a warm-up (which also runs cuDNN's algorithm search); the
// median of `rounds` such timings is reported, with the bandwidth of the bytes a direct kernel must move
// (forward: x read, y written; bwd-data: gy read, gx written; bwd-weight: x and gy read; forward + backward:
// x read three times, y written, gy read twice, gx written). Rows name [N,C,H,W], stride and how many of the
// model's 17 depthwise convs have the shape; last, per pass, "model(17)": the sum over all 17 (a step's
// worth).
//   depthwise_bench [--batch 128] [--dtype bf16|f16|f32] [--reps 20] [--rounds 5]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "liftoff.h"
#include "runtime/autograd.h"
#include "runtime/config.h"
#include "tools/bench/median_time.h"

namespace {

using namespace liftoff;

struct Layer {
  int64_t c, size, stride, count;  // count: how many of MobileNetV2's 17 depthwise convs have this shape
};

struct Pass {
  const char* name;
  std::function<void()> run;
  double bytes;
};

// Sums over the layers of one pass.
struct Total {
  const char* name = "";
  double own = 0, cudnn = 0, bytes = 0;
};

void print_row(const std::string& layer, const char* pass, double own, double cudnn, double bytes) {
  std::printf("%-26s %-10s %10.4f %10.4f %7.2fx %10.1f\n", layer.c_str(), pass, 1e3 * own, 1e3 * cudnn,
              cudnn / own, bytes / own / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"depthwise_bench: own channels-last depthwise conv2d kernels against cuDNN"};
  int64_t batch = 128;
  std::string dtype_name_arg = "bf16", device_name = "cuda";
  int reps = 20, rounds = 5;
  app.add_option("--batch", batch, "images per call")->capture_default_str();
  app.add_option("--dtype", dtype_name_arg, "bf16, f16 or f32")->capture_default_str();
  app.add_option("--device", device_name, "cuda (cpu runs, but has no cuDNN to compare with)")
      ->capture_default_str();
  app.add_option("--reps", reps, "launches per timing")->capture_default_str();
  app.add_option("--rounds", rounds, "timings (median reported)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = Device::parse(device_name);
    const DType dtype = parse_dtype(dtype_name_arg);
    // The 17 depthwise convs of the zoo's MobileNetV2 at 32 px with the stride-1 stem
    // (models/nn/mobilenet.cpp): the expanded width, the input size, the stride, and how often the shape
    // occurs.
    const std::vector<Layer> layers = {{32, 32, 1, 1}, {96, 32, 2, 1}, {144, 16, 1, 1}, {144, 16, 2, 1},
                                       {192, 8, 1, 2}, {192, 8, 2, 1}, {384, 4, 1, 4},  {576, 4, 1, 2},
                                       {576, 4, 2, 1}, {960, 2, 1, 3}};
    Generator gen(7);
    std::printf("%-26s %-10s %10s %10s %8s %10s\n", "[N,C,H,W]s<stride>x<count>", "pass", "own ms",
                "cuDNN ms", "speedup", "own GB/s");
    Total totals[4];
    for (const Layer& l : layers) {
      Tensor x = Tensor::empty({batch, l.c, l.size, l.size}, dtype, device, MemoryFormat::channels_last);
      x.copy_(randn({batch, l.c, l.size, l.size}, gen));
      x.set_requires_grad(true);
      const Tensor w = randn({l.c, 1, 3, 3}, gen).to(device, dtype).set_requires_grad(true);
      const Tensor y0 = conv2d(x.detach(), w.detach(), Tensor(), l.stride, 1, 1, l.c);
      Tensor gy = Tensor::empty(y0.shape(), dtype, device, MemoryFormat::channels_last);
      gy.copy_(randn(y0.shape(), gen));
      const double x_bytes = static_cast<double>(x.numel() * dtype_size(dtype));
      const double y_bytes = static_cast<double>(y0.numel() * dtype_size(dtype));
      const auto forward = [&] {
        NoGradGuard no_grad;
        conv2d(x, w, Tensor(), l.stride, 1, 1, l.c);
      };
      // Recorded once; their backward computes one gradient each (the knob is read when it runs).
      const Tensor y_data = conv2d(x, w.detach(), Tensor(), l.stride, 1, 1, l.c);
      const Tensor y_weight = conv2d(x.detach(), w, Tensor(), l.stride, 1, 1, l.c);
      const auto backward_data = [&] { y_data.grad_fn()->apply(gy); };
      const auto backward_weight = [&] { y_weight.grad_fn()->apply(gy); };
      const auto both = [&] {
        x.set_grad(Tensor());
        w.set_grad(Tensor());
        conv2d(x, w, Tensor(), l.stride, 1, 1, l.c).backward(gy);
      };
      const Pass passes[] = {{"fwd", forward, x_bytes + y_bytes},
                             {"bwd-data", backward_data, x_bytes + y_bytes},
                             {"bwd-weight", backward_weight, x_bytes + y_bytes},
                             {"fwd+bwd", both, 3 * x_bytes + 3 * y_bytes}};
      const std::string name =
          str_cat("[", batch, ",", l.c, ",", l.size, ",", l.size, "]s", l.stride, "x", l.count);
      for (size_t p = 0; p < std::size(passes); ++p) {
        const Pass& pass = passes[p];
        double own = 0, cudnn = 0;
        {
          config::ScopedSetting setting(config::Knob::depthwise, "auto");
          own = bench::median_seconds(pass.run, device, reps, rounds);
        }
        {
          config::ScopedSetting setting(config::Knob::depthwise, "cudnn");
          cudnn = bench::median_seconds(pass.run, device, reps, rounds);
        }
        print_row(name, pass.name, own, cudnn, pass.bytes);
        totals[p].name = pass.name;
        totals[p].own += l.count * own;
        totals[p].cudnn += l.count * cudnn;
        totals[p].bytes += l.count * pass.bytes;
      }
    }
    for (const Total& t : totals) print_row("model(17)", t.name, t.own, t.cudnn, t.bytes);
  } catch (const Error& e) {
    std::fprintf(stderr, "depthwise_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
