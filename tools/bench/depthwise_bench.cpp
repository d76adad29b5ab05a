// depthwise_bench: channels-last depthwise conv2d (groups == C, 3x3, padding 1) at MobileNetV2's shapes,
// Liftoff's own kernels (LIFTOFF_DEPTHWISE=auto) against cuDNN (=cudnn) in the same process: forward, and
// forward + both gradients (input and weight; no bias). Each op runs `reps` times between two device
// synchronisations after a warm-up (which also runs cuDNN's algorithm search); the median of `rounds` such
// timings is reported, with the bandwidth of the bytes a direct kernel must move (forward: x read, y
// written; forward + backward: x read three times, y written, gy read twice, gx written).
//   depthwise_bench [--batch 128] [--dtype bf16|f16|f32] [--reps 20] [--rounds 5]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "liftoff.h"
#include "runtime/config.h"
#include "tools/bench/median_time.h"

namespace {

using namespace liftoff;

struct Layer {
  int64_t c, size, stride;
};

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
    // MobileNetV2 at 32 px (CIFAR stem): the expanded widths of its blocks.
    const std::vector<Layer> layers = {{32, 32, 1},  {96, 32, 1}, {144, 32, 1}, {144, 32, 2}, {192, 16, 1},
                                       {192, 16, 2}, {384, 8, 1}, {576, 8, 1},  {576, 8, 2},  {960, 4, 1}};
    Generator gen(7);
    std::printf("%-26s %-8s %10s %10s %8s %10s\n", "layer [N, C, H, W] stride", "pass", "own ms", "cuDNN ms",
                "speedup", "own GB/s");
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
      const auto both = [&] {
        x.set_grad(Tensor());
        w.set_grad(Tensor());
        conv2d(x, w, Tensor(), l.stride, 1, 1, l.c).backward(gy);
      };
      const struct {
        const char* name;
        std::function<void()> run;
        double bytes;
      } passes[] = {{"fwd", forward, x_bytes + y_bytes}, {"fwd+bwd", both, 3 * x_bytes + 3 * y_bytes}};
      const std::string name = str_cat("[", batch, ", ", l.c, ", ", l.size, ", ", l.size, "] s", l.stride);
      for (const auto& pass : passes) {
        double own = 0, cudnn = 0;
        {
          config::ScopedSetting setting(config::Knob::depthwise, "auto");
          own = bench::median_seconds(pass.run, device, reps, rounds);
        }
        {
          config::ScopedSetting setting(config::Knob::depthwise, "cudnn");
          cudnn = bench::median_seconds(pass.run, device, reps, rounds);
        }
        std::printf("%-26s %-8s %10.4f %10.4f %7.2fx %10.1f\n", name.c_str(), pass.name, 1e3 * own,
                    1e3 * cudnn, cudnn / own, pass.bytes / own / 1e9);
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "depthwise_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
