// predict: the top-k classes a train checkpoint gives image files (PNG, JPEG, BMP; files and folders), as CSV
// or JSON, on the CPU or a CUDA GPU.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "data/augment.h"
#include "data/image_io.h"
#include "ops/cast/cast.h"
#include "ops/softmax/softmax.h"
#include "runtime/autograd.h"
#include "runtime/device_select.h"
#include "tools/common/cli.h"
#include "tools/train/trained_model.h"

namespace {

using namespace liftoff;
namespace fs = std::filesystem;

struct Options {
  std::string checkpoint;
  std::vector<std::string> inputs;
  std::string device = "auto", format = "csv", weights = "auto";
  int64_t top_k = 5, batch = 64;
};

struct Prediction {
  std::string file;
  std::vector<std::pair<int64_t, float>> top;  // class index, probability
};

bool is_image(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

// Files as given; folders: their image files (sub-folders too), sorted.
std::vector<std::string> image_files(const std::vector<std::string>& inputs) {
  std::vector<std::string> out;
  for (const std::string& input : inputs) {
    std::error_code ec;
    if (fs::is_directory(input, ec)) {
      std::vector<std::string> found;
      for (const auto& entry : fs::recursive_directory_iterator(input, ec)) {
        if (entry.is_regular_file() && is_image(entry.path())) found.push_back(entry.path().string());
      }
      LIFTOFF_CHECK(!found.empty(), ValueError, "predict: folder '", input,
                    "' holds no .png, .jpg, .jpeg or .bmp file");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else {
      LIFTOFF_CHECK(fs::is_regular_file(input, ec), ValueError, "predict: '", input,
                    "' is neither an image file nor a folder");
      out.push_back(input);
    }
  }
  return out;
}

// Decoded to the model's channels, resized (bilinear) to its input size, normalised as in training.
Tensor load_batch(const std::vector<std::string>& files, const tools::DataFacts& facts) {
  const int64_t n = static_cast<int64_t>(files.size());
  const int64_t image_bytes = facts.channels * facts.height * facts.width;
  std::vector<uint8_t> pixels(static_cast<size_t>(n * image_bytes));
  for (int64_t i = 0; i < n; ++i) {
    const DecodedImage image = decode_image_file(files[static_cast<size_t>(i)], facts.channels);
    fit_image(image, facts.height, facts.width, ResizeMode::bilinear, pixels.data() + i * image_bytes);
  }
  const Tensor u8 = Tensor::from_vector<uint8_t>(pixels, {n, facts.channels, facts.height, facts.width});
  return normalize_batch(u8, facts.mean, facts.stddev);
}

std::vector<Prediction> predict(Module& model, const std::vector<std::string>& files,
                                const tools::DataFacts& facts, const Options& o, Device device) {
  std::vector<Prediction> out;
  NoGradGuard no_grad;
  const int64_t k = std::min<int64_t>(o.top_k, facts.classes);
  for (size_t begin = 0; begin < files.size(); begin += static_cast<size_t>(o.batch)) {
    const std::vector<std::string> chunk(
        files.begin() + static_cast<std::ptrdiff_t>(begin),
        files.begin() +
            static_cast<std::ptrdiff_t>(std::min(files.size(), begin + static_cast<size_t>(o.batch))));
    const Tensor probabilities =
        softmax(cast(model.forward(load_batch(chunk, facts).to(device)), DType::f32), 1);
    const std::vector<float> p = probabilities.contiguous().to_vector<float>();
    for (size_t i = 0; i < chunk.size(); ++i) {
      const float* row = p.data() + static_cast<int64_t>(i) * facts.classes;
      std::vector<int64_t> order(static_cast<size_t>(facts.classes));
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int64_t a, int64_t b) {
        return row[a] > row[b] || (row[a] == row[b] && a < b);
      });
      Prediction pred{chunk[i], {}};
      for (int64_t r = 0; r < k; ++r)
        pred.top.emplace_back(order[static_cast<size_t>(r)], row[order[static_cast<size_t>(r)]]);
      out.push_back(std::move(pred));
    }
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void print(const std::vector<Prediction>& predictions, const tools::DataFacts& facts,
           const std::string& format) {
  if (format == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const Prediction& p : predictions) {
      nlohmann::json top = nlohmann::json::array();
      for (const auto& [index, probability] : p.top)
        top.push_back({{"class", facts.class_names[static_cast<size_t>(index)]},
                       {"index", index},
                       {"probability", probability}});
      j.push_back({{"file", p.file}, {"top", top}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("file,rank,class,index,probability\n");
  for (const Prediction& p : predictions) {
    for (size_t r = 0; r < p.top.size(); ++r) {
      std::printf("%s,%zu,%s,%lld,%.6f\n", csv_field(p.file).c_str(), r + 1,
                  csv_field(facts.class_names[static_cast<size_t>(p.top[r].first)]).c_str(),
                  static_cast<long long>(p.top[r].first), static_cast<double>(p.top[r].second));
    }
  }
}

int run(const Options& o) {
  const std::vector<std::string> files = image_files(o.inputs);
  // Nothing is trained here: no batch of the (older checkpoints') training set is dropped or refused.
  const tools::TrainedCheckpoint ckpt =
      tools::read_trained_checkpoint(o.checkpoint, {{"drop-last", "false"}});
  for (const std::string& w : ckpt.state.warnings) std::fprintf(stderr, "predict: warning: %s\n", w.c_str());
  const DeviceChoice device = resolve_device(o.device);
  use_device(device.device);
  // Checkpoints of older builds do not store their data facts: the training data set gives them.
  const tools::DataFacts facts =
      ckpt.has_facts ? ckpt.facts : tools::facts_of(tools::make_train_data(ckpt.flags, Device::cpu()));
  const tools::TrainedModel trained =
      tools::build_trained_model(ckpt, facts, device.device, tools::parse_weights_choice(o.weights));
  print(predict(*trained.model, files, facts, o, device.device), facts, o.format);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"predict: the top-k classes a train checkpoint gives image files, as CSV or JSON", "predict"};
  app.formatter(std::make_shared<liftoff::tools::HelpFormatter>());
  Options o;
  app.add_option("checkpoint", o.checkpoint,
                 "a checkpoint file, or a directory (its latest valid checkpoint)")
      ->required();
  app.add_option("images", o.inputs, "image files (PNG, JPEG, BMP) and folders of them")->required();
  app.add_option("-k,--top-k", o.top_k, "classes per image, most probable first")
      ->capture_default_str()
      ->check(liftoff::tools::in_range(int64_t{1}, int64_t{1000000}));
  app.add_option("--format", o.format, "csv | json")
      ->capture_default_str()
      ->check(CLI::IsMember({"csv", "json"}));
  app.add_option("--device", o.device, "auto | cpu | cuda | cuda:N")->capture_default_str();
  app.add_option("--batch,--batch-size", o.batch, "images per forward pass")
      ->capture_default_str()
      ->check(liftoff::tools::in_range(int64_t{1}, int64_t{4096}));
  app.add_option("--weights", o.weights,
                 "auto | ema | model: the checkpoint's EMA of the weights (train --ema) or the last step's "
                 "(auto: the EMA where the checkpoint holds one, as train's evaluations used)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "ema", "model"}));
  if (const int code = liftoff::tools::parse_command_line(app, argc, argv); code >= 0) return code;
  try {
    return run(o);
  } catch (const liftoff::ValueError& e) {
    std::fprintf(stderr, "predict: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "predict: error: %s\n", e.what());
    return 1;
  }
}
