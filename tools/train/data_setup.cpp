#include "tools/train/data_setup.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "data/cifar.h"
#include "data/dataset.h"
#include "data/decode/decode_loader.h"
#include "data/image_folder.h"
#include "models/train/amp.h"

namespace liftoff::tools {

namespace {

// "[a, b, c]", at most 8 names.
std::string join(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size() && i < 8; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 8) out += str_cat(", ... (", names.size(), ")");
  return out + "]";
}

std::pair<ImageDataset, ImageDataset> load_in_memory(const Flags& f) {
  if (f.data == "synthetic") {
    return {make_synthetic_dataset(f.synthetic_size, 1, 28, 28, 10, f.seed + 1),
            make_synthetic_dataset(std::max<int64_t>(f.synthetic_size / 6, 1), 1, 28, 28, 10, f.seed + 2)};
  }
  if (f.data == "mnist" || f.data == "cifar10") {
    LIFTOFF_CHECK(!f.data_dir.empty(), ValueError, "--data ", f.data,
                  " needs --data-dir (the folder with its files)");
    if (f.data == "mnist") return {load_mnist(f.data_dir, "train"), load_mnist(f.data_dir, "test")};
    return {load_cifar10(f.data_dir, "train"), load_cifar10(f.data_dir, "test")};
  }
  const std::string dir = f.data_dir.empty() ? kFashionMnistDefaultDir : f.data_dir;
  return {load_fashion_mnist(dir, "train"), load_fashion_mnist(dir, "test")};
}
// A classifier needs two classes; a one-class data set trains to loss 0 and learns nothing.
void check_classes(const std::string& what, int64_t classes, const std::vector<std::string>& names = {}) {
  LIFTOFF_CHECK(
      classes >= 2, ValueError, what, " has ", classes, " class",
      names.empty() ? std::string() : " ('" + names.front() + "')",
      "; a classifier needs at least 2 classes (one folder per class, or labels 0..K-1 with K >= 2)");
}

// The evaluation runs after a whole epoch of training: a test set the model cannot take must fail now.
void check_test_set(const Flags& f, const ImageDataset& train, const ImageDataset& test) {
  const auto dims = [](const ImageDataset& d) { return Shape{d.channels(), d.height(), d.width()}; };
  LIFTOFF_CHECK(dims(train) == dims(test), ShapeError, "--data ", f.data, ": the test images are ",
                shape_str(dims(test)), " (channels, height, width) but the training images are ",
                shape_str(dims(train)), "; both sets must hold images of one size");
  LIFTOFF_CHECK(test.num_classes <= train.num_classes, ValueError, "--data ", f.data, ": the test set has ",
                test.num_classes, " classes but the training set ", train.num_classes,
                "; the model could never predict the others");
}

// Labels are class folder positions: the test set must name the same classes in the same order.
void check_same_classes(const Flags& f, const TrainData& data) {
  LIFTOFF_CHECK(data.test_folder->class_names() == data.train_folder->class_names(), ValueError,
                "--data folder: '", f.data_dir, "/test' has the classes ",
                join(data.test_folder->class_names()), " but '", f.data_dir, "/train' has ",
                join(data.train_folder->class_names()), "; both need the same class folders");
}

// Most of the first files are JPEGs (by name): what --decode gpu can take.
bool mostly_jpeg(const ImageFolder& folder) {
  const int64_t n = std::min<int64_t>(folder.size(), 64);
  int64_t jpegs = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::string ext = folder.path(i).substr(folder.path(i).find_last_of('.') + 1);
    for (char& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    jpegs += ext == "jpg" || ext == "jpeg" ? 1 : 0;
  }
  return n > 0 && 2 * jpegs > n;
}

// "0.87" (a share of the files).
std::string fmt_share(double share) {
  char text[16];
  std::snprintf(text, sizeof text, "%.2f", std::max(0.0, share));
  return text;
}

// Hands a loader to TrainData with its counters and description.
template <class Loader>
void set_train_loader(TrainData& data, std::unique_ptr<Loader> train, std::unique_ptr<Loader> test) {
  Loader* loader = train.get();
  data.train_stats = [loader] { return loader->stats(); };
  data.train = std::move(train);
  data.test = std::move(test);
}

// --data folder with --decode gpu|cpu|auto: the ImageNet-style DecodeLoader (any image sizes, random resized
// crop), on the training device's decode path.
void make_decode_loaders(const Flags& f, const LoaderOptions& base, TrainData& data) {
  DecodeLoaderOptions o;
  o.batch = base.batch;
  o.drop_last = base.drop_last;
  o.workers = base.workers;
  o.prefetch = base.prefetch;
  o.decode = parse_decode_mode(f.decode);
  o.nvjpeg_backend = parse_nvjpeg_backend(f.nvjpeg_backend);
  o.cpu_decoder = parse_cpu_jpeg_decoder(f.cpu_decoder);
  o.deterministic = f.deterministic;  // auto: one fixed route instead of the adaptive hybrid
  o.crop.out_height = o.crop.out_width = f.image_size > 0 ? f.image_size : 224;
  o.channels = data.train_folder->channels();
  o.mean = data.train_folder->mean();
  o.stddev = data.train_folder->stddev();
  o.on_bad_sample = parse_bad_sample_policy(f.on_bad_sample);
  o.seed = base.seed;
  o.device = base.device;
  o.rank = base.rank;
  o.world_size = base.world_size;
  // Under AMP the crop kernel writes the half input directly.
  if (parse_amp(f.amp) != AmpMode::off && base.device.is_cuda())
    o.input_dtype = amp_compute_dtype(parse_amp(f.amp));
  o.train = parse_augment_mode(f.augment) != AugmentMode::none;
  o.epochs = f.epochs;  // no early start of an epoch after the last
  DecodeLoaderOptions eval = o;
  eval.train = false;
  eval.shuffle = false;
  eval.drop_last = false;
  eval.even_shards = false;
  eval.batch = std::max<int64_t>(f.batch, 256);
  auto train = std::make_unique<DecodeLoader>(data.train_folder, o);
  auto test = std::make_unique<DecodeLoader>(data.test_folder, eval);
  // The report's augment field keeps its values (where the augmentation runs); the header's decode line
  // says what it does.
  data.augment = !o.train ? "none" : base.device.is_cuda() ? "gpu" : "cpu";
  data.decode =
      str_cat(train->describe(), "; ", o.train ? "random resized crop + flip" : "resize + centre crop",
              " to ", o.crop.out_height, "x", o.crop.out_width, ", normalise, ", dtype_name(o.input_dtype),
              base.device.is_cuda() ? " channels-last, in one kernel" : " (CPU twin)");
  data.decode_where = decode_mode_name(train->decode_mode());
  DecodeLoader* loader = train.get();
  data.decode_summary = [loader] {
    const DecodeCounts c = loader->decode_counts();
    return str_cat(
        "decode: ", c.hardware, " nvJPEG primary engine, ", c.gpu_hybrid, " GPU-hybrid, ", c.cpu,
        " CPU (PNG/CMYK, --decode cpu, the hybrid share), ", c.cpu_fallback,
        " CPU after nvJPEG refused them, ", c.batch_retries, " batches retried one by one, ", c.skipped,
        " bad files skipped",
        c.hybrid_share >= 0 ? str_cat("; hybrid CPU share ", fmt_share(c.hybrid_mean_share()), " mean (",
                                      c.hybrid_cpu, " of ", c.hybrid_routable, " nvJPEG-decodable files), ",
                                      fmt_share(c.hybrid_share), " at the end")
                            : std::string(),
        c.decode_timed > 0
            ? str_cat("; decode stream ", c.decode_ms / static_cast<double>(c.decode_timed), " ms per batch")
            : std::string());
  };
  data.height = data.width = o.crop.out_height;
  set_train_loader(data, std::move(train), std::move(test));
}

// --on-bad-sample skip: every file is checked now (the workers' count of threads), the bad ones are left
// out from the start and a folder with too many stops the run here (issue 27).
void check_folder_files(const Flags& f, TrainData& data) {
  if (f.on_bad_sample != "skip") return;
  data.skips = std::make_shared<SkippedFiles>(
      std::vector<std::shared_ptr<const ImageFolder>>{data.train_folder, data.test_folder},
      f.max_bad_fraction);
  data.skips->check_at_load(f.workers);
}

// The names of a built-in data set's classes ("0", "1", ... where it has none).
std::vector<std::string> class_names_of(const std::string& data, int64_t classes) {
  if (data == "fashion-mnist" && classes == 10)
    return {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  if (data == "cifar10" && classes == 10)
    return {"airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"};
  std::vector<std::string> out;
  for (int64_t i = 0; i < classes; ++i) out.push_back(std::to_string(i));
  return out;
}

// Classes and normalisation of a folder data set.
void take_folder_facts(TrainData& data) {
  data.class_names = data.train_folder->class_names();
  data.mean = data.train_folder->mean();
  data.stddev = data.train_folder->stddev();
}

}  // namespace

std::string data_facts_json(const TrainData& data) {
  nlohmann::json j;
  j["channels"] = data.channels;
  j["height"] = data.height;
  j["width"] = data.width;
  j["classes"] = data.classes;
  j["class_names"] = data.class_names;
  j["mean"] = data.mean;
  j["stddev"] = data.stddev;
  return j.dump();
}

TrainData make_train_data(const Flags& f, Device device, int rank, int world_size) {
  LoaderOptions train_opts;
  train_opts.batch = f.batch;
  train_opts.shuffle = true;
  train_opts.epochs = f.epochs;  // no early start of an epoch after the last
  train_opts.drop_last = f.drop_last;
  train_opts.workers = f.workers;
  train_opts.prefetch = effective_prefetch(f);
  train_opts.pin_memory = f.pin_memory;
  train_opts.augment = parse_augment_mode(f.augment);
  train_opts.augment_config.pad = f.pad;
  train_opts.augment_config.erase_prob = static_cast<float>(f.random_erase);
  train_opts.seed = f.seed;
  train_opts.device = device;
  train_opts.rank = rank;
  train_opts.world_size = world_size;
  // Under AMP the GPU augmentation kernel writes the half input directly (the CPU path stays f32).
  const bool gpu_augment = train_opts.augment == AugmentMode::gpu ||
                           (train_opts.augment == AugmentMode::auto_ && device.is_cuda());
  if (parse_amp(f.amp) != AmpMode::off && gpu_augment)
    train_opts.input_dtype = amp_compute_dtype(parse_amp(f.amp));
  LoaderOptions test_opts = train_opts;
  test_opts.even_shards = false;
  test_opts.batch = std::max<int64_t>(f.batch, 256);
  test_opts.shuffle = false;
  test_opts.drop_last = false;  // every test image counts
  test_opts.augment = AugmentMode::none;

  TrainData data;
  if (f.data == "folder") {
    LIFTOFF_CHECK(!f.data_dir.empty(), ValueError,
                  "--data folder needs --data-dir DIR with DIR/train/<class>/* and DIR/test/<class>/*");
    ImageFolderOptions fo;
    fo.on_bad_sample = parse_bad_sample_policy(f.on_bad_sample);
    fo.limits.max_pixels = f.max_image_pixels;
    fo.max_decode_bytes_in_flight = f.decode_memory_mb << 20;
    if (f.decode != "off") {
      // The decode pipeline takes every image at its own size (the folder only lists files and labels) and
      // gives the model RGB, whatever the first file is.
      fo.height = fo.width = 1;
      fo.channels = 3;
      data.train_folder = std::make_shared<ImageFolder>(f.data_dir + "/train", fo);
      data.test_folder = std::make_shared<ImageFolder>(f.data_dir + "/test", fo);
      check_classes("--data folder: '" + f.data_dir + "/train'", data.train_folder->num_classes(),
                    data.train_folder->class_names());
      check_same_classes(f, data);
      check_folder_files(f, data);
      make_decode_loaders(f, train_opts, data);
      data.jpeg = mostly_jpeg(*data.train_folder);
      data.train_size = data.train_folder->size();
      data.test_size = data.test_folder->size();
      data.channels = data.train_folder->channels();
      data.classes = data.train_folder->num_classes();
      take_folder_facts(data);
      return data;
    }
    fo.height = fo.width = f.image_size;
    data.train_folder = std::make_shared<ImageFolder>(f.data_dir + "/train", fo);
    check_classes("--data folder: '" + f.data_dir + "/train'", data.train_folder->num_classes(),
                  data.train_folder->class_names());
    // The test set is decoded at the training set's size and channels.
    fo.height = data.train_folder->height();
    fo.width = data.train_folder->width();
    fo.channels = data.train_folder->channels();
    data.test_folder = std::make_shared<ImageFolder>(f.data_dir + "/test", fo);
    check_same_classes(f, data);
    check_folder_files(f, data);
    data.decode_where = "cpu";  // the loader's workers decode every file
    data.jpeg = mostly_jpeg(*data.train_folder);
    set_train_loader(data, std::make_unique<DataLoader>(data.train_folder, train_opts),
                     std::make_unique<DataLoader>(data.test_folder, test_opts));
    data.augment = augment_mode_name(static_cast<DataLoader&>(*data.train).augment_mode());
    data.train_size = data.train_folder->size();
    data.test_size = data.test_folder->size();
    data.channels = data.train_folder->channels();
    data.height = data.train_folder->height();
    data.width = data.train_folder->width();
    data.classes = data.train_folder->num_classes();
    take_folder_facts(data);
    return data;
  }
  auto [train_set, test_set] = load_in_memory(f);
  check_classes("--data " + f.data + " (training set)", train_set.num_classes);
  check_test_set(f, train_set, test_set);
  data.train_size = train_set.size();
  data.test_size = test_set.size();
  data.channels = train_set.channels();
  data.height = train_set.height();
  data.width = train_set.width();
  data.classes = train_set.num_classes;
  data.mean = train_set.mean;
  data.stddev = train_set.stddev;
  data.class_names = class_names_of(f.data, data.classes);
  set_train_loader(data, std::make_unique<DataLoader>(std::move(train_set), train_opts),
                   std::make_unique<DataLoader>(std::move(test_set), test_opts));
  data.augment = augment_mode_name(static_cast<DataLoader&>(*data.train).augment_mode());
  return data;
}

}  // namespace liftoff::tools
