// Checks shared by the CPU tests of layer_norm, group_norm, grouped conv2d and conv_transpose2d.
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "runtime/tensor.h"
#include "tests/common/gradcheck.h"

namespace liftoff::testing {

// fn throws E whose message contains `fragment`.
template <class E, class Fn>
void expect_error(Fn&& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << fragment << "\"";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

// A strided (non-contiguous) leaf gets the same gradient through op as its contiguous copy: the op computes
// on a contiguous copy but must route the gradient to the caller's tensor. `strided` must require grad.
inline void expect_strided_input_gradient(const std::function<Tensor(const Tensor&)>& op,
                                          const Tensor& strided, uint64_t seed) {
  ASSERT_FALSE(strided.is_contiguous());
  const Tensor y = op(strided);
  const Tensor gy = random_tensor(y.shape(), seed);
  y.backward(gy);
  const Tensor copy = strided.detach().contiguous().set_requires_grad(true);
  const Tensor y_copy = op(copy);
  EXPECT_TRUE(all_close(y, y_copy.detach(), 0, 0));
  y_copy.backward(gy);
  ASSERT_TRUE(strided.grad().defined());
  EXPECT_TRUE(all_close(strided.grad(), copy.grad(), 1e-12, 1e-12));
}

}  // namespace liftoff::testing
