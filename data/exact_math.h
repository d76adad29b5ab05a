// Explicitly rounded arithmetic for code that runs on the host and in kernels and must give the same bits on
// both (the augmentation parameters and the resized crop's CPU twins): nvcc would otherwise contract a*b+c
// into an FMA and round differently from the host. Overloads for float and double; mixing them does not
// compile.
#pragma once
#include <cmath>

#include "runtime/macros.h"

namespace liftoff::exact {

#if defined(__CUDA_ARCH__)
LIFTOFF_HD float mul(float a, float b) {
  return __fmul_rn(a, b);
}
LIFTOFF_HD float add(float a, float b) {
  return __fadd_rn(a, b);
}
LIFTOFF_HD float sub(float a, float b) {
  return __fsub_rn(a, b);
}
LIFTOFF_HD float div(float a, float b) {
  return __fdiv_rn(a, b);
}
LIFTOFF_HD double mul(double a, double b) {
  return __dmul_rn(a, b);
}
LIFTOFF_HD double add(double a, double b) {
  return __dadd_rn(a, b);
}
LIFTOFF_HD double div(double a, double b) {
  return __ddiv_rn(a, b);
}
LIFTOFF_HD double sqrt_rn(double a) {
  return __dsqrt_rn(a);
}
#else
LIFTOFF_HD float mul(float a, float b) {
  return a * b;
}
LIFTOFF_HD float add(float a, float b) {
  return a + b;
}
LIFTOFF_HD float sub(float a, float b) {
  return a - b;
}
LIFTOFF_HD float div(float a, float b) {
  return a / b;
}
LIFTOFF_HD double mul(double a, double b) {
  return a * b;
}
LIFTOFF_HD double add(double a, double b) {
  return a + b;
}
LIFTOFF_HD double div(double a, double b) {
  return a / b;
}
LIFTOFF_HD double sqrt_rn(double a) {
  return std::sqrt(a);
}
#endif

}  // namespace liftoff::exact
