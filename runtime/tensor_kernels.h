// Raw kernels behind Tensor's own methods (copy with cast, fill, gradient accumulation). They pick the device
// themselves; op kernels live in ops/.
#pragma once
#include "runtime/tensor.h"

namespace liftoff::kernels {

// dst = src converted to dst's dtype; any strides, any device pair; shapes already checked equal.
void copy(const Tensor& src, const Tensor& dst);
void fill(const Tensor& dst, double value);
// dst += src; same dtype/device, dst and src contiguous.
void accumulate(const Tensor& dst, const Tensor& src);

namespace cpu {
void copy(const Tensor& src, const Tensor& dst);  // both on the host
void fill(const Tensor& dst, double value);
void accumulate(const Tensor& dst, const Tensor& src);
}  // namespace cpu

#if LIFTOFF_WITH_CUDA
namespace cuda {
void copy(const Tensor& src, const Tensor& dst);  // at least one side on a CUDA device
void fill(const Tensor& dst, double value);
void accumulate(const Tensor& dst, const Tensor& src);
}  // namespace cuda
#endif

}  // namespace liftoff::kernels
