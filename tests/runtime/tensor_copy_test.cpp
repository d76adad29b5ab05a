// The CPU's strided copies (runtime/tensor_kernels.cpp): a contiguous() of a permuted, sliced or stepped view
// and a cast on the way, row by row across the threads, against the element-by-element definition.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/tensor.h"

namespace liftoff {
namespace {

Tensor iota(const Shape& shape) {
  std::vector<float> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>(static_cast<int>(i % 251) - 125);  // exact in bf16
  return Tensor::from_vector(v, shape);
}

// Element (i0, i1, ...) of an f32 `view` read through its own strides, in row-major order.
std::vector<double> by_definition(const Tensor& view) {
  std::vector<double> out;
  const Shape& shape = view.shape();
  std::vector<int64_t> index(shape.size(), 0);
  const float* base = static_cast<const float*>(view.raw_data());
  for (int64_t i = 0; i < view.numel(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d) off += index[d] * view.strides()[d];
    out.push_back(base[off]);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

void expect_contiguous_copy(const Tensor& view, DType to, const std::string& what) {
  const Tensor copy = view.to(to).contiguous();
  const Tensor direct = Tensor::empty(view.shape(), to);
  direct.copy_(view);
  const std::vector<double> want = by_definition(view);
  const Tensor got = direct.to(DType::f64);
  const Tensor got_via_to = copy.to(DType::f64);
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got.data<double>()[i], want[i]) << what << ", element " << i;
    ASSERT_EQ(got_via_to.data<double>()[i], want[i]) << what << ", element " << i;
  }
}

TEST(TensorCopyCpu, StridedViewsIntoContiguousMatchTheDefinition) {
  const Tensor x = iota({4, 37, 6, 16});
  expect_contiguous_copy(x.permute({0, 2, 1, 3}), DType::f32, "attention heads [B, H, L, D]");
  expect_contiguous_copy(x.permute({0, 2, 3, 1}), DType::f32, "inner stride 37*... (NHWC-like)");
  expect_contiguous_copy(x.permute({3, 2, 1, 0}), DType::f64, "reversed, with a cast");
  expect_contiguous_copy(x.slice(1, 3, 30), DType::f32, "a slice");
  expect_contiguous_copy(iota({300, 200}).permute({1, 0}), DType::bf16, "a transpose across threads, bf16");
  expect_contiguous_copy(iota({5}).slice(0, 2, 3).view(Shape{}), DType::f32, "a 0-d view");
}

}  // namespace
}  // namespace liftoff
