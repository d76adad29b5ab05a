// training_loop: the loop the library's Trainer runs, written out by hand so each piece can be changed:
// the prefetching DataLoader, mixed precision (autocast + GradScaler, CUDA only), gradient accumulation, an
// LR schedule, loss reads that never stop the GPU, and the utilization report at the end.
//
//   training_loop [--data-dir DIR] [--synthetic] [--device auto|cpu|cuda] [--steps 100] [--batch 32]
//                 [--accum 4] [--amp auto|off|bf16|fp16] [--workers 2] [--lr 0.02] [--threads N]
//
// --amp auto is bf16 on CUDA and off on the CPU; the CPU backend computes in f32/f64 only, so asking for AMP
// there is refused.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "liftoff.h"

namespace {

using namespace liftoff;

struct Args {
  std::string data_dir = kFashionMnistDefaultDir;
  bool synthetic = false;
  std::string device = "auto";
  int64_t steps = 100;  // optimizer steps
  int64_t batch = 32;   // micro-batch
  int64_t accum = 4;    // micro-batches per optimizer step
  std::string amp = "auto";
  int workers = 2;
  double lr = 0.02;
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
          "training_loop [--data-dir DIR] [--synthetic] [--device auto|cpu|cuda] [--steps 100] [--batch 32]\n"
          "                [--accum 4] [--amp auto|off|bf16|fp16] [--workers 2] [--lr 0.02] [--threads N]");
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
    else if (flag == "--amp")
      a.amp = value;
    else if (flag == "--steps")
      a.steps = static_cast<int64_t>(number(flag, value));
    else if (flag == "--batch")
      a.batch = static_cast<int64_t>(number(flag, value));
    else if (flag == "--accum")
      a.accum = static_cast<int64_t>(number(flag, value));
    else if (flag == "--workers")
      a.workers = static_cast<int>(number(flag, value));
    else if (flag == "--lr")
      a.lr = number(flag, value);
    else if (flag == "--threads")
      a.threads = static_cast<int>(number(flag, value));
    else
      throw ValueError("unknown flag " + flag + " (the flags are listed at the top of main.cpp)");
  }
  LIFTOFF_CHECK(a.steps >= 1 && a.batch >= 1 && a.accum >= 1 && a.workers >= 1, ValueError,
                "--steps, --batch, --accum and --workers must be >= 1");
  return a;
}

std::unique_ptr<Module> make_cnn(int64_t classes, Generator& gen) {
  auto net = std::make_unique<Sequential>();
  net->push_back(std::make_shared<Conv2d>(1, 16, 3, 1, 1, false, gen))
      .push_back(std::make_shared<BatchNorm2d>(16))
      .push_back(std::make_shared<ReLU>())
      .push_back(std::make_shared<MaxPool2d>(2))  // [N, 16, 14, 14]
      .push_back(std::make_shared<Conv2d>(16, 32, 3, 1, 1, false, gen))
      .push_back(std::make_shared<BatchNorm2d>(32))
      .push_back(std::make_shared<ReLU>())
      .push_back(std::make_shared<MaxPool2d>(2))  // [N, 32, 7, 7]
      .push_back(std::make_shared<Flatten>())
      .push_back(std::make_shared<Linear>(32 * 7 * 7, classes, true, gen));
  return net;
}

int run(const Args& a) {
  const int threads = a.threads > 0 ? a.threads : static_cast<int>(std::thread::hardware_concurrency());
  set_num_threads(threads);
  const DeviceChoice choice = resolve_device(a.device);
  const Device device = choice.device;
  const AmpMode amp = a.amp == "auto" ? (device.is_cuda() ? AmpMode::bf16 : AmpMode::off) : parse_amp(a.amp);
  LIFTOFF_CHECK(amp == AmpMode::off || device.is_cuda(), ValueError, "--amp ", amp_mode_name(amp),
                " needs a CUDA device: the CPU backend computes in f32/f64 only; use --amp off on the CPU");
  std::printf("device %s (%s) | batch %lld x accum %lld | amp %s\n", device.str().c_str(), choice.why.c_str(),
              static_cast<long long>(a.batch), static_cast<long long>(a.accum), amp_mode_name(amp));

  ImageDataset data;
  if (a.synthetic) {
    std::printf("--synthetic: generated 28x28 images of 10 classes, not Fashion-MNIST\n");
    data = make_synthetic_dataset(8192, 1, 28, 28, 10, 7);
  } else {
    try {
      data = load_fashion_mnist(a.data_dir, "train");
    } catch (const IOError& e) {  // names the missing file and the package that has it
      throw IOError(str_cat(e.what(), "; or run with --synthetic to train on generated images"));
    }
  }
  // Workers decode, augment (CPU target) or stage uint8 batches in pinned memory (CUDA target: the copy and
  // the augmentation kernel run on the device); next() never makes the host wait for the GPU.
  LoaderOptions loader_options;
  loader_options.batch = a.batch;
  loader_options.drop_last = true;  // equal micro-batches: each one's loss weighs 1/accum
  loader_options.workers = a.workers;
  loader_options.prefetch = 2 * a.workers;
  loader_options.device = device;
  loader_options.seed = 1;
  DataLoader loader(data, loader_options);

  Generator gen(42);
  std::unique_ptr<Module> model = make_cnn(data.num_classes, gen);
  model->to(device);  // f32 master weights; autocast makes the half copies
  SGD optimizer(model->parameters(), a.lr, 0.9, 5e-4, true);
  const std::unique_ptr<LRSchedule> schedule = make_schedule("cosine", a.lr, a.steps, a.steps / 10);
  // fp16 scales the loss so small gradients survive (and skips steps whose gradients overflow); bf16 and off
  // give a disabled scaler whose calls cost nothing.
  GradScaler scaler = GradScaler::for_mode(amp, device);

  RunConfig run_config;
  run_config.tool = "training_loop";
  run_config.device = device.str();
  run_config.model = "cnn";
  run_config.data = a.synthetic ? "synthetic" : "fashion-mnist";
  run_config.batch = a.batch;
  run_config.accum = a.accum;
  run_config.amp = amp_mode_name(amp);
  run_config.augment = augment_mode_name(loader.augment_mode());
  run_config.workers = a.workers;
  run_config.prefetch = loader_options.prefetch;
  run_config.pin_memory = loader_options.pin_memory && device.is_cuda();
  run_config.threads = threads;
  run_config.cuda_available = cuda_unavailable_reason(0).empty();
  RunMonitor monitor(run_config, device);
  monitor.watch_loader([&loader] { return loader.stats(); });  // the loader over the measured steps
  Profiler& profiler = monitor.profiler();
  AsyncScalar recent_loss;  // the loss of a recent step, copied without waiting for the device

  int64_t epoch = 0;
  loader.start_epoch(epoch);
  monitor.start();
  for (int64_t step = 0; step < a.steps; ++step) {
    profiler.begin_step();
    Tensor step_loss;  // sum of this step's micro-batch losses, on the device
    int64_t images = 0;
    for (int64_t micro = 0; micro < a.accum; ++micro) {
      Batch batch;
      {
        Profiler::StageScope wait(&profiler, Stage::data_wait);
        while (!loader.next(batch)) loader.start_epoch(++epoch);
      }
      Tensor loss;
      {
        Profiler::StageScope host(&profiler, Stage::forward);
        Profiler::DeviceScope dev(&profiler, Stage::forward);
        const AutocastGuard autocast(amp_compute_dtype(amp));  // conv/linear in bf16/f16; f32 when off
        // The loss (log-softmax) in f32 whatever dtype the logits came in.
        loss = cross_entropy(cast(model->forward(batch.input), DType::f32), batch.labels);
      }
      {
        Profiler::StageScope host(&profiler, Stage::backward);
        Profiler::DeviceScope dev(&profiler, Stage::backward);
        // Gradients add up over the micro-batches; 1/accum makes the sum their mean.
        scaler.scale(scale(loss, 1.0 / static_cast<double>(a.accum))).backward();
      }
      if (step_loss.defined()) {
        accumulate_into(step_loss, loss.detach());
      } else {
        step_loss = loss.detach().clone();
      }
      images += batch.input.size(0);
    }
    {
      Profiler::StageScope host(&profiler, Stage::optimizer);
      Profiler::DeviceScope dev(&profiler, Stage::optimizer);
      optimizer.set_lr(schedule->lr_at(step));
      // Unscales, checks for inf/NaN and skips the update on the device (fp16); a plain step otherwise.
      scaler.step(optimizer);
      scaler.update();
      optimizer.zero_grad();
      advance_weight_version();  // autocast's cached half weights are stale now
    }
    // On CUDA the value arrives a step or so later (an asynchronous copy); reading it never stops the GPU.
    recent_loss.post(step_loss, 1.0 / static_cast<double>(a.accum));
    double loss_value = 0.0;
    if ((step + 1) % 10 == 0 && recent_loss.latest(&loss_value)) {
      std::printf("step %4lld  loss %.4f  lr %.4f  | %s\n", static_cast<long long>(step + 1), loss_value,
                  optimizer.lr(), monitor.progress_text().c_str());
      std::fflush(stdout);
    }
    profiler.end_step(images);  // after the print: its cost counts as "other"
  }
  synchronize(device);
  const LoaderStats loader_stats = loader.stats();
  const RunReport report = monitor.finish(&loader_stats);
  std::printf("%s", report.render_table().c_str());
  if (scaler.enabled()) {
    std::printf("loss scale %g, %lld steps skipped for inf/NaN gradients\n", scaler.current_scale(),
                static_cast<long long>(scaler.skipped_steps().item()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const liftoff::ValueError& e) {
    std::fprintf(stderr, "training_loop: %s\n", e.what());
    return 2;
  }
  try {
    return run(args);
  } catch (const liftoff::ValueError& e) {  // e.g. --amp on the CPU, an unknown --amp value
    std::fprintf(stderr, "training_loop: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "training_loop: %s\n", e.what());
    return 1;
  }
}
