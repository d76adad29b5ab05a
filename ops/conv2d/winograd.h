// Winograd convolutions for the CPU conv2d kernel: f32 "same" 3x3 convolutions (stride 1, padding 1).
// - Gradients, F(4x4, 3x3) (cpu_winograd4.cpp): each 4x4 output tile comes from a 6x6 input tile, V = B^T d B
//   per channel, U = G g G^T per filter, 36 element-wise products summed over channels (36 GEMMs over a block
//   of tiles from several images), Y = A^T M A: 36 multiplies per 16 outputs instead of 144. The input
//   gradient is the convolution of gy with the flipped kernel; the weight gradient is the exact adjoint,
//   dU = sum over tiles of (A dY A^T) x V^T, then dg = G^T dU G.
// - Forward (opt-in, below), F(2x2, 3x3) (cpu_winograd.cpp): 16 multiplies per 4 outputs.
// docs/perf.md ("Winograd F(2x2, 3x3)") has the measurements. Used by ops/conv2d/cpu.cpp; declared here so
// that tests can run them against the exact path.
#pragma once
#include "ops/conv2d/kernels.h"

namespace liftoff::cpu::winograd {

// Whether the shape is one these paths compute: 3x3 kernel, stride 1, padding 1, enough channels on both
// sides (the 1-channel stem keeps the exact path), and planes small enough for 32-bit gather offsets.
bool supports(const Conv2dShape& g);

// LIFTOFF_CPU_WINOGRAD (read once): 0 = off (the exact path everywhere), 1 = the default: the input and
// weight gradients only, 2 = the forward as well. The forward stays on the exact path by default: its
// rounding differs from a direct sum by about 1e-7 relative, enough to flip a ReLU whose input is that close
// to zero, and one flipped ReLU in the golden test's batch moves every gradient by about 3e-3 (docs/perf.md).
// Gradient rounding changes no mask. Each also needs supports(g) and the AVX-512 GEMM kernel.
bool use_forward(const Conv2dShape& g);
bool use_backward(const Conv2dShape& g);

// Row-major contiguous f32 tensors in the layouts of kernels.h. bias may be null. Any thread count; results
// depend only on the inputs and the thread count. Runs on any host.
void forward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& g);

// Tests: run the portable (plain C++) tile transforms of forward() even where the AVX-512 ones could run.
void use_portable_transforms(bool on);

// F(4x4, 3x3) gradients, same layouts and determinism; AVX-512 only (available()).
namespace f4 {
bool available();
// gx = the convolution of gy with the flipped kernel, input and output channels swapped.
void input_grad(const float* gy, const float* w, float* gx, const Conv2dShape& g);
// gw[k, c, r, s] = sum over images and pixels of gy[k, p] * x[c, p + (r, s) - 1].
void weight_grad(const float* x, const float* gy, float* gw, const Conv2dShape& g);
}  // namespace f4

}  // namespace liftoff::cpu::winograd
