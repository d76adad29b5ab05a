// Training checkpoints: one safetensors file (models/train/safetensors.h) per save, readable from Python with
// `safetensors.torch.load_file`. Layout:
//   tensors   "model/<state_dict name>"   Module::state_dict(), PyTorch's names
//             "optimizer/<name>"          Optimizer::named_state() ("momentum_buffer.0", "exp_avg.3", ...)
//             "extra/<name>"              other training state (e.g. a loss scaler), free for the caller
//   metadata  "liftoff.format"            kCheckpointFormat
//             "liftoff.model"             the model's zoo name ("resnet20"), checked on restore
//             "liftoff.epoch", "liftoff.step", "liftoff.batches_into_epoch"   decimal integers
//             "liftoff.lr"                the optimizer's learning rate (%.17g, exact)
//             "liftoff.rng.<name>"        "<seed> <offset>" of a Generator, decimal
//             "liftoff.data_crc32"        CRC-32 of the tensor bytes (detects bit rot the size checks cannot)
//             any other key               the caller's metadata (e.g. "config": the run's flags as JSON)
// Files are "checkpoint-<step, 12 digits>.safetensors", written atomically (temporary file, fsync, rename,
// directory fsync), so a crash leaves the previous checkpoints intact and never a torn file under that name.
// Loading validates everything and throws one IOError / ValueError line that names the file.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/nn/module.h"
#include "models/train/optim.h"
#include "runtime/random.h"

namespace liftoff {

constexpr const char* kCheckpointFormat = "liftoff-checkpoint-1";

struct GeneratorState {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

struct CheckpointState {
  StateDict model;
  NamedTensors optimizer;
  NamedTensors extra;
  std::string model_name;          // empty: not checked on restore
  int64_t epoch = 0;               // the epoch in progress (or the next one when batches_into_epoch == 0)
  int64_t step = 0;                // optimizer steps done
  int64_t batches_into_epoch = 0;  // micro-batches of `epoch` already consumed
  double lr = 0.0;
  std::map<std::string, GeneratorState> generators;  // names: [A-Za-z0-9_.:-]+
  std::map<std::string, std::string> metadata;       // keys must not start with "liftoff."
  std::string path;                                  // set by load_checkpoint, for messages
};

// Writes `state` to `path` atomically (see above). Throws ValueError for bad names, IOError for I/O failures.
void save_checkpoint(const std::string& path, const CheckpointState& state);
// Reads and validates a checkpoint (the safetensors checks, then the Liftoff layout: format, counters,
// generators, CRC). Throws IOError "checkpoint '<path>': ..." (or the safetensors reader's IOError).
CheckpointState load_checkpoint(const std::string& path);

// The newest checkpoint-<step>.safetensors in `dir` that loads without error, "" when none does (or dir does
// not exist). Temporary files are never candidates. `skipped`, when given, receives one line per newer file
// that failed to load (the reason), for a warning.
std::string latest_checkpoint(const std::string& dir, std::vector<std::string>* skipped = nullptr);
// --resume's argument: a directory (its latest valid checkpoint) or a checkpoint file. Throws IOError when
// the directory holds no valid checkpoint (listing why each candidate was rejected) or the path does not
// exist.
std::string resolve_checkpoint(const std::string& dir_or_file);

// Model and optimizer pieces of a CheckpointState.
// capture_model: state_dict (snapshotted to host) + every Dropout generator as "module:<dotted path>".
void capture_model(Module& model, const std::string& model_name, CheckpointState& state);
// Checks before touching the model: the model name (when both are known: "a checkpoint of resnet56, this run
// builds resnet20"), missing / unexpected keys, shapes, the Dropout generators. Throws ValueError naming the
// file; on error the model is unchanged.
void restore_model(const CheckpointState& state, const std::string& model_name, Module& model);
// Optimizer state and learning rate.
void capture_optimizer(const Optimizer& optimizer, CheckpointState& state);
// Same keys and shapes as the optimizer's named_state() (else ValueError naming the file, optimizer
// unchanged).
void restore_optimizer(const CheckpointState& state, Optimizer& optimizer);

// Saves into a directory and keeps the newest `keep_last` checkpoints (0: keep all).
class CheckpointManager {
 public:
  // Creates `dir` if needed and removes temporary files a crashed writer left there.
  CheckpointManager(std::string dir, int64_t keep_last);
  // Writes <dir>/checkpoint-<step>.safetensors (state.step), then prunes. Returns the path.
  std::string save(const CheckpointState& state);
  // Deletes all but the newest keep_last checkpoint files (by step). `just_saved` is never deleted and counts
  // as one of them, so a resumed run that writes a lower step than stale files beside it keeps its own.
  void prune(const std::string& just_saved = "") const;
  const std::string& dir() const { return dir_; }
  static std::string file_name(int64_t step);

 private:
  std::string dir_;
  int64_t keep_last_;
};

}  // namespace liftoff
