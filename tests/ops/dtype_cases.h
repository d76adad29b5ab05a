// The four CUDA dtypes with per-dtype parity tolerances, for parity tests that loop over all of them (losses,
// embedding, interpolate, adaptive_avg_pool2d). The CPU reference runs in f64 for the f64 case and in f32
// otherwise, so half cases measure the rounding of the inputs and outputs as well.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "tests/common/parity.h"

namespace liftoff::testing {

struct DtypeCase {
  DType dtype;
  double atol, rtol;
  // The CPU dtype of the reference inputs.
  DType cpu_dtype() const { return dtype == DType::f64 ? DType::f64 : DType::f32; }
  ParityOptions options(bool check_grads = true) const {
    ParityOptions o;
    o.atol = atol;
    o.rtol = rtol;
    o.cuda_dtype = dtype;
    o.check_grads = check_grads;
    return o;
  }
  std::string name() const { return dtype_name(dtype); }
};

// Tolerances for values of order 1 computed in f32 (f64) from inputs rounded to the dtype.
inline std::vector<DtypeCase> all_dtype_cases(double scale = 1.0) {
  return {{DType::f32, 1e-5 * scale, 1e-4},
          {DType::f64, 1e-11 * scale, 1e-10},
          {DType::f16, 4e-3 * scale, 4e-3},
          {DType::bf16, 3e-2 * scale, 2e-2}};
}

// Parity of a 4-D op f(x) in every dtype, for a contiguous CUDA input and for a channels-last one, whose
// output must stay channels-last (interpolate, adaptive_avg_pool2d).
inline void expect_layout_parity(const std::function<Tensor(const Tensor&)>& f, const Shape& shape,
                                 const std::string& what) {
  for (const DtypeCase& d : all_dtype_cases(4.0)) {
    const Tensor x = random_tensor(shape, 1, -1, 1, d.cpu_dtype()).set_requires_grad(true);
    EXPECT_TRUE(cuda_parity([&](const std::vector<Tensor>& in) { return f(in[0]); }, {x}, d.options()))
        << what << " " << d.name();
    bool kept = true;
    EXPECT_TRUE(cuda_parity(
        [&](const std::vector<Tensor>& in) {
          if (!in[0].is_cuda()) return f(in[0]);
          const Tensor y = f(in[0].contiguous(MemoryFormat::channels_last));
          kept = kept && y.is_channels_last();
          return y;
        },
        {x}, d.options()))
        << what << " channels-last " << d.name();
    EXPECT_TRUE(kept) << what << ": a channels-last input lost its layout";
  }
}

}  // namespace liftoff::testing
