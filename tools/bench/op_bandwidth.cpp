// op_bandwidth: achieved memory bandwidth of elementwise, reduction and normalisation kernels on large tensors,
// against the device's own copy bandwidth measured in the same run (a device-to-device copy, bytes read +
// written). Each op runs `reps` times between two device synchronisations after a warm-up; the median of
// `rounds` such timings is reported. Bytes are the fewest an op must move (each input read once, each output
// written once).
//   op_bandwidth [--elements 67108864] [--dtype f32|bf16] [--reps 20] [--rounds 5]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "liftoff.h"

namespace {

using namespace liftoff;

struct Case {
  std::string name;
  double bytes_per_element;  // in units of the dtype's size
  std::function<Tensor()> run;
};

double median_seconds(const std::function<Tensor()>& fn, Device device, int reps, int rounds) {
  for (int i = 0; i < 3; ++i) fn();
  synchronize(device);
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) fn();
    synchronize(device);
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"op_bandwidth: memory bandwidth of Liftoff's elementwise and reduction kernels"};
  int64_t elements = int64_t{1} << 26;
  std::string dtype_name_arg = "f32", device_name = "cuda";
  int reps = 20, rounds = 5;
  app.add_option("--elements", elements, "elements per tensor")->capture_default_str();
  app.add_option("--dtype", dtype_name_arg, "f32, bf16 or f16")->capture_default_str();
  app.add_option("--device", device_name, "cuda or cpu")->capture_default_str();
  app.add_option("--reps", reps, "launches per timing")->capture_default_str();
  app.add_option("--rounds", rounds, "timings (median reported)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = Device::parse(device_name);
    const DType dtype = parse_dtype(dtype_name_arg);
    const NoGradGuard no_grad;
    Generator gen(7);
    const int64_t rows = elements / 1024;
    const Tensor a = randn({rows, 1024}, gen).to(device, dtype);
    const Tensor b = randn({rows, 1024}, gen).to(device, dtype);
    const Tensor row = randn({1024}, gen).to(device, dtype);
    const Tensor gamma = randn({1024}, gen).to(device, dtype);
    const Tensor beta = randn({1024}, gen).to(device, dtype);
    const Tensor dst = Tensor::empty({rows, 1024}, dtype, device);
    const double size = static_cast<double>(dtype_size(dtype));
    std::vector<Case> cases = {
        {"copy (reference)", 2, [&] { dst.copy_(a); return dst; }},
        {"add (same shape)", 3, [&] { return add(a, b); }},
        {"add (row broadcast)", 2, [&] { return add(a, row); }},
        {"mul (same shape)", 3, [&] { return mul(a, b); }},
        {"exp", 2, [&] { return exp(a); }},
        {"sigmoid", 2, [&] { return sigmoid(a); }},
        {"gelu", 2, [&] { return gelu(a); }},
        {"silu", 2, [&] { return silu(a); }},
        {"sum (all)", 1, [&] { return sum(a); }},
        {"sum (dim -1)", 1, [&] { return sum(a, {-1}); }},
        {"sum (dim 0)", 1, [&] { return sum(a, {0}); }},
        {"amax (dim -1)", 1, [&] { return amax(a, {-1}); }},
        {"softmax (dim -1)", 2, [&] { return softmax(a, -1); }},
        {"log_softmax (dim -1)", 2, [&] { return log_softmax(a, -1); }},
        {"layer_norm (1024)", 2, [&] { return layer_norm(a, {1024}, gamma, beta); }},
    };
    double copy_gbs = 0.0;
    std::printf("%-24s %10s %10s %8s\n", "op", "ms", "GB/s", "of copy");
    for (const Case& c : cases) {
      const double s = median_seconds(c.run, device, reps, rounds);
      const double gbs = c.bytes_per_element * size * static_cast<double>(rows * 1024) / s / 1e9;
      if (copy_gbs == 0.0) copy_gbs = gbs;
      std::printf("%-24s %10.3f %10.1f %7.0f%%\n", c.name.c_str(), 1e3 * s, gbs, 100.0 * gbs / copy_gbs);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "op_bandwidth: %s\n", e.what());
    return 1;
  }
  return 0;
}
