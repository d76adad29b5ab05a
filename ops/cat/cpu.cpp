#include "ops/cat/kernels.h"

namespace liftoff::cpu {

void cat_forward(const std::vector<Tensor>& inputs, int64_t dim, const Tensor& out) {
  int64_t offset = 0;
  for (const Tensor& t : inputs) {
    const int64_t n = t.shape()[static_cast<size_t>(dim)];
    // out does not require grad yet, so this slice is a raw view; copy_ handles any strides.
    out.slice(dim, offset, offset + n).copy_(t);
    offset += n;
  }
}

}  // namespace liftoff::cpu
