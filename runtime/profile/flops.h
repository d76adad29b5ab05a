// Model FLOPs: a thread-local counter that the GEMM-like ops (conv2d, conv_transpose2d, linear, matmul, bmm,
// scaled_dot_product_attention; all batched products go through one place) add their forward cost to, 2*M*N*K
// per product (a multiply-add is two FLOPs, as the usual MFU definition). Counting is off unless a
// FlopCounter is alive on the thread, so the ops pay one thread-local load. Elementwise ops, norms and pools
// are not counted (the convention of MFU: they are small next to the products). A training step costs about
// three forwards (backward = two products per forward product), kTrainingFlopsPerForward.
//
// The peak table turns achieved FLOP/s into MFU (model FLOPs utilisation) for known GPUs only; an unknown GPU
// has no peak and its MFU is "n/a" rather than a guess.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace liftoff {

constexpr double kTrainingFlopsPerForward = 3.0;

// Counts the FLOPs the ops on this thread report while it lives (nested counters each see everything inside
// them). Count a forward in eval mode under NoGradGuard to leave no trace (no running statistics updated).
class FlopCounter {
 public:
  FlopCounter();
  ~FlopCounter();
  FlopCounter(const FlopCounter&) = delete;
  FlopCounter& operator=(const FlopCounter&) = delete;
  double flops() const { return flops_; }

 private:
  friend void add_flops(double flops);
  double flops_ = 0.0;
  FlopCounter* previous_;
};

// True while a FlopCounter lives on this thread (ops skip their arithmetic otherwise).
bool counting_flops();
// Adds to every live counter of this thread; a no-op when none is.
void add_flops(double flops);
// 2 * m * n * k * batch: a batch of [m, k] @ [k, n] products.
inline double gemm_flops(int64_t m, int64_t n, int64_t k, int64_t batch = 1) {
  return 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
         static_cast<double>(batch);
}

// Dense peak TFLOP/s of a GPU by its product name (e.g. "NVIDIA H200", "NVIDIA H100 80GB HBM3") for a
// precision: "bf16", "fp16", "tf32" or "fp32". H100/H200 SXM: 989 (bf16/fp16), 494 (tf32), 67 (fp32).
// nullopt for another GPU (or the H100 PCIe/NVL and H200 NVL, whose clocks and peaks differ) or precision.
std::optional<double> peak_tflops(const std::string& device_name, const std::string& precision);

// What a run achieved: FLOPs per image of a forward, images/s -> training TFLOP/s (x3) and, with a peak,
// the fraction of it.
struct ComputeRate {
  double flops_per_image = 0.0;  // forward
  double achieved_tflops = 0.0;  // training step (forward + backward)
  std::optional<double> peak_tflops;
  std::optional<double> mfu;  // achieved / peak, in [0, 1] for a sane run
  std::string precision;      // the peak's precision
};
// precision of a run: "bf16"/"fp16" under --amp, "tf32" for f32 on CUDA (cuDNN convolutions may use TF32
// tensor cores, as PyTorch's default; cuBLAS products do not), "fp32" on the CPU.
ComputeRate compute_rate(double flops_per_image, double images_per_second, const std::string& device_name,
                         const std::string& precision);
// The precision whose peak applies to a run on `device` ("cpu" or "cuda:N") with amp "off", "bf16" or "fp16".
std::string peak_precision(const std::string& device, const std::string& amp);

// "1.23 GFLOP/image | 456.7 TFLOP/s (bf16) | MFU 46.2% of 989" or "... | MFU n/a (unknown GPU peak)"; empty
// when no FLOPs were counted.
std::string compute_rate_text(const ComputeRate& rate);

}  // namespace liftoff
