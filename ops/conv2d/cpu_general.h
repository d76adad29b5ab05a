// The CPU conv2d path for what the tuned kernels of cpu.cpp do not cover: groups > 1 (depthwise included),
// dilation > 1, and padding as large as the kernel (reached from conv_transpose2d, whose padding crops the
// output instead). im2col with dilation and one GEMM per group; simple and exact, the reference for CUDA.
#pragma once
#include "ops/conv2d/kernels.h"

namespace liftoff::cpu::conv_general {

// Whether a shape must take this path (cpu.cpp's fast paths assume one group, no dilation, padding < kernel).
inline bool applies(const Conv2dShape& g) {
  return g.groups != 1 || g.dilation != 1 || g.padding >= g.r || g.padding >= g.s;
}

// Contiguous NCHW / KCRS data as in kernels.h; bias may be null.
template <class T>
void forward(const T* x, const T* w, const T* bias, T* y, const Conv2dShape& g);
// Each of gx, gw may be null (not wanted); x is read only for gw, w only for gx.
template <class T>
void backward(const T* x, const T* w, const T* gy, T* gx, T* gw, const Conv2dShape& g);

}  // namespace liftoff::cpu::conv_general
