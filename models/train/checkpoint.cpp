#include "models/train/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <random>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "models/nn/layers.h"
#include "models/train/safetensors.h"
#include "models/train/weights.h"
#include "runtime/platform/file_lock.h"

namespace liftoff {

namespace {

namespace fs = std::filesystem;

constexpr const char* kPrefix = "liftoff.";
constexpr const char* kRngPrefix = "liftoff.rng.";
constexpr const char* kChecksumKey = "liftoff.crc32";
constexpr const char* kRunKey = "liftoff.run";
constexpr const char* kLockFile = "liftoff-run.lock";
constexpr const char* kDamagedHint =
    "the checkpoint is damaged or was not written by Liftoff; resume from another one";
// Format 3 stores model tensors under their state_dict names (PyTorch loads them as they are); formats 1 and
// 2 prefixed them with "model/".
const char* const kSections[] = {"", "optimizer/", "extra/"};
constexpr const char* kLegacyModelSection = "model/";
constexpr const char* kFormat2 = "liftoff-checkpoint-2";
constexpr const char* kFormat1 = "liftoff-checkpoint-1";  // its CRC covered the tensor bytes alone
constexpr const char* kFormat1ChecksumKey = "liftoff.data_crc32";

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

std::string who(const std::string& path) {
  return path.empty() ? "checkpoint" : str_cat("checkpoint '", path, "'");
}

[[noreturn]] void fail(const std::string& path, const std::string& what, const char* hint = kDamagedHint) {
  throw IOError(str_cat(who(path), ": ", what, "; ", hint));
}

// At most `limit` names, then "and N more": messages stay one readable line for models with 100s of tensors.
std::string list(const std::vector<std::string>& names, size_t limit = 5) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += str_cat(" and ", names.size() - limit, " more");
  return out;
}

bool valid_generator_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.' || c == ':' || c == '-';
  });
}

template <class T>
bool parse_whole(const std::string& s, T& out) {
  const char* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, out);
  return !s.empty() && r.ec == std::errc() && r.ptr == end;
}

uLong crc_bytes(uLong crc, const void* data, size_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const auto chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return crc;
}

uLong crc_text(uLong crc, const std::string& s) {
  return crc_bytes(crc_bytes(crc, s.data(), s.size()), "", 1);  // NUL-terminated: "ab"+"c" != "a"+"bc"
}

uLong crc_tensor_bytes(uLong crc, const NamedTensors& tensors) {
  for (const auto& entry : tensors) crc = crc_bytes(crc, entry.second.raw_data(), entry.second.nbytes());
  return crc;
}

}  // namespace

// CRC-32 of everything a checkpoint says: the metadata (but the checksum itself), each tensor's name, dtype
// and shape (in file order), and the tensor bytes. An edited dtype, shape, counter or flag fails it.
uint32_t checkpoint_checksum(const std::map<std::string, std::string>& meta, const NamedTensors& tensors) {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (const auto& [key, value] : meta) {
    if (key == kChecksumKey) continue;
    crc = crc_text(crc_text(crc, key), value);
  }
  for (const auto& [name, t] : tensors) {
    std::string dims;
    for (int64_t d : t.shape()) dims += str_cat(d, ",");
    crc = crc_text(crc_text(crc_text(crc, name), safetensors_dtype_name(t.dtype())), dims);
  }
  return static_cast<uint32_t>(crc_tensor_bytes(crc, tensors));
}

namespace {

// Format 1's checksum: the tensor bytes alone, in file order.
uint32_t tensor_bytes_checksum(const NamedTensors& tensors) {
  return static_cast<uint32_t>(crc_tensor_bytes(crc32(0L, Z_NULL, 0), tensors));
}

// The first element of a floating tensor that is NaN or infinite (by its exponent bits), -1 when none.
template <class Bits>
int64_t first_nonfinite_bits(const Tensor& t, Bits exponent_mask) {
  const auto* p = static_cast<const Bits*>(t.raw_data());
  for (int64_t i = 0; i < t.numel(); ++i) {
    if ((p[i] & exponent_mask) == exponent_mask) return i;
  }
  return -1;
}

int64_t first_nonfinite(const Tensor& t) {
  switch (t.dtype()) {
    case DType::f32:
      return first_nonfinite_bits<uint32_t>(t, 0x7F800000u);
    case DType::f64:
      return first_nonfinite_bits<uint64_t>(t, 0x7FF0000000000000ull);
    case DType::f16:
      return first_nonfinite_bits<uint16_t>(t, 0x7C00u);
    case DType::bf16:
      return first_nonfinite_bits<uint16_t>(t, 0x7F80u);
    default:
      return -1;
  }
}

// "" or why the tensors (host, contiguous) cannot be training state: a NaN/inf weight is never resumed from.
std::string nonfinite_problem(const NamedTensors& tensors) {
  for (const auto& [name, t] : tensors) {
    const int64_t at = first_nonfinite(t);
    if (at < 0) continue;
    std::vector<int64_t> index(t.shape().size());
    for (int64_t rest = at, d = static_cast<int64_t>(index.size()) - 1; d >= 0; --d) {
      const int64_t size = t.shape()[static_cast<size_t>(d)];
      index[static_cast<size_t>(d)] = rest % size;
      rest /= size;
    }
    return str_cat("tensor '", name, "' holds a NaN or infinite value (at index ", shape_str(index),
                   "): the training diverged before this save");
  }
  return "";
}

Tensor host_contiguous(const Tensor& t) {
  return t.detach().to(Device::cpu()).contiguous();
}

// Dropout modules own Generators; "module:<dotted path>" names them in the checkpoint.
void collect_generators(Module& m, const std::string& path,
                        std::vector<std::pair<std::string, Generator*>>& out) {
  if (auto* dropout = dynamic_cast<Dropout*>(&m)) out.emplace_back("module:" + path, &dropout->generator());
  for (const auto& [name, child] : m.named_children()) {
    collect_generators(*child, path.empty() ? name : path + "." + name, out);
  }
}

struct Candidate {
  int64_t step;
  std::string path;
};

// checkpoint-<digits>.safetensors files of `dir`, oldest first.
std::vector<Candidate> list_checkpoints(const std::string& dir) {
  std::vector<Candidate> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string head = "checkpoint-", tail = ".safetensors";
    if (name.size() <= head.size() + tail.size() || !starts_with(name, head) ||
        name.compare(name.size() - tail.size(), tail.size(), tail) != 0) {
      continue;
    }
    int64_t step = 0;
    if (!parse_whole(name.substr(head.size(), name.size() - head.size() - tail.size()), step) || step < 0)
      continue;
    out.push_back({step, entry.path().string()});
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    return a.step != b.step ? a.step < b.step : a.path < b.path;
  });
  return out;
}

// The run id in a checkpoint's header ("" when it has none), kUnreadable when the header cannot be read.
constexpr const char* kUnreadable = "\x01unreadable";
std::string owner_of(const std::string& path) {
  try {
    const auto meta = read_safetensors_metadata(path);
    const auto it = meta.find(kRunKey);
    return it == meta.end() ? std::string() : it->second;
  } catch (const Error&) {
    return kUnreadable;
  }
}

}  // namespace

void save_checkpoint(const std::string& path, const CheckpointState& state) {
  LIFTOFF_CHECK(state.epoch >= 0 && state.step >= 0 && state.batches_into_epoch >= 0, ValueError,
                "save_checkpoint: epoch, step and batches_into_epoch must be >= 0, got ", state.epoch, ", ",
                state.step, ", ", state.batches_into_epoch);
  LIFTOFF_CHECK(std::isfinite(state.lr) && state.lr >= 0, ValueError, "save_checkpoint: bad learning rate ",
                state.lr);
  NamedTensors tensors;
  for (const auto* section : {&state.model, &state.optimizer, &state.extra}) {
    const char* prefix = kSections[section == &state.model ? 0 : section == &state.optimizer ? 1 : 2];
    for (const auto& [name, t] : *section) {
      LIFTOFF_CHECK(t.defined(), ValueError, "save_checkpoint: tensor '", prefix, name, "' is undefined");
      tensors.emplace_back(prefix + name, host_contiguous(t));
    }
  }
  std::map<std::string, std::string> meta;
  for (const auto& [key, value] : state.metadata) {
    LIFTOFF_CHECK(!starts_with(key, kPrefix), ValueError, "save_checkpoint: metadata key '", key,
                  "' uses the reserved prefix 'liftoff.'");
    meta[key] = value;
  }
  meta["liftoff.format"] = kCheckpointFormat;
  if (!state.model_name.empty()) meta["liftoff.model"] = state.model_name;
  meta["liftoff.epoch"] = std::to_string(state.epoch);
  meta["liftoff.step"] = std::to_string(state.step);
  meta["liftoff.batches_into_epoch"] = std::to_string(state.batches_into_epoch);
  char lr[40];
  std::snprintf(lr, sizeof lr, "%.17g", state.lr);
  meta["liftoff.lr"] = lr;
  for (const auto& [name, g] : state.generators) {
    LIFTOFF_CHECK(valid_generator_name(name), ValueError, "save_checkpoint: generator name '", name,
                  "' must be non-empty and use only [A-Za-z0-9_.:-]");
    meta[kRngPrefix + name] = str_cat(g.seed, " ", g.offset);
  }
  if (!state.run_id.empty()) {
    LIFTOFF_CHECK(valid_generator_name(state.run_id), ValueError, "save_checkpoint: run id '", state.run_id,
                  "' must be non-empty and use only [A-Za-z0-9_.:-]");
    meta[kRunKey] = state.run_id;
  }
  // Refuse rather than write weights no run should continue from (load_checkpoint would reject them).
  const std::string nonfinite = nonfinite_problem(tensors);
  LIFTOFF_CHECK(nonfinite.empty(), Error, "save_checkpoint '", path, "': ", nonfinite,
                "; nothing was written");
  meta[kChecksumKey] = std::to_string(checkpoint_checksum(meta, tensors));
  write_safetensors(path, tensors, meta);
}

CheckpointState load_checkpoint(const std::string& path) {
  SafetensorsFile file = read_safetensors(path);
  CheckpointState state;
  state.path = path;

  auto& meta = file.metadata;
  const auto format = meta.find("liftoff.format");
  if (format == meta.end()) {
    fail(path, "its metadata has no liftoff.format: this safetensors file is not a Liftoff checkpoint",
         "pass a checkpoint-<step>.safetensors file written by train");
  }
  const bool format1 = format->second == kFormat1;
  const bool prefixed_model = format1 || format->second == kFormat2;
  if (format->second != kCheckpointFormat && !prefixed_model) {
    fail(path,
         str_cat("format '", format->second, "' is not one this build reads ('", kCheckpointFormat, "', '",
                 kFormat2, "', '", kFormat1, "')"),
         "use the Liftoff version that wrote it");
  }
  if (format1) {
    state.warnings.push_back(str_cat(
        who(path), " has the older format '", kFormat1,
        "': its header and metadata carry no checksum (only its tensor data is verified), so an edited "
        "header would go unnoticed; checkpoints saved from now on use '",
        kCheckpointFormat, "'"));
  }
  const char* checksum_key = format1 ? kFormat1ChecksumKey : kChecksumKey;
  auto integer = [&](const char* key) {
    const auto it = meta.find(key);
    if (it == meta.end()) fail(path, str_cat("metadata '", key, "' is missing"));
    int64_t v = 0;
    if (!parse_whole(it->second, v) || v < 0)
      fail(path, str_cat("metadata '", key, "' = '", it->second, "' is not an integer >= 0"));
    return v;
  };
  state.epoch = integer("liftoff.epoch");
  state.step = integer("liftoff.step");
  state.batches_into_epoch = integer("liftoff.batches_into_epoch");

  uint32_t crc = 0;
  bool has_crc = false, has_lr = false;
  for (const auto& [key, value] : meta) {
    if (!starts_with(key, kPrefix)) {
      state.metadata[key] = value;
    } else if (key == "liftoff.model") {
      state.model_name = value;
    } else if (key == "liftoff.lr") {
      char* end = nullptr;
      state.lr = std::strtod(value.c_str(), &end);
      if (value.empty() || end != value.c_str() + value.size() || !std::isfinite(state.lr) || state.lr < 0)
        fail(path, str_cat("metadata 'liftoff.lr' = '", value, "' is not a learning rate"));
      has_lr = true;
    } else if (key == checksum_key) {
      if (!parse_whole(value, crc)) fail(path, str_cat("metadata '", key, "' = '", value, "' is not a CRC"));
      has_crc = true;
    } else if (key == kRunKey && !format1) {
      if (!valid_generator_name(value))
        fail(path, str_cat("metadata '", key, "' = '", value, "' is not a run id"));
      state.run_id = value;
    } else if (starts_with(key, kRngPrefix)) {
      const std::string name = key.substr(std::string(kRngPrefix).size());
      const auto space = value.find(' ');
      GeneratorState g;
      if (!valid_generator_name(name) || space == std::string::npos ||
          !parse_whole(value.substr(0, space), g.seed) || !parse_whole(value.substr(space + 1), g.offset)) {
        fail(path,
             str_cat("metadata '", key, "' = '", value, "' is not a generator state '<seed> <offset>'"));
      }
      state.generators[name] = g;
    } else if (key != "liftoff.format" && key != "liftoff.epoch" && key != "liftoff.step" &&
               key != "liftoff.batches_into_epoch") {
      fail(path, str_cat("unknown metadata key '", key, "'"));
    }
  }
  if (!has_lr) fail(path, "metadata 'liftoff.lr' is missing");
  const std::string optimizer_section = kSections[1], extra_section = kSections[2];
  for (const auto& [name, t] : file.tensors) {
    if (starts_with(name, optimizer_section)) {
      state.optimizer.emplace_back(name.substr(optimizer_section.size()), t);
    } else if (starts_with(name, extra_section)) {
      state.extra.emplace_back(name.substr(extra_section.size()), t);
    } else if (!prefixed_model) {
      state.model.emplace_back(name, t);
    } else if (starts_with(name, kLegacyModelSection)) {
      state.model.emplace_back(name.substr(std::string(kLegacyModelSection).size()), t);
    } else {
      fail(path, str_cat("tensor '", name, "' is in no section (model/, optimizer/ or extra/)"));
    }
  }
  if (!has_crc) fail(path, str_cat("metadata '", checksum_key, "' is missing"));
  const uint32_t actual =
      format1 ? tensor_bytes_checksum(file.tensors) : checkpoint_checksum(meta, file.tensors);
  if (actual != crc) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "header, metadata or tensor data were changed after it was written (CRC-32 0x%08X, the "
                  "file says 0x%08X)",
                  actual, crc);
    fail(path, buf);
  }
  const std::string nonfinite = nonfinite_problem(file.tensors);
  if (!nonfinite.empty())
    fail(path, nonfinite, "resume from an earlier checkpoint, with a lower --lr or --warmup");

  return state;
}

std::string latest_checkpoint(const std::string& dir, std::vector<std::string>* skipped,
                              const CheckpointCheck& check) {
  auto candidates = list_checkpoints(dir);
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    try {
      const CheckpointState state = load_checkpoint(it->path);
      if (check) check(state);
      return it->path;
    } catch (const Error& e) {
      if (skipped) skipped->push_back(e.what());
    }
  }
  return "";
}

std::string resolve_checkpoint(const std::string& dir_or_file, std::vector<std::string>* rejected,
                               const CheckpointCheck& check) {
  std::error_code ec;
  if (fs::is_directory(dir_or_file, ec)) {
    std::vector<std::string> skipped;
    const std::string latest = latest_checkpoint(dir_or_file, &skipped, check);
    if (latest.empty()) {
      throw IOError(str_cat("no valid checkpoint in '", dir_or_file, "'",
                            skipped.empty()
                                ? std::string(" (no checkpoint-<step>.safetensors files)")
                                : str_cat(": ", skipped.size(), " rejected, newest: ", skipped.front()),
                            "; check the directory or start without --resume"));
    }
    if (rejected) *rejected = std::move(skipped);
    return latest;
  }
  if (!fs::exists(dir_or_file, ec)) {
    throw IOError(
        str_cat("checkpoint '", dir_or_file, "': no such file or directory; check the --resume path"));
  }
  return dir_or_file;
}

void capture_model(Module& model, const std::string& model_name, CheckpointState& state) {
  state.model.clear();
  for (const auto& [name, t] : model.state_dict()) {
    state.model.emplace_back(name, t.is_cuda() ? t.to(Device::cpu()) : t.detach().clone());
  }
  state.model_name = model_name;
  std::vector<std::pair<std::string, Generator*>> gens;
  collect_generators(model, "", gens);
  for (const auto& [name, g] : gens) state.generators[name] = {g->seed(), g->offset()};
}

void restore_model(const CheckpointState& state, const std::string& model_name, Module& model) {
  if (!state.model_name.empty() && !model_name.empty() && state.model_name != model_name) {
    throw ValueError(str_cat(who(state.path), " holds a ", state.model_name, " model, but this run builds ",
                             model_name, "; pass --model ", state.model_name, " or a checkpoint of ",
                             model_name));
  }
  const StateMismatch mismatch = match_state(state.model, model.state_dict());
  std::vector<std::pair<std::string, Generator*>> gens;
  collect_generators(model, "", gens);
  std::vector<std::string> missing_gens;
  for (const auto& [name, g] : gens) {
    if (!state.generators.count(name)) missing_gens.push_back(name);
  }
  if (!mismatch.empty() || !missing_gens.empty()) {
    std::string what = str_cat(who(state.path), " does not match the model");
    if (!state.model_name.empty()) what += str_cat(" (it holds a ", state.model_name, ")");
    what += ":" + mismatch.describe();
    if (!missing_gens.empty()) what += str_cat(" no generator state for ", list(missing_gens), ";");
    throw ValueError(what + " was it written for another --model or data set?");
  }
  model.load_state_dict(state.model, true);
  for (const auto& [name, g] : gens) {
    const GeneratorState& s = state.generators.at(name);
    g->set_state(s.seed, s.offset);
  }
}

void capture_optimizer(const Optimizer& optimizer, CheckpointState& state) {
  state.optimizer.clear();
  for (const auto& [name, t] : optimizer.named_state()) {
    state.optimizer.emplace_back(name, t.is_cuda() ? t.to(Device::cpu()) : t.detach().clone());
  }
  state.lr = optimizer.lr();
}

void restore_optimizer(const CheckpointState& state, Optimizer& optimizer) {
  const NamedTensors own = optimizer.named_state();
  const StateMismatch mismatch = match_state(state.optimizer, own);
  if (!mismatch.empty()) {
    throw ValueError(str_cat(who(state.path), ": the optimizer state does not match the optimizer:",
                             mismatch.describe(), " was it written with another --optimizer or model?"));
  }
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& [name, t] : state.optimizer) given.emplace(name, &t);
  for (const auto& [name, t] : own) t.copy_(*given.at(name));
  optimizer.set_lr(state.lr);
}

CheckpointManager::CheckpointManager(std::string dir, int64_t keep_last, std::string run_id,
                                     bool adopt_unlabelled)
    : dir_(std::move(dir)),
      keep_last_(keep_last),
      run_id_(run_id.empty() ? new_run_id() : std::move(run_id)),
      adopt_unlabelled_(adopt_unlabelled) {
  LIFTOFF_CHECK(keep_last >= 0, ValueError, "CheckpointManager: keep_last must be >= 0 (0: keep all), got ",
                keep_last);
  LIFTOFF_CHECK(valid_generator_name(run_id_), ValueError, "CheckpointManager: run id '", run_id_,
                "' must use only [A-Za-z0-9_.:-]");
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) {
    throw IOError(str_cat("checkpoint directory '", dir_, "': cannot create it",
                          ec ? ": " + ec.message() : std::string(" (a file has that name)"),
                          "; pick another --checkpoint-dir"));
  }
  const std::string lock_path = (fs::path(dir_) / kLockFile).string();
  platform::LockAttempt attempt =
      platform::FileLock::try_lock(lock_path, str_cat(platform::process_description(), ", run ", run_id_));
  if (!attempt.lock) {
    throw IOError(str_cat("checkpoint directory '", dir_, "' is in use by another run (", attempt.held_by,
                          "; lock file ", lock_path,
                          "); wait for it to end or pick another --checkpoint-dir"));
  }
  lock_ = std::move(attempt.lock);
  if (!attempt.stale_from.empty()) {
    lock_note_ = str_cat("took over the lock of checkpoint directory '", dir_,
                         "' from a process that is gone (", attempt.stale_from, ")");
  }
  // A writer killed mid-save leaves "<name>.safetensors.tmp-<pid>"; it was never a checkpoint. Removed only
  // under the lock: a live writer's temporary file is never touched.
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (starts_with(name, "checkpoint-") && name.find(".safetensors.tmp-") != std::string::npos) {
      fs::remove(entry.path(), ec);
    }
  }
  for (const Candidate& c : list_checkpoints(dir_)) {
    const std::string owner = owner_of(c.path);
    if (owner == kUnreadable || owns(owner)) continue;
    throw IOError(str_cat("checkpoint directory '", dir_, "' holds checkpoints of another run (",
                          owner.empty() ? std::string("one without a run id") : "run " + owner, ": ",
                          fs::path(c.path).filename().string(),
                          "); this run would prune or overwrite them. Continue that run with --resume ", dir_,
                          ", or pick another --checkpoint-dir"));
  }
}

CheckpointManager::~CheckpointManager() = default;

std::string CheckpointManager::new_run_id() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  std::random_device rd;
  char out[64];
  std::snprintf(out, sizeof out, "%s-%08x", stamp, static_cast<unsigned>(rd()));
  return out;
}

std::string CheckpointManager::file_name(int64_t step) {
  LIFTOFF_CHECK(step >= 0, ValueError, "checkpoint step must be >= 0, got ", step);
  char buf[64];
  std::snprintf(buf, sizeof buf, "checkpoint-%012lld.safetensors", static_cast<long long>(step));
  return buf;
}

std::string CheckpointManager::save(const CheckpointState& state) {
  const std::string path = (fs::path(dir_) / file_name(state.step)).string();
  std::error_code ec;
  if (fs::exists(path, ec)) {
    const std::string owner = owner_of(path);
    if (!owns(owner)) {
      throw IOError(str_cat("checkpoint '", path, "' exists and was not written by this run (",
                            owner == kUnreadable ? std::string("unreadable") : "run " + owner,
                            "); it is left alone; move it away or pick another --checkpoint-dir"));
    }
  }
  CheckpointState own = state;
  own.run_id = run_id_;
  save_checkpoint(path, own);
  prune(path);
  return path;
}

void CheckpointManager::prune(const std::string& just_saved) const {
  if (keep_last_ == 0) return;
  auto files = list_checkpoints(dir_);
  // Only this run's files count and are ever deleted.
  files.erase(
      std::remove_if(files.begin(), files.end(), [&](const Candidate& c) { return !owns(owner_of(c.path)); }),
      files.end());
  // The file just written always stays, even when older-numbered files exist beside it (a resumed run).
  int64_t keep = keep_last_;
  if (!just_saved.empty()) {
    const auto it = std::find_if(files.begin(), files.end(), [&](const Candidate& c) {
      std::error_code ec;
      return fs::equivalent(c.path, just_saved, ec);
    });
    if (it != files.end()) {
      files.erase(it);
      --keep;
    }
  }
  const auto excess = static_cast<int64_t>(files.size()) - keep;
  for (int64_t i = 0; i < excess; ++i) {
    const std::string& victim = files[static_cast<size_t>(i)].path;
    std::error_code ec;
    fs::remove(victim, ec);
    if (ec) {
      throw IOError(str_cat("cannot delete old checkpoint '", victim, "': ", ec.message(),
                            "; check the permissions of the checkpoint directory"));
    }
  }
}

}  // namespace liftoff
