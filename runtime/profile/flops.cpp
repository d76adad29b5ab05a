#include "runtime/profile/flops.h"

#include <cstdio>

namespace liftoff {

namespace {
thread_local FlopCounter* innermost = nullptr;

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}
}  // namespace

FlopCounter::FlopCounter() : previous_(innermost) {
  innermost = this;
}

FlopCounter::~FlopCounter() {
  innermost = previous_;
}

bool counting_flops() {
  return innermost != nullptr;
}

void add_flops(double flops) {
  for (FlopCounter* c = innermost; c != nullptr; c = c->previous_) c->flops_ += flops;
}

std::optional<double> peak_tflops(const std::string& name, const std::string& precision) {
  // SXM parts only: the H200 NVL and the H100 PCIe/NVL run lower clocks (other peaks).
  const bool h200_sxm = contains(name, "H200") && !contains(name, "NVL");
  const bool h100_sxm = contains(name, "H100") && (contains(name, "SXM") || contains(name, "HBM3")) &&
                        !contains(name, "NVL") && !contains(name, "PCIe");
  if (!h200_sxm && !h100_sxm) return std::nullopt;
  if (precision == "bf16" || precision == "fp16") return 989.0;
  if (precision == "tf32") return 494.0;
  if (precision == "fp32") return 67.0;
  return std::nullopt;
}

std::string peak_precision(const std::string& device, const std::string& amp) {
  if (amp == "bf16" || amp == "fp16") return amp;
  return device.rfind("cuda", 0) == 0 ? "tf32" : "fp32";
}

ComputeRate compute_rate(double flops_per_image, double images_per_second, const std::string& device_name,
                         const std::string& precision) {
  ComputeRate r;
  r.flops_per_image = flops_per_image;
  r.precision = precision;
  r.achieved_tflops = kTrainingFlopsPerForward * flops_per_image * images_per_second / 1e12;
  r.peak_tflops = peak_tflops(device_name, precision);
  if (r.peak_tflops && *r.peak_tflops > 0) r.mfu = r.achieved_tflops / *r.peak_tflops;
  return r;
}

std::string compute_rate_text(const ComputeRate& rate) {
  if (rate.flops_per_image <= 0) return "";
  char buf[256];
  // Below 1 TFLOP/s (the CPU, tiny models) in GFLOP/s, so the figure keeps its digits.
  const bool tera = rate.achieved_tflops >= 1.0;
  std::snprintf(buf, sizeof buf, "%.3g GFLOP/image forward (x%.0f per training step) | %.1f %s achieved",
                rate.flops_per_image / 1e9, kTrainingFlopsPerForward,
                tera ? rate.achieved_tflops : rate.achieved_tflops * 1e3, tera ? "TFLOP/s" : "GFLOP/s");
  std::string out = buf;
  if (rate.mfu) {
    std::snprintf(buf, sizeof buf, " | MFU %.1f%% of %.0f TFLOP/s (%s dense peak)", 100.0 * *rate.mfu,
                  *rate.peak_tflops, rate.precision.c_str());
    out += buf;
  } else {
    out += " | MFU n/a (no " + rate.precision + " peak known for this device)";
  }
  return out;
}

}  // namespace liftoff
