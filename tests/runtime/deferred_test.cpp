#include "runtime/deferred.h"

#include <gtest/gtest.h>

#include "runtime/tensor.h"

namespace liftoff {
namespace {

// Fills its target with a value when issued, and counts the issues.
class FillLater final : public DeferredWrite {
 public:
  FillLater(Tensor target, float value, int* issues)
      : target_(std::move(target)), value_(value), issues_(issues) {}

 protected:
  void issue() override {
    ++*issues_;
    float* p = target_.data<float>();
    for (int64_t i = 0; i < target_.numel(); ++i) p[i] = value_;
  }

 private:
  Tensor target_;
  float value_;
  int* issues_;
};

Tensor deferred_tensor(float value, int* issues) {
  Tensor t = Tensor::zeros({4});
  auto write = std::make_shared<FillLater>(t.detach(), value, issues);
  register_deferred_write(write);
  t.impl().storage.defer(write);
  return t;
}

TEST(DeferredWrite, TheFirstAccessIssuesItOnce) {
  int issues = 0;
  const Tensor t = deferred_tensor(3.0f, &issues);
  EXPECT_EQ(issues, 0);
  const Tensor view = t.slice(0, 1, 3);
  EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{3.0f, 3.0f}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{3.0f, 3.0f, 3.0f, 3.0f}));
  EXPECT_EQ(issues, 1);
  flush_deferred_writes();
  EXPECT_EQ(issues, 1);
}

TEST(DeferredWrite, FlushIssuesPendingWritesOfLiveTensorsOnly) {
  int kept_issues = 0, dropped_issues = 0;
  const Tensor kept = deferred_tensor(1.0f, &kept_issues);
  { const Tensor dropped = deferred_tensor(2.0f, &dropped_issues); }
  flush_deferred_writes();
  EXPECT_EQ(kept_issues, 1);
  EXPECT_EQ(dropped_issues, 0);
  EXPECT_EQ(kept.to_vector<float>()[0], 1.0f);
}

// The writer's handle (a detach() taken before defer()) shares the memory but not the hook.
TEST(DeferredWrite, TheWritersHandleDoesNotIssue) {
  int issues = 0;
  Tensor t = Tensor::zeros({4});
  const Tensor writer = t.detach();
  auto write = std::make_shared<FillLater>(writer, 5.0f, &issues);
  t.impl().storage.defer(write);
  EXPECT_EQ(writer.storage().deferred(), nullptr);
  EXPECT_EQ(writer.to_vector<float>()[0], 0.0f);  // read through the writer: nothing issued
  EXPECT_EQ(issues, 0);
  EXPECT_TRUE(write->pending());
  EXPECT_EQ(t.to_vector<float>()[0], 5.0f);
  EXPECT_EQ(issues, 1);
}

}  // namespace
}  // namespace liftoff
