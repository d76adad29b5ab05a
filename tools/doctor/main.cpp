// doctor: is the GPU really usable, and really computing? Prints what the driver, the libraries and the GPUs
// are, what NVML sees, then runs a matmul and a convolution on CPU and GPU and checks one against the other,
// and which LIFTOFF_* settings the environment gives (`doctor --config`: the whole table of runtime/config, then
// exit 0).
// Exit codes: 0 the GPU computes correctly; 3 built without CUDA; 4 no driver or no GPU; 5 a GPU is present
// but cannot run Liftoff; 6 the GPU computed a wrong result; 1 another error; 2 a usage error.
#include <CLI/CLI.hpp>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include "data/decode/image_decode.h"
#include "ops/conv2d/conv2d.h"
#include "ops/linear/linear.h"
#include "runtime/config.h"
#include "runtime/device_select.h"
#include "runtime/profile/nvml.h"
#include "runtime/parallel.h"
#include "runtime/random.h"
#include "runtime/system_info.h"
#if LIFTOFF_WITH_CUDA
#include "runtime/cuda/cublas_loader.h"
#include "runtime/cuda/nvjpeg_loader.h"
#endif

namespace {

using namespace liftoff;

enum Exit { kOk = 0, kError = 1, kNoCudaBuild = 3, kNoGpu = 4, kGpuUnusable = 5, kWrongResult = 6 };

// Median wall time of fn over `runs` runs after one warm-up, in milliseconds.
double time_ms(Device d, int runs, const std::function<Tensor()>& fn) {
  fn();
  synchronize(d);
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    synchronize(d);
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

double relative_error(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<double>();
  const auto y = b.to_vector<double>();
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i])) return INFINITY;
    num += (x[i] - y[i]) * (x[i] - y[i]);
    den += y[i] * y[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

void print_versions(const SystemInfo& info) {
  std::printf("Build\n  CUDA backend: %s", info.built_with_cuda ? "yes" : "no (CPU-only build)");
  if (info.built_with_cuda) std::printf(", kernels for sm_{%s}", info.compiled_architectures.c_str());
  std::printf("\n");
  if (!info.built_with_cuda) return;
  std::printf("Versions\n");
  if (info.driver_cuda_version > 0) {
    const std::string drv = Nvml::get().driver_version();
    std::printf("  NVIDIA driver: %s, supports CUDA up to %s\n",
                drv.empty() ? "(version unknown)" : drv.c_str(),
                cuda_version_str(info.driver_cuda_version).c_str());
  } else {
    std::printf("  NVIDIA driver: not found (libcuda.so.1 is not loadable)\n");
  }
  std::printf("  CUDA runtime: %s (statically linked)\n", cuda_version_str(info.runtime_version).c_str());
#if LIFTOFF_WITH_CUDA
  if (info.cublas_loaded == 0) {  // opened at run time (runtime/cuda/cublas_loader.cpp): say why not
    std::printf("  cuBLAS: compiled %s, not loaded: %s\n", library_version_str(info.cublas_compiled).c_str(),
                liftoff::cuda::cublas_load_error().c_str());
  } else {
    std::printf("  cuBLAS: compiled %s, loaded %s\n", library_version_str(info.cublas_compiled).c_str(),
                library_version_str(info.cublas_loaded).c_str());
  }
#endif
  if (info.cudnn_loaded == 0) {
    std::printf("  cuDNN: compiled %s, not loaded  <-- see the GPU lines below for why\n",
                library_version_str(info.cudnn_compiled).c_str());
  } else {
    std::printf(
        "  cuDNN: compiled %s, loaded %s%s\n", library_version_str(info.cudnn_compiled).c_str(),
        library_version_str(info.cudnn_loaded).c_str(),
        info.cudnn_compiled / 10000 != info.cudnn_loaded / 10000 ? "  <-- major versions differ" : "");
  }
  std::printf("  NCCL: %s\n",
              info.nccl_loaded
                  ? (library_version_str(info.nccl_loaded) + " (" + info.nccl_library + ")").c_str()
                  : "not found (needed only for multi-GPU training)");
#if LIFTOFF_WITH_CUDA
  // Loading it here also lists it under the loaded libraries below.
  std::printf("  nvJPEG: %s\n", liftoff::cuda::nvjpeg::loaded()
                                    ? liftoff::cuda::nvjpeg::describe_library().c_str()
                                    : ("not loaded (" + liftoff::cuda::nvjpeg::load_error() +
                                       "); --decode auto decodes JPEGs on the CPU")
                                          .c_str());
#endif
  std::printf("  CPU JPEG decoder: %s\n", liftoff::turbojpeg_available()
                                              ? "libjpeg-turbo (built with LIFTOFF_TURBOJPEG)"
                                              : "stb_image (built without libjpeg-turbo)");
  std::printf("Libraries loaded in this process\n");
  for (const auto& [fragment, paths] : info.loaded_libraries) {
    if (paths.empty()) {
      std::printf("  %-14s -\n", fragment.c_str());
      continue;
    }
    for (const auto& p : paths) std::printf("  %-14s %s\n", fragment.c_str(), p.c_str());
  }
}

void print_nvml(const SystemInfo& info) {
  Nvml& nvml = Nvml::get();
  std::printf("NVML\n");
  if (!nvml.available()) {
    std::printf("  %s\n", nvml.unavailable_reason().c_str());
    return;
  }
  for (const GpuInfo& g : info.gpus) {
    const int n = nvml.index_by_pci_bus_id(g.pci_bus_id);
    if (n < 0) continue;
    const GpuSample s = nvml.sample(static_cast<unsigned>(n));
    std::printf("  cuda:%d: utilization %u%%, memory %.1f / %.1f GiB used, SM clock %u MHz, power %.0f W\n",
                g.index, s.utilization_gpu, s.memory_used / 1073741824.0, s.memory_total / 1073741824.0,
                s.sm_clock_mhz, s.power_mw / 1000.0);
    for (const GpuProcess& p : nvml.compute_processes(static_cast<unsigned>(n))) {
      std::printf("    process %u%s: %.0f MiB\n", p.pid,
                  p.pid == static_cast<unsigned>(getpid()) ? " (this doctor)" : "",
                  p.memory_used / 1048576.0);
    }
  }
}

struct CheckResult {
  bool correct = true;
};

CheckResult compute_check(int index) {
  CheckResult result;
  const Device gpu = Device::cuda(index);
  Generator gen(42);
  std::printf("Compute check on cuda:%d (random inputs; CPU is the reference)\n", index);
  struct Case {
    const char* name;
    double flops;
    double tolerance;
    std::function<Tensor(Device)> run;
  };
  const Tensor a = randn({1024, 1024}, gen);
  const Tensor b = randn({1024, 1024}, gen);
  const Tensor x = randn({64, 32, 28, 28}, gen);
  const Tensor w = randn({64, 32, 3, 3}, gen, 0.0, 0.1);
  std::vector<Case> cases = {
      {"matmul 1024x1024x1024 f32", 2.0 * 1024 * 1024 * 1024, 1e-4,
       [&](Device d) { return matmul(a.to(d), b.to(d)); }},
      {"conv2d 64x32x28x28 * 64x32x3x3", 2.0 * 64 * 64 * 28 * 28 * 32 * 9, 5e-3,  // TF32 allowed, as PyTorch
       [&](Device d) { return conv2d(x.to(d), w.to(d), Tensor(), 1, 1); }},
  };
  for (const Case& c : cases) {
    const Tensor ref = c.run(Device::cpu());
    const Tensor out = c.run(gpu);
    const double err = relative_error(out, ref);
    const Tensor a_gpu = a.to(gpu), b_gpu = b.to(gpu), x_gpu = x.to(gpu), w_gpu = w.to(gpu);
    const double cpu_ms = time_ms(Device::cpu(), 3, [&] { return c.run(Device::cpu()); });
    const bool is_matmul = c.name[0] == 'm';
    const double gpu_ms = time_ms(
        gpu, 20, [&] { return is_matmul ? matmul(a_gpu, b_gpu) : conv2d(x_gpu, w_gpu, Tensor(), 1, 1); });
    const bool ok = err <= c.tolerance;
    result.correct = result.correct && ok;
    std::printf(
        "  %-32s rel. error %.1e %s | CPU %.2f ms (%.0f GFLOP/s) | GPU %.3f ms (%.0f GFLOP/s) | %.0fx\n",
        c.name, err, ok ? "ok" : "WRONG", cpu_ms, c.flops / cpu_ms / 1e6, gpu_ms, c.flops / gpu_ms / 1e6,
        cpu_ms / gpu_ms);
  }
  return result;
}

// The environment settings this process was given (all of them: `doctor --config`).
void print_settings_in_use() {
  std::printf("Settings from the environment\n");
  int shown = 0;
  for (const config::Row& row : config::list()) {
    if (row.source != "env") continue;
    std::printf("  %s=%s\n", row.entry->name, row.value.c_str());
    ++shown;
  }
  if (shown == 0) std::printf("  none (defaults)\n");
  std::printf("  (doctor --config lists all %zu with their defaults)\n", config::all_knobs().size());
}

int run() {
  set_num_threads(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
  const SystemInfo info = query_system_info();
  print_versions(info);
  print_settings_in_use();
  if (!info.built_with_cuda) {
    std::printf("\nverdict: NO GPU: %s\n", cuda_unavailable_reason(0).c_str());
    return kNoCudaBuild;
  }
  std::printf("GPUs\n");
  if (info.gpus.empty()) std::printf("  none visible\n");
  int usable = -1;
  for (const GpuInfo& g : info.gpus) {
    std::printf("  cuda:%d %s, sm_%d%d, %d SMs, %.1f GiB, PCI %s: %s\n", g.index, g.name.c_str(), g.cc_major,
                g.cc_minor, g.multiprocessors, g.memory_bytes / 1073741824.0, g.pci_bus_id.c_str(),
                g.unusable_reason.empty() ? "usable" : g.unusable_reason.c_str());
    if (g.unusable_reason.empty() && usable < 0) usable = g.index;
  }
  if (usable < 0) {
    print_nvml(info);
    const std::string reason = cuda_unavailable_reason(0);
    std::printf("\nverdict: NO GPU: %s\n", reason.c_str());
    const bool no_gpu = info.driver_cuda_version == 0 || info.gpus.empty();
    return no_gpu ? kNoGpu : kGpuUnusable;
  }
  const CheckResult check = compute_check(usable);
  print_nvml(info);  // after the check, so this process shows up with its memory
  if (!check.correct) {
    std::printf("\nverdict: GPU BROKEN: cuda:%d computed results that differ from the CPU reference\n",
                usable);
    return kWrongResult;
  }
  std::printf("\nverdict: GPU OK: cuda:%d (%s) runs Liftoff's kernels and computes correct results\n", usable,
              info.gpus[static_cast<size_t>(usable)].name.c_str());
  return kOk;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"doctor: checks that the GPU is usable and really computing, and says why not", "doctor"};
  bool config_only = false;
  app.add_flag(
      "--config", config_only,
      "print the LIFTOFF_* settings and launcher variables (value, source, default, accepted values) "
      "instead of the checks");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::printf(
        "%s\nExit codes: 0 GPU OK, 3 built without CUDA, 4 no driver or GPU, 5 GPU unusable by this build,\n"
        "6 GPU computed wrong results, 1 other error, 2 usage error.\n",
        app.help().c_str());
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "doctor: %s\n", e.what());
    return 2;
  }
  if (config_only) {
    std::printf("%s", config::format_table().c_str());
    return kOk;
  }
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "doctor: error: %s\n", e.what());
    return kError;
  }
}
