// Host-side conversions for the CPU kernels that handle every dtype (Half and BFloat16 go through float).
#pragma once
#include <type_traits>

#include "runtime/half.h"

namespace liftoff::cpu {

template <class T>
constexpr bool kIsHostHalf = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <class To, class From>
inline To host_convert(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (kIsHostHalf<From>) {
    return host_convert<To>(static_cast<float>(v));
  } else if constexpr (kIsHostHalf<To>) {
    return To(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

// The type a CPU kernel accumulates T in: f32 for the 16-bit floats, T otherwise.
template <class T>
using host_acc_t = std::conditional_t<kIsHostHalf<T>, float, T>;

}  // namespace liftoff::cpu
