// se_block: a small CNN with a squeeze-and-excitation block (Hu et al. 2018) and a loss of your own, trained
// by the library's Trainer on Fashion-MNIST. On CUDA it trains with bf16 autocast and whole-step CUDA graphs
// (captured after a few eager steps when the step allows it); on the CPU in f32.
//
//   se_block [--data-dir DIR] [--steps 300] [--batch 64] [--lr 0.05] [--device auto|cpu|cuda]
//            [--threads N] [--synthetic]
//
// --synthetic trains on generated images instead (for machines without the data set).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "liftoff.h"

namespace {

using namespace liftoff;

// Squeeze and excitation: each channel is rescaled by a gate in (0, 1) computed from the global average of
// all channels. As PyTorch:
//   s = x.mean((2, 3)); s = sigmoid(fc2(relu(fc1(s)))); return x * s[:, :, None, None]
class SqueezeExcitation : public Module {
 public:
  SqueezeExcitation(int64_t channels, int64_t reduction, Generator& gen)
      : fc1_(register_module("fc1", std::make_shared<Linear>(channels, channels / reduction, true, gen))),
        fc2_(register_module("fc2", std::make_shared<Linear>(channels / reduction, channels, true, gen))) {}

  Tensor forward(const Tensor& x) override {
    const int64_t n = x.size(0), c = x.size(1);
    const Tensor squeezed = global_avg_pool2d(x);                               // [N, C]
    const Tensor gate = sigmoid(fc2_->forward(relu(fc1_->forward(squeezed))));  // [N, C]
    return x * reshape(gate, {n, c, 1, 1});                                     // broadcasts over H and W
  }
  std::string type_name() const override { return "SqueezeExcitation"; }

 private:
  std::shared_ptr<Linear> fc1_, fc2_;
};

// conv-BN-ReLU twice with max pooling, the SE block after the second, then a linear classifier on the
// globally pooled features: [N, 1, 28, 28] -> [N, classes].
class SENet : public Module {
 public:
  SENet(int64_t in_channels, int64_t classes, Generator& gen)
      : conv1_(register_module("conv1", std::make_shared<Conv2d>(in_channels, 32, 3, 1, 1, false, gen))),
        bn1_(register_module("bn1", std::make_shared<BatchNorm2d>(32))),
        conv2_(register_module("conv2", std::make_shared<Conv2d>(32, 64, 3, 1, 1, false, gen))),
        bn2_(register_module("bn2", std::make_shared<BatchNorm2d>(64))),
        se_(register_module("se", std::make_shared<SqueezeExcitation>(64, 8, gen))),
        fc_(register_module("fc", std::make_shared<Linear>(64, classes, true, gen))) {}

  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(relu(bn1_->forward(conv1_->forward(x))), 2, 2);  // [N, 32, 14, 14]
    h = relu(bn2_->forward(conv2_->forward(h)));                           // [N, 64, 14, 14]
    h = max_pool2d(se_->forward(h), 2, 2);                                 // [N, 64, 7, 7]
    return fc_->forward(global_avg_pool2d(h));
  }
  std::string type_name() const override { return "SENet"; }

 private:
  std::shared_ptr<Conv2d> conv1_;
  std::shared_ptr<BatchNorm2d> bn1_;
  std::shared_ptr<Conv2d> conv2_;
  std::shared_ptr<BatchNorm2d> bn2_;
  std::shared_ptr<SqueezeExcitation> se_;
  std::shared_ptr<Linear> fc_;
};

// A custom loss: cross-entropy plus a small penalty on the squared logits (keeps them from growing without
// bound; PaLM's "z-loss" is a cousin). Computed in f32 whatever dtype autocast gave the logits, on the
// device, without host reads, so it can run inside a captured CUDA graph.
LossFn penalised_cross_entropy(double penalty) {
  return [penalty](const Tensor& output, const MicroBatch& batch) {
    const Tensor logits = cast(output, DType::f32);
    return cross_entropy(logits, batch.labels) + penalty * mean(square(logits));
  };
}

struct Args {
  std::string data_dir = kFashionMnistDefaultDir;
  bool synthetic = false;
  int64_t steps = 300;
  int64_t batch = 64;
  double lr = 0.05;
  std::string device = "auto";
  int threads = 0;  // 0: every core
};

double number(const std::string& flag, const std::string& value) {
  size_t used = 0;
  double parsed = 0.0;
  try {
    parsed = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  LIFTOFF_CHECK(used > 0 && used == value.size(), ValueError, flag, ": '", value, "' is not a number");
  return parsed;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::printf(
          "usage: se_block [--data-dir DIR] [--steps 300] [--batch 64] [--lr 0.05] "
          "[--device auto|cpu|cuda] [--threads N] [--synthetic]\n");
      std::exit(0);
    }
    if (flag == "--synthetic") {
      a.synthetic = true;
      continue;
    }
    LIFTOFF_CHECK(i + 1 < argc, ValueError, flag, " needs a value");
    const std::string value = argv[++i];
    if (flag == "--data-dir")
      a.data_dir = value;
    else if (flag == "--device")
      a.device = value;
    else if (flag == "--steps")
      a.steps = static_cast<int64_t>(number(flag, value));
    else if (flag == "--batch")
      a.batch = static_cast<int64_t>(number(flag, value));
    else if (flag == "--lr")
      a.lr = number(flag, value);
    else if (flag == "--threads")
      a.threads = static_cast<int>(number(flag, value));
    else
      throw ValueError("unknown flag " + flag + " (see --help)");
  }
  LIFTOFF_CHECK(a.steps >= 1 && a.batch >= 1, ValueError, "--steps and --batch must be >= 1");
  return a;
}

// Fashion-MNIST from DIR, or (only when asked) a generated stand-in split into train and test.
void load_data(const Args& a, ImageDataset& train, ImageDataset& test) {
  if (!a.synthetic) {
    try {
      train = load_fashion_mnist(a.data_dir, "train");
      test = load_fashion_mnist(a.data_dir, "test");
    } catch (const IOError& e) {
      throw IOError(str_cat(e.what(), "; or run with --synthetic to train on generated images"));
    }
    return;
  }
  std::printf("--synthetic: generated 28x28 images of 10 classes, not Fashion-MNIST\n");
  const ImageDataset all = make_synthetic_dataset(6000, 1, 28, 28, 10, 7);
  train = test = all;
  train.images = all.images.slice(0, 0, 5000);
  train.labels = all.labels.slice(0, 0, 5000);
  test.images = all.images.slice(0, 5000, 6000);
  test.labels = all.labels.slice(0, 5000, 6000);
}

int run(const Args& a) {
  set_num_threads(a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency()));
  const DeviceChoice device = resolve_device(a.device);
  const bool cuda = device.device.is_cuda();
  std::printf("device %s (%s) | amp %s | cuda graphs %s\n", device.device.str().c_str(), device.why.c_str(),
              cuda ? "bf16" : "off", cuda ? "auto" : "off");

  ImageDataset train_set, test_set;
  load_data(a, train_set, test_set);
  InOrderOptions train_options;
  train_options.batch = a.batch;
  train_options.drop_last = true;  // one batch shape, so the captured step can be replayed every time
  train_options.device = device.device;
  InOrderBatches train_batches(train_set, train_options);
  InOrderOptions test_options = train_options;
  test_options.batch = 500;
  test_options.shuffle = false;
  test_options.augment = false;
  test_options.drop_last = false;
  InOrderBatches test_batches(test_set, test_options);

  Generator gen(42);
  SENet model(1, train_set.num_classes, gen);
  model.to(device.device);
  std::printf("SENet: %lld parameters\n", static_cast<long long>(model.num_parameters()));
  SGD optimizer(model.parameters(), a.lr, 0.9, 5e-4);
  const auto schedule = make_schedule("cosine", a.lr, a.steps);
  TrainerOptions options;
  options.max_steps = a.steps;
  options.loss = penalised_cross_entropy(1e-3);
  options.amp = cuda ? AmpMode::bf16 : AmpMode::off;
  options.cuda_graphs = cuda ? GraphMode::automatic : GraphMode::off;
  Trainer trainer(model, optimizer, schedule.get(), options);

  const int64_t every = std::max<int64_t>(1, a.steps / 10);
  for (int64_t epoch = 0; !trainer.finished(); ++epoch) {
    trainer.train_epoch(train_batches, epoch, [&](const StepProgress& p) {
      if (p.global_step % every != 0 && p.global_step != a.steps) return;
      std::printf("step %4lld  loss %.4f (epoch mean)\n", static_cast<long long>(p.global_step),
                  trainer.running_loss());  // reads the device: only every `every` steps
      std::fflush(stdout);
    });
  }
  const GraphStatus& graphs = trainer.graph_status();
  if (cuda)
    std::printf("cuda graphs: %lld of the steps replayed a graph%s%s\n",
                static_cast<long long>(graphs.graph_steps), graphs.reason.empty() ? "" : "; ",
                graphs.reason.c_str());
  const EvalResult result = trainer.evaluate(test_batches);
  std::printf("test accuracy %.2f%% (loss %.4f, %lld images)\n", 100.0 * result.accuracy, result.mean_loss,
              static_cast<long long>(result.images));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const liftoff::ValueError& e) {
    std::fprintf(stderr, "se_block: %s\n", e.what());
    return 2;
  }
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "se_block: %s\n", e.what());
    return 1;
  }
}
