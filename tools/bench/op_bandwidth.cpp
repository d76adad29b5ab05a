// op_bandwidth: achieved memory bandwidth of elementwise, reduction and normalisation kernels on large
// tensors, against the device's own copy bandwidth measured in the same run (a device-to-device copy, bytes
// read + written). Each op runs `reps` times between two device synchronisations after a warm-up; the median
// of `rounds` such timings is reported. Bytes are the fewest an op must move (each input read once, each
// output written once; a forward+backward pair reads x twice, y or gy once and writes y and gx: 5 per
// element; layer norm's weight/bias gradients add only a row of partial sums per block). Broadcast cases: a
// row [1024], a column [rows, 1], a per-channel bias on NCHW and NHWC (channels-last) [N, 64, 32, 32] views
// of the same elements. --layer-norm-variant picks the kernel of the 16-bit layer norm backward
// (ops/layer_norm/backward_variant.h) for the fwd+bwd rows, so one run can time each.
//   op_bandwidth [--elements 67108864] [--dtype f32|bf16] [--reps 20] [--rounds 5]
//                [--layer-norm-variant automatic|tile|packed|two_rows|wide]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "liftoff.h"
#include "ops/layer_norm/backward_variant.h"
#include "tools/bench/median_time.h"

namespace {

using namespace liftoff;

struct Case {
  std::string name;
  double bytes_per_element;  // in units of the dtype's size
  std::function<Tensor()> run;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"op_bandwidth: memory bandwidth of Liftoff's elementwise and reduction kernels"};
  int64_t elements = int64_t{1} << 26;
  std::string dtype_name_arg = "f32", device_name = "cuda", layer_norm_variant = "automatic";
  int reps = 20, rounds = 5;
  app.add_option("--elements", elements, "elements per tensor")->capture_default_str();
  app.add_option("--dtype", dtype_name_arg, "f32, bf16 or f16")->capture_default_str();
  app.add_option("--device", device_name, "cuda or cpu")->capture_default_str();
  app.add_option("--reps", reps, "launches per timing")->capture_default_str();
  app.add_option("--rounds", rounds, "timings (median reported)")->capture_default_str();
  app.add_option("--layer-norm-variant", layer_norm_variant,
                 "16-bit layer norm backward kernel: automatic, tile, packed, two_rows or wide")
      ->check(CLI::IsMember({"automatic", "tile", "packed", "two_rows", "wide"}))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = Device::parse(device_name);
    const DType dtype = parse_dtype(dtype_name_arg);
    set_layer_norm_backward(parse_layer_norm_backward(layer_norm_variant));
    // Inputs do not require grad (forward only); the fwd+bwd cases make fresh leaves each run, so no
    // gradient accumulates across runs.
    auto leaf = [](const Tensor& t) {
      Tensor l = t.detach();
      l.set_requires_grad(true);
      return l;
    };
    Generator gen(7);
    const int64_t rows = elements / 1024;
    const Tensor a = randn({rows, 1024}, gen).to(device, dtype);
    const Tensor b = randn({rows, 1024}, gen).to(device, dtype);
    const Tensor row = randn({1024}, gen).to(device, dtype);
    const Tensor gamma = randn({1024}, gen).to(device, dtype);
    const Tensor beta = randn({1024}, gen).to(device, dtype);
    const Tensor dst = Tensor::empty({rows, 1024}, dtype, device);
    const Tensor column = randn({rows, 1}, gen).to(device, dtype);
    const Tensor channel_bias = randn({64, 1, 1}, gen).to(device, dtype);
    const int64_t images = elements / (64 * 32 * 32);
    const Tensor nchw = a.view({images, 64, 32, 32});
    const Tensor nhwc = a.view({images, 32, 32, 64}).permute({0, 3, 1, 2});  // channels-last [N, 64, 32, 32]
    auto rows_of = [&](int64_t cols) { return a.view({elements / cols, cols}); };
    auto grad_rows_of = [&](int64_t cols) { return b.view({elements / cols, cols}); };
    const Tensor gamma4096 = randn({4096}, gen).to(device, dtype);
    const Tensor beta4096 = randn({4096}, gen).to(device, dtype);
    const double size = static_cast<double>(dtype_size(dtype));
    std::vector<Case> cases = {
        {"copy (reference)", 2,
         [&] {
           dst.copy_(a);
           return dst;
         }},
        {"add (same shape)", 3, [&] { return add(a, b); }},
        {"add (row broadcast)", 2, [&] { return add(a, row); }},
        {"add (column broadcast)", 2, [&] { return add(a, column); }},
        {"add (NCHW bias)", 2, [&] { return add(nchw, channel_bias); }},
        {"add (NHWC bias)", 2, [&] { return add(nhwc, channel_bias); }},
        {"mul (same shape)", 3, [&] { return mul(a, b); }},
        {"exp", 2, [&] { return exp(a); }},
        {"sigmoid", 2, [&] { return sigmoid(a); }},
        {"gelu", 2, [&] { return gelu(a); }},
        {"gelu fwd+bwd", 5,
         [&] {
           const Tensor x = leaf(a);
           gelu(x).backward(b);
           return x;
         }},
        {"silu", 2, [&] { return silu(a); }},
        {"sum (all)", 1, [&] { return sum(a); }},
        {"sum (dim -1)", 1, [&] { return sum(a, {-1}); }},
        {"sum (dim 0)", 1, [&] { return sum(a, {0}); }},
        {"amax (dim -1)", 1, [&] { return amax(a, {-1}); }},
        {"amin (dim 0)", 1, [&] { return amin(a, {0}); }},
        {"softmax (dim -1)", 2, [&] { return softmax(a, -1); }},
        {"softmax (16)", 2, [&] { return softmax(rows_of(16), -1); }},
        {"softmax (64)", 2, [&] { return softmax(rows_of(64), -1); }},
        {"softmax (128)", 2, [&] { return softmax(rows_of(128), -1); }},
        {"softmax (4096)", 2, [&] { return softmax(rows_of(4096), -1); }},
        {"softmax (8192)", 2, [&] { return softmax(rows_of(8192), -1); }},
        {"log_softmax (128)", 2, [&] { return log_softmax(rows_of(128), -1); }},
        {"log_softmax (dim -1)", 2, [&] { return log_softmax(a, -1); }},
        {"softmax fwd+bwd (1024)", 5,
         [&] {
           const Tensor x = leaf(a);
           softmax(x, -1).backward(b);
           return x;
         }},
        {"layer_norm (1024)", 2, [&] { return layer_norm(a, {1024}, gamma, beta); }},
        {"layer_norm (4096)", 2, [&] { return layer_norm(rows_of(4096), {4096}); }},
        {"layer_norm fwd+bwd (1024)", 5,
         [&] {
           const Tensor x = leaf(a), w = leaf(gamma), bias = leaf(beta);
           layer_norm(x, {1024}, w, bias).backward(b);
           return x;
         }},
        {"layer_norm fwd+bwd (4096)", 5,
         [&] {
           const Tensor x = leaf(rows_of(4096)), w = leaf(gamma4096), bias = leaf(beta4096);
           layer_norm(x, {4096}, w, bias).backward(grad_rows_of(4096));
           return x;
         }},
    };
    double copy_gbs = 0.0;
    std::printf("%-28s %10s %10s %8s\n", "op", "ms", "GB/s", "of copy");
    for (const Case& c : cases) {
      const double s = bench::median_seconds(c.run, device, reps, rounds);
      const double gbs = c.bytes_per_element * size * static_cast<double>(rows * 1024) / s / 1e9;
      if (copy_gbs == 0.0) copy_gbs = gbs;
      std::printf("%-28s %10.3f %10.1f %7.0f%%\n", c.name.c_str(), 1e3 * s, gbs, 100.0 * gbs / copy_gbs);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "op_bandwidth: %s\n", e.what());
    return 1;
  }
  return 0;
}
