// custom_model: a model of your own, written as a liftoff::Module, trained on Fashion-MNIST by the library's
// Trainer. Prints the loss as it falls and the test accuracy at the end.
//
//   custom_model [--data-dir DIR] [--steps 300] [--batch 64] [--lr 0.05] [--device auto|cpu|cuda]
//                [--threads N] [--synthetic]
//
// DIR defaults to where Debian's dataset-fashion-mnist package puts the files. --synthetic trains on
// generated images instead (for machines without the data set).
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "liftoff.h"

namespace {

using namespace liftoff;

// A small residual CNN for 1x28x28 images: a stem, one residual block, a strided convolution, a linear
// classifier. Layers registered with register_module become part of parameters() and state_dict() under
// PyTorch-style names ("block_conv1.weight"), so the optimizer and checkpoints see them.
class TinyResNet : public Module {
 public:
  TinyResNet(int64_t classes, Generator& gen)
      : stem_(register_module("stem", std::make_shared<Conv2d>(1, 16, 3, 1, 1, false, gen))),
        stem_bn_(register_module("stem_bn", std::make_shared<BatchNorm2d>(16))),
        block_conv1_(register_module("block_conv1", std::make_shared<Conv2d>(16, 16, 3, 1, 1, false, gen))),
        block_bn1_(register_module("block_bn1", std::make_shared<BatchNorm2d>(16))),
        block_conv2_(register_module("block_conv2", std::make_shared<Conv2d>(16, 16, 3, 1, 1, false, gen))),
        block_bn2_(register_module("block_bn2", std::make_shared<BatchNorm2d>(16))),
        down_(register_module("down", std::make_shared<Conv2d>(16, 32, 3, 2, 1, false, gen))),
        down_bn_(register_module("down_bn", std::make_shared<BatchNorm2d>(32))),
        fc_(register_module("fc", std::make_shared<Linear>(32 * 7 * 7, classes, true, gen))) {}

  // x: [N, 1, 28, 28] -> logits [N, classes]. Every op is differentiable, so backward() needs nothing more.
  Tensor forward(const Tensor& x) override {
    Tensor h = max_pool2d(relu(stem_bn_->forward(stem_->forward(x))), 2, 2);  // [N, 16, 14, 14]
    const Tensor branch = relu(block_bn1_->forward(block_conv1_->forward(h)));
    h = relu(add(h, block_bn2_->forward(block_conv2_->forward(branch))));  // h + F(h)
    h = relu(down_bn_->forward(down_->forward(h)));                        // [N, 32, 7, 7]
    return fc_->forward(flatten(h, 1));                                    // [N, classes]
  }
  std::string type_name() const override { return "TinyResNet"; }

 private:
  std::shared_ptr<Conv2d> stem_;
  std::shared_ptr<BatchNorm2d> stem_bn_;
  std::shared_ptr<Conv2d> block_conv1_;
  std::shared_ptr<BatchNorm2d> block_bn1_;
  std::shared_ptr<Conv2d> block_conv2_;
  std::shared_ptr<BatchNorm2d> block_bn2_;
  std::shared_ptr<Conv2d> down_;
  std::shared_ptr<BatchNorm2d> down_bn_;
  std::shared_ptr<Linear> fc_;
};

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
          "usage: %s\n",
          "custom_model [--data-dir DIR] [--steps 300] [--batch 64] [--lr 0.05] [--device auto|cpu|cuda]\n"
          "             [--threads N] [--synthetic]");
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
      throw ValueError("unknown flag " + flag + " (the flags are listed at the top of main.cpp)");
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
    } catch (const IOError& e) {  // names the missing file and the package that has it
      throw IOError(str_cat(e.what(), "; or run with --synthetic to train on generated images"));
    }
    return;
  }
  std::printf("--synthetic: generated 28x28 images of 10 classes, not Fashion-MNIST\n");
  // One generated set split in two: train and test must share the class templates.
  const ImageDataset all = make_synthetic_dataset(12000, 1, 28, 28, 10, 7);
  train = test = all;
  train.images = all.images.slice(0, 0, 10000);
  train.labels = all.labels.slice(0, 0, 10000);
  test.images = all.images.slice(0, 10000, 12000);
  test.labels = all.labels.slice(0, 10000, 12000);
}

int run(const Args& a) {
  set_num_threads(a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency()));
  const DeviceChoice device = resolve_device(a.device);
  std::printf("device %s (%s)\n", device.device.str().c_str(), device.why.c_str());

  ImageDataset train_set, test_set;
  load_data(a, train_set, test_set);
  InOrderOptions train_options;
  train_options.batch = a.batch;
  train_options.device = device.device;
  InOrderBatches train_batches(train_set, train_options);
  InOrderOptions test_options = train_options;
  test_options.batch = 500;
  test_options.shuffle = false;
  test_options.augment = false;  // normalise only
  InOrderBatches test_batches(test_set, test_options);

  Generator gen(42);
  TinyResNet model(train_set.num_classes, gen);
  model.to(device.device);  // before the optimizer: its state lives on the parameters' device
  std::printf("TinyResNet: %lld parameters, %lld train / %lld test images\n",
              static_cast<long long>(model.num_parameters()), static_cast<long long>(train_set.size()),
              static_cast<long long>(test_set.size()));
  SGD optimizer(model.parameters(), a.lr, 0.9, 5e-4);
  const auto schedule = make_schedule("onecycle", a.lr, a.steps);
  TrainerOptions options;
  options.max_steps = a.steps;
  Trainer trainer(model, optimizer, schedule.get(), options);

  // The Trainer keeps a running mean over the epoch; differences of it give the mean over each window.
  const int64_t window = 50;
  double sum_at_window_start = 0.0;
  int64_t batches_at_window_start = 0;
  for (int64_t epoch = 0; !trainer.finished(); ++epoch) {
    trainer.train_epoch(train_batches, epoch, [&](const StepProgress& p) {
      if (p.global_step % window != 0 && p.global_step != a.steps) return;
      const double sum = trainer.running_loss() * static_cast<double>(p.micro_batch_in_epoch);  // syncs
      const int64_t count = p.micro_batch_in_epoch - batches_at_window_start;
      std::printf("step %4lld  loss %.4f\n", static_cast<long long>(p.global_step),
                  (sum - sum_at_window_start) / static_cast<double>(count));
      std::fflush(stdout);
      sum_at_window_start = sum;
      batches_at_window_start = p.micro_batch_in_epoch;
    });
    sum_at_window_start = 0.0;  // a new epoch restarts the running mean
    batches_at_window_start = 0;
  }
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
    std::fprintf(stderr, "custom_model: %s\n", e.what());
    return 2;
  }
  try {
    return run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_model: %s\n", e.what());
    return 1;
  }
}
