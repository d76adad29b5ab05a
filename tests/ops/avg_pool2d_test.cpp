#include "ops/avg_pool2d/avg_pool2d.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

// Direct reference in double with count_include_pad=True: padded zeros count in the divisor.
Tensor naive_avg_pool2d(const Tensor& x, int64_t k, int64_t stride, int64_t pad) {
  const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  const int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  const std::vector<double> xv = x.to_vector<double>();
  std::vector<double> out;
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xo = 0; xo < ow; ++xo) {
        double sum = 0;
        for (int64_t i = 0; i < k; ++i)
          for (int64_t j = 0; j < k; ++j) {
            const int64_t ih = y * stride - pad + i, iw = xo * stride - pad + j;
            if (ih >= 0 && ih < h && iw >= 0 && iw < w) sum += xv[(p * h + ih) * w + iw];
          }
        out.push_back(sum / static_cast<double>(k * k));
      }
  return Tensor::from_vector<double>(out, {n, c, oh, ow});
}

template <class E, class Fn>
void expect_error(Fn&& fn, const std::string& fragment) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing \"" << fragment << "\"";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(AvgPool2d, HandComputed) {
  const Tensor x =
      Tensor::from_vector<float>({1, 5, 2, 0, 3, 4, 8, 7, -1, -2, 6, 9, 0, 1, 2, 3}, {1, 1, 4, 4});
  EXPECT_EQ(avg_pool2d(x, 2, 2).to_vector<float>(), (std::vector<float>{3.25f, 4.25f, -0.5f, 5.0f}));
  // count_include_pad: a 3x3 window over a 2x2 image of ones with padding 1 covers 4 ones out of 9.
  const std::vector<float> got = avg_pool2d(Tensor::ones({1, 1, 2, 2}), 3, 1, 1).to_vector<float>();
  for (float v : got) EXPECT_FLOAT_EQ(v, 4.0f / 9.0f);
}

struct Case {
  Shape x;
  int64_t kernel, stride, padding;
};
const std::vector<Case> kCases = {
    {{2, 3, 6, 6}, 2, 2, 0}, {{2, 2, 7, 7}, 3, 2, 1}, {{1, 3, 5, 6}, 3, 1, 1},
    {{3, 1, 5, 5}, 2, 1, 1}, {{1, 2, 8, 8}, 4, 3, 2},
};

TEST(AvgPool2d, MatchesNaiveReference) {
  for (const Case& c : kCases) {
    for (DType dt : {DType::f32, DType::f64}) {
      const Tensor x = testing::random_tensor(c.x, 7, -1, 1, dt);
      const double tol = dt == DType::f32 ? 1e-6 : 1e-14;
      EXPECT_TRUE(testing::all_close(avg_pool2d(x, c.kernel, c.stride, c.padding).to(DType::f64),
                                     naive_avg_pool2d(x, c.kernel, c.stride, c.padding), tol, tol))
          << shape_str(c.x) << " k" << c.kernel << " s" << c.stride << " p" << c.padding;
    }
  }
}

TEST(AvgPool2d, Gradcheck) {
  for (const Case& c : kCases) {
    const Tensor x = testing::random_tensor(c.x, 8).set_requires_grad(true);
    const int64_t k = c.kernel, s = c.stride, p = c.padding;
    EXPECT_TRUE(testing::gradcheck(
        [k, s, p](const std::vector<Tensor>& in) { return avg_pool2d(in[0], k, s, p); }, {x}))
        << shape_str(c.x) << " k" << c.kernel << " s" << c.stride << " p" << c.padding;
  }
}

TEST(AvgPool2d, RejectsBadArguments) {
  const Tensor x = Tensor::zeros({2, 3, 8, 8});
  expect_error<ShapeError>([&] { avg_pool2d(Tensor::zeros({2, 3, 8, 8, 1}), 2, 2); }, "4-D input");
  expect_error<ValueError>([&] { avg_pool2d(x, -1, 2); }, "kernel size must be positive");
  expect_error<ValueError>([&] { avg_pool2d(x, 2, 0); }, "stride must be positive");
  expect_error<ValueError>([&] { avg_pool2d(x, 2, 2, 2); }, "padding 2 must be between 0 and half");
  expect_error<ShapeError>([&] { avg_pool2d(Tensor::zeros({2, 3, 8, 1}), 2, 2); }, "output would be empty");
  expect_error<DTypeError>([&] { avg_pool2d(Tensor::zeros({2, 3, 8, 8}, DType::u8), 2, 2); }, "floating");
}

}  // namespace
}  // namespace liftoff
