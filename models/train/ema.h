// ModelEma: an exponential moving average of a model's weights, as timm's ModelEmaV2 and
// torch.optim.swa_utils.AveragedModel(multi_avg_fn=get_ema_multi_avg_fn(decay)) keep it: after every
// optimizer step, ema = decay * ema + (1 - decay) * w. Evaluating the averaged weights usually scores higher
// and steadier than the last step's, at no training cost.
// Buffers (batch-norm running statistics): by default the model's own are used with the averaged weights
// (copied, as the EMA model's buffers follow the model's); average_buffers averages the floating ones too
// (ModelEmaV2's choice, AveragedModel's use_buffers=True). Integer buffers are never averaged.
// The update is one multi-tensor launch per few dozen tensors on the compute stream (ops/ema): no host sync,
// no allocation, so the Trainer runs it inside the captured step (TrainerOptions::ema). Build it after
// model.to(device): it keeps handles to the model's tensors and averages of the same dtype and device.
#pragma once
#include <vector>

#include "models/nn/module.h"
#include "models/train/checkpoint.h"

namespace liftoff {

struct EmaOptions {
  double decay = 0.999;          // in [0, 1): 0 follows the weights exactly
  bool average_buffers = false;  // also average the floating-point buffers
};

class ModelEma {
 public:
  // Starts from a copy of the model's current weights. Throws ValueError for a decay outside [0, 1) or a
  // model whose floating tensors are not all f32 (or all f64) on one device.
  explicit ModelEma(Module& model, EmaOptions options = {});
  ModelEma(const ModelEma&) = delete;
  ModelEma& operator=(const ModelEma&) = delete;

  // ema = decay * ema + (1 - decay) * w for every averaged tensor; call after each optimizer step.
  void update();
  // The averaged tensors under the model's state_dict names ("conv1.weight", "bn1.running_mean" with
  // average_buffers), live: a checkpoint writer reads them, a loader copy_()s into them.
  const NamedTensors& named_averages() const { return averages_; }
  const EmaOptions& options() const { return options_; }
  double decay() const { return options_.decay; }
  // Exchanges the contents of the model's averaged tensors and the EMA's in place (addresses unchanged, so a
  // captured step stays valid); calling it again restores both. Bumps autocast's weight version so cached
  // half-precision weights are cast again.
  void swap_with_model();

 private:
  EmaOptions options_;
  NamedTensors averages_;
  // An average re-laid out where its model tensor's layout changed (Module::to(MemoryFormat) after this EMA
  // was made): the update pairs their storage element by element.
  void follow_model_layouts();

  std::vector<Tensor> model_tensors_;  // the model's tensors (live handles), in averages_' order
  std::vector<Tensor> averaged_;
};

// Checkpoints: the averages as extra tensors "ema.<state_dict name>" (models/train/checkpoint.h).
void capture_ema(const ModelEma& ema, CheckpointState& state);
// Checks everything before copying anything: with an EMA, the checkpoint must hold every average with the
// same shape and dtype (a checkpoint of a run without --ema has none: ValueError naming the file); without
// one (ema null), a checkpoint that holds averages is refused too (resume with --ema), since dropping them
// would silently restart the average.
void restore_ema(const CheckpointState& state, ModelEma* ema);
// Whether the checkpoint holds an EMA of the weights, and whether that EMA averaged buffers of `model` too
// (EmaOptions::average_buffers): what a tool that only reads the checkpoint needs to rebuild the ModelEma.
bool holds_ema(const CheckpointState& state);
bool holds_buffer_averages(const CheckpointState& state, const Module& model);

}  // namespace liftoff
