// Channels-last parameters through the whole training step on the CPU reference: a model re-laid out by
// Module::to(MemoryFormat) after its optimizer and EMA were made trains to the same weights as the model in
// its own layout (conv2d's gradient in the weight's layout, SGD's momentum and the EMA following it). The
// Trainer does this conversion itself only on CUDA (LIFTOFF_WEIGHT_LAYOUT, weight_layout_cuda.cpp).
#include <gtest/gtest.h>

#include <vector>

#include "data/batch_iterator.h"
#include "data/dataset.h"
#include "models/nn/zoo.h"
#include "models/train/ema.h"
#include "models/train/optim.h"
#include "models/train/trainer.h"
#include "tests/common/gradcheck.h"

namespace liftoff {
namespace {

std::vector<Tensor> train_resnet20(bool channels_last) {
  auto model = make_model("resnet20", 1, 10, 12, 3);
  InOrderOptions data;
  data.batch = 16;
  data.augment = false;
  InOrderBatches batches(make_synthetic_dataset(96, 1, 12, 12, 10, 7), data);
  SGD sgd(model->parameters(), 0.05, 0.9, 5e-4);
  ModelEma ema(*model, {0.9, false});
  TrainerOptions options;
  options.cuda_graphs = GraphMode::off;
  options.ema = &ema;
  Trainer trainer(*model, sgd, nullptr, options);
  if (channels_last) model->to(MemoryFormat::channels_last);
  trainer.train_epoch(batches, 0);
  std::vector<Tensor> out;
  for (const Tensor& p : model->parameters()) out.push_back(p.contiguous());
  for (const auto& entry : ema.named_averages()) out.push_back(entry.second.contiguous());
  EXPECT_EQ(model->parameters()[0].is_channels_last(), channels_last);
  return out;
}

TEST(WeightLayout, ChannelsLastParametersTrainAsContiguousOnes) {
  const std::vector<Tensor> plain = train_resnet20(false), laid_out = train_resnet20(true);
  ASSERT_EQ(plain.size(), laid_out.size());
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(testing::all_close(laid_out[i], plain[i], 1e-6, 1e-5)) << "tensor " << i;
}

}  // namespace
}  // namespace liftoff
