#include "tools/train/data_setup.h"

#include <algorithm>

#include "data/cifar.h"
#include "data/dataset.h"
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

}  // namespace

TrainData make_train_data(const Flags& f, Device device, int rank, int world_size) {
  LoaderOptions train_opts;
  train_opts.batch = f.batch;
  train_opts.shuffle = true;
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
  test_opts.augment = AugmentMode::none;

  TrainData data;
  if (f.data == "folder") {
    LIFTOFF_CHECK(!f.data_dir.empty(), ValueError,
                  "--data folder needs --data-dir DIR with DIR/train/<class>/* and DIR/test/<class>/*");
    ImageFolderOptions fo;
    fo.height = fo.width = f.image_size;
    fo.on_bad_sample = parse_bad_sample_policy(f.on_bad_sample);
    fo.limits.max_pixels = f.max_image_pixels;
    fo.max_decode_bytes_in_flight = f.decode_memory_mb << 20;
    data.train_folder = std::make_shared<ImageFolder>(f.data_dir + "/train", fo);
    check_classes("--data folder: '" + f.data_dir + "/train'", data.train_folder->num_classes(),
                  data.train_folder->class_names());
    // The test set is decoded at the training set's size and channels.
    fo.height = data.train_folder->height();
    fo.width = data.train_folder->width();
    fo.channels = data.train_folder->channels();
    data.test_folder = std::make_shared<ImageFolder>(f.data_dir + "/test", fo);
    // Labels are class folder positions: the test set must name the same classes in the same order.
    LIFTOFF_CHECK(data.test_folder->class_names() == data.train_folder->class_names(), ValueError,
                  "--data folder: '", f.data_dir, "/test' has the classes ",
                  join(data.test_folder->class_names()), " but '", f.data_dir, "/train' has ",
                  join(data.train_folder->class_names()), "; both need the same class folders");
    data.train = std::make_unique<DataLoader>(data.train_folder, train_opts);
    data.test = std::make_unique<DataLoader>(data.test_folder, test_opts);
    data.train_size = data.train_folder->size();
    data.test_size = data.test_folder->size();
    data.channels = data.train_folder->channels();
    data.height = data.train_folder->height();
    data.width = data.train_folder->width();
    data.classes = data.train_folder->num_classes();
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
  data.train = std::make_unique<DataLoader>(std::move(train_set), train_opts);
  data.test = std::make_unique<DataLoader>(std::move(test_set), test_opts);
  return data;
}

}  // namespace liftoff::tools
