// Times the CPU kernels of one ResNet-20 training step, layer shape by layer shape (28x28 input), through the
// public ops with autograd: conv2d forward and forward+backward, batch_norm2d forward+backward, relu
// forward+backward. Reports the MINIMUM over the repeats (after one warm-up): on a shared machine the minimum
// is the figure least disturbed by other processes. Also prints the per-step estimate (each layer kind times
// the number of times it occurs in ResNet-20).
// Usage: bench_cpu_ops [batch=128] [threads=2] [repeats=15]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>

#include "ops/batch_norm2d/batch_norm2d.h"
#include "ops/conv2d/conv2d.h"
#include "ops/reduce/reduce.h"
#include "ops/relu/relu.h"
#include "runtime/autograd.h"
#include "runtime/parallel.h"
#include "runtime/random.h"

namespace {

using liftoff::Tensor;

struct Layer {
  const char* name;
  int64_t c, h, k, r, stride, pad;
  int count;  // occurrences in ResNet-20
};
const Layer kLayers[] = {
    {"stem 1->16 3x3 @28", 1, 28, 16, 3, 1, 1, 1},    {"s1 16->16 3x3 @28", 16, 28, 16, 3, 1, 1, 6},
    {"s2 16->32 3x3/2 @28", 16, 28, 32, 3, 2, 1, 1},  {"s2 proj 16->32 1x1/2", 16, 28, 32, 1, 2, 0, 1},
    {"s2 32->32 3x3 @14", 32, 14, 32, 3, 1, 1, 5},    {"s3 32->64 3x3/2 @14", 32, 14, 64, 3, 2, 1, 1},
    {"s3 proj 32->64 1x1/2", 32, 14, 64, 1, 2, 0, 1}, {"s3 64->64 3x3 @7", 64, 7, 64, 3, 1, 1, 5},
};

double min_ms(int repeats, const std::function<void()>& fn) {
  fn();
  double best = std::numeric_limits<double>::infinity();
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best,
                    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atol(argv[1]) : 128;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 15;
  liftoff::set_num_threads(threads);
  liftoff::Generator gen(1);
  std::printf("CPU ops of ResNet-20, f32, batch %lld, %d threads, min of %d runs (ms)\n",
              static_cast<long long>(batch), threads, repeats);
  std::printf("%-22s | %8s %8s | %8s | %8s\n", "layer", "conv f", "conv f+b", "bn f+b", "relu f+b");
  double step_conv = 0, step_bn = 0, step_relu = 0;
  for (const Layer& l : kLayers) {
    const Tensor x = liftoff::randn({batch, l.c, l.h, l.h}, gen);
    Tensor w = liftoff::randn({l.k, l.c, l.r, l.r}, gen);
    Tensor xg = x.clone();
    xg.set_requires_grad(l.c > 1);  // the stem's input needs no gradient, as in training
    w.set_requires_grad(true);
    const double conv_f = min_ms(repeats, [&] {
      liftoff::NoGradGuard no_grad;
      (void)liftoff::conv2d(x, w, Tensor(), l.stride, l.pad);
    });
    const double conv_fb =
        min_ms(repeats, [&] { liftoff::sum(liftoff::conv2d(xg, w, Tensor(), l.stride, l.pad)).backward(); });
    const int64_t oh = (l.h + 2 * l.pad - l.r) / l.stride + 1;
    Tensor y = liftoff::randn({batch, l.k, oh, oh}, gen);
    y.set_requires_grad(true);
    Tensor gamma = liftoff::Tensor::ones({l.k}, liftoff::DType::f32, liftoff::Device::cpu());
    Tensor beta = liftoff::Tensor::zeros({l.k}, liftoff::DType::f32, liftoff::Device::cpu());
    gamma.set_requires_grad(true);
    beta.set_requires_grad(true);
    const double bn_fb = min_ms(repeats, [&] {
      liftoff::sum(liftoff::batch_norm2d(y, gamma, beta, Tensor(), Tensor(), true, 0.1, 1e-5)).backward();
    });
    const double relu_fb = min_ms(repeats, [&] { liftoff::sum(liftoff::relu(y)).backward(); });
    std::printf("%-22s | %8.2f %8.2f | %8.2f | %8.2f\n", l.name, conv_f, conv_fb, bn_fb, relu_fb);
    step_conv += l.count * conv_fb;
    const int bn_count = l.r == 1 ? 1 : l.count;  // every conv is followed by a BN
    step_bn += bn_count * bn_fb;
    step_relu += (l.r == 1 ? 0 : l.count) * relu_fb;
  }
  std::printf("ResNet-20 step estimate (ms, layer count x f+b): conv %.1f, bn %.1f, relu %.1f\n", step_conv,
              step_bn, step_relu);
  return 0;
}
