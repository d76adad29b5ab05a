// ema_update / swap_contents (ops/ema): values against the recurrence written out, and argument errors.
#include <gtest/gtest.h>

#include "ops/ema/ema.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

TEST(EmaUpdate, AveragesInPlaceByTheRecurrence) {
  const Tensor avg = Tensor::from_vector<float>({1.0f, 2.0f, -4.0f}, {3});
  const Tensor cur = Tensor::from_vector<float>({3.0f, 2.0f, 0.0f}, {3});
  const Tensor avg2 = Tensor::from_vector<double>({10.0, 0.0, 0.0, 1.0}, {2, 2});
  const Tensor cur2 = Tensor::from_vector<double>({0.0, 10.0, 5.0, 1.0}, {2, 2});
  ema_update({avg}, {cur}, 0.75);
  // 0.75 * a + 0.25 * c
  EXPECT_EQ(avg.to_vector<float>(), (std::vector<float>{1.5f, 2.0f, -3.0f}));
  EXPECT_EQ(cur.to_vector<float>(), (std::vector<float>{3.0f, 2.0f, 0.0f}));  // untouched
  ema_update({avg2}, {cur2}, 0.9);
  const std::vector<double> got = avg2.to_vector<double>();
  const std::vector<double> want = {0.9 * 10.0, 0.1 * 10.0, 0.1 * 5.0, 1.0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << i;
}

TEST(EmaUpdate, DecayZeroCopiesAndDecayOneKeeps) {
  const Tensor avg = Tensor::from_vector<float>({1.0f, 2.0f}, {2});
  const Tensor cur = Tensor::from_vector<float>({5.0f, -7.0f}, {2});
  ema_update({avg}, {cur}, 1.0);
  EXPECT_EQ(avg.to_vector<float>(), (std::vector<float>{1.0f, 2.0f}));
  ema_update({avg}, {cur}, 0.0);
  EXPECT_EQ(avg.to_vector<float>(), (std::vector<float>{5.0f, -7.0f}));
}

TEST(EmaUpdate, RefusesMismatchedListsNamingTheEntry) {
  const Tensor a = Tensor::zeros({3});
  const Tensor b = Tensor::zeros({4});
  EXPECT_THROW(ema_update({a}, {a, a}, 0.5), ValueError);
  try {
    ema_update({a, a}, {a, b}, 0.5);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("entry 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ema_update({a}, {Tensor::zeros({3}, DType::f64)}, 0.5), DTypeError);
  EXPECT_THROW(ema_update({Tensor::zeros({3}, DType::i64)}, {Tensor::zeros({3}, DType::i64)}, 0.5),
               DTypeError);
  EXPECT_THROW(ema_update({a}, {a}, 1.5), ValueError);
  EXPECT_THROW(ema_update({a}, {a}, -0.1), ValueError);
  const Tensor wide = Tensor::zeros({2, 3});
  EXPECT_THROW(ema_update({wide}, {Tensor::zeros({3, 2}).permute({1, 0})}, 0.5),
               ValueError);  // not contiguous
  EXPECT_NO_THROW(ema_update({}, {}, 0.5));
}

TEST(SwapContents, ExchangesAndSwappingTwiceRestores) {
  const Tensor a = Tensor::from_vector<float>({1.0f, 2.0f, 3.0f}, {3});
  const Tensor b = Tensor::from_vector<float>({4.0f, 5.0f, 6.0f}, {3});
  const void* a_data = a.raw_data();
  swap_contents({a}, {b});
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{4.0f, 5.0f, 6.0f}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_EQ(a.raw_data(), a_data);  // in place
  swap_contents({a}, {b});
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1.0f, 2.0f, 3.0f}));
  EXPECT_THROW(swap_contents({a}, {Tensor::zeros({2})}), ShapeError);
}

}  // namespace
}  // namespace liftoff
