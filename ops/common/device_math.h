// Math functions callable from host code and CUDA kernels alike, overloaded for float and double (the
// accumulation types), so functors shared by the CPU and CUDA kernels can use them.
#pragma once
#include <math.h>

#include <limits>

#include "runtime/macros.h"

namespace liftoff::math {

LIFTOFF_HD float sqrt_of(float x) {
  return ::sqrtf(x);
}
LIFTOFF_HD double sqrt_of(double x) {
  return ::sqrt(x);
}
LIFTOFF_HD float exp_of(float x) {
  return ::expf(x);
}
LIFTOFF_HD double exp_of(double x) {
  return ::exp(x);
}
LIFTOFF_HD float log_of(float x) {
  return ::logf(x);
}
LIFTOFF_HD double log_of(double x) {
  return ::log(x);
}
LIFTOFF_HD float pow_of(float x, float y) {
  return ::powf(x, y);
}
LIFTOFF_HD double pow_of(double x, double y) {
  return ::pow(x, y);
}
LIFTOFF_HD float abs_of(float x) {
  return ::fabsf(x);
}
LIFTOFF_HD double abs_of(double x) {
  return ::fabs(x);
}

template <class A>
LIFTOFF_HD bool is_nan(A x) {
  return x != x;
}
template <class A>
LIFTOFF_HD A infinity() {
  return std::numeric_limits<A>::infinity();
}
template <class A>
LIFTOFF_HD A quiet_nan() {
  return std::numeric_limits<A>::quiet_NaN();
}

}  // namespace liftoff::math
