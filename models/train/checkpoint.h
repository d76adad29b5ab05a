// Training checkpoints: one safetensors file (models/train/safetensors.h) per save, readable from Python with
// `safetensors.torch.load_file`; `model.load_state_dict(load_file(path), strict=False)` loads the weights as
// they are (the optimizer/ and extra/ tensors are the only other names). Layout (format 3):
//   tensors   "<state_dict name>"         Module::state_dict(), PyTorch's names ("layer1.0.conv1.weight")
//             "optimizer/<name>"          Optimizer::named_state() ("momentum_buffer.0", "exp_avg.3", ...)
//             "extra/<name>"              other training state (e.g. a loss scaler), free for the caller
//   metadata  "liftoff.format"            kCheckpointFormat
//             "liftoff.model"             the model's zoo name ("resnet20"), checked on restore
//             "liftoff.epoch", "liftoff.step", "liftoff.batches_into_epoch"   decimal integers
//             "liftoff.lr"                the optimizer's learning rate (%.17g, exact)
//             "liftoff.rng.<name>"        "<seed> <offset>" of a Generator, decimal
//             "liftoff.run"               the id of the run that wrote it (CheckpointManager: whose file it
//             is) "liftoff.crc32"             CRC-32 over all other metadata, every tensor's name, dtype and
//             shape,
//                                         and the tensor bytes: an edited header, counter or flag, or bit rot
//                                         in the data, fails it (a checksum against accidents, not a
//                                         signature)
//             any other key               the caller's metadata (e.g. "config": the run's flags as JSON)
// Files are "checkpoint-<step, 12 digits>.safetensors", written atomically (temporary file, fsync, rename,
// directory fsync), so a crash leaves the previous checkpoints intact and never a torn file under that name.
// Loading validates everything and throws one IOError / ValueError line that names the file; a checkpoint
// holding a NaN or infinite floating value is rejected too (and never written): no run continues from
// diverged weights. Older formats still load: 2 (model tensors as "model/<name>") as they are, 1 (its CRC-32
// "liftoff.data_crc32" covered the tensor bytes only, no run id) with a warning in CheckpointState::warnings.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/nn/module.h"
#include "models/train/optim.h"
#include "runtime/random.h"

namespace liftoff {

namespace platform {
class FileLock;
}

// Version 3: model tensors under their own names. Version 2: the checksum covers the header and metadata too
// (version 1's covered the tensor bytes only).
constexpr const char* kCheckpointFormat = "liftoff-checkpoint-3";

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
  std::string run_id;                                // the writing run ([A-Za-z0-9_.:-]+); "" for none
  std::string path;                                  // set by load_checkpoint, for messages
  std::vector<std::string> warnings;  // set by load_checkpoint: what a tool should tell the user
};

// Writes `state` to `path` atomically (see above). Throws ValueError for bad names, Error for a NaN/inf
// value (nothing is written), IOError for I/O failures.
void save_checkpoint(const std::string& path, const CheckpointState& state);
// The value of "liftoff.crc32" for this metadata (its own key left out) and these tensors (host,
// contiguous, in file order).
uint32_t checkpoint_checksum(const std::map<std::string, std::string>& metadata, const NamedTensors& tensors);
// Reads and validates a checkpoint (the safetensors checks, then the Liftoff layout: format, counters,
// generators, CRC). Throws IOError "checkpoint '<path>': ..." (or the safetensors reader's IOError).
CheckpointState load_checkpoint(const std::string& path);

// A caller's extra check of a loaded checkpoint (e.g. its "config" metadata parses): throws liftoff::Error
// naming the file to reject it.
using CheckpointCheck = std::function<void(const CheckpointState&)>;

// The newest checkpoint-<step>.safetensors in `dir` that loads without error (and passes `check`, when
// given), "" when none does (or dir does not exist). Temporary files are never candidates. `skipped`, when
// given, receives one line per newer file that was rejected (the reason), for a warning.
std::string latest_checkpoint(const std::string& dir, std::vector<std::string>* skipped = nullptr,
                              const CheckpointCheck& check = {});
// --resume's argument: a directory (its latest valid checkpoint) or a checkpoint file. Throws IOError when
// the directory holds no valid checkpoint (listing why each candidate was rejected) or the path does not
// exist. `rejected`, when given, receives the reasons newer files of the directory were passed over.
std::string resolve_checkpoint(const std::string& dir_or_file, std::vector<std::string>* rejected = nullptr,
                               const CheckpointCheck& check = {});

// Model and optimizer pieces of a CheckpointState.
// capture_model: state_dict (snapshotted to host) + every Dropout generator as "module:<dotted path>".
void capture_model(Module& model, const std::string& model_name, CheckpointState& state);
// Checks before touching the model: the model name (when both are known: "a checkpoint of resnet56, this run
// builds resnet20"), missing / unexpected keys, shapes, dtypes, the Dropout generators. Throws ValueError
// naming the file; on error the model is unchanged.
void restore_model(const CheckpointState& state, const std::string& model_name, Module& model);
// Optimizer state and learning rate.
void capture_optimizer(const Optimizer& optimizer, CheckpointState& state);
// Same keys, shapes and dtypes as the optimizer's named_state() (else ValueError naming the file, optimizer
// unchanged).
void restore_optimizer(const CheckpointState& state, Optimizer& optimizer);

// A run's checkpoint directory. The run owns it while the manager lives: a lock file (liftoff-run.lock)
// keeps a second run out (refused naming the holder), and a lock left by a dead process is taken over (see
// lock_note()). Every checkpoint it writes carries its run id; it refuses a directory that holds checkpoints
// of another run, never overwrites a file it did not write, and keeps the newest `keep_last` of its own
// checkpoints (0: keep all), whatever else lies in the directory.
class CheckpointManager {
 public:
  // Creates `dir` if needed, takes the lock, removes temporary files a crashed writer left there, and checks
  // that no checkpoint in it belongs to another run. run_id: the run continued (a resumed run passes its
  // checkpoint's run_id); "" starts a new run with a fresh id. adopt_unlabelled: checkpoints without a run id
  // (format 1) count as this run's, for a run resumed from one of them. Throws IOError.
  CheckpointManager(std::string dir, int64_t keep_last, std::string run_id = "",
                    bool adopt_unlabelled = false);
  ~CheckpointManager();
  CheckpointManager(const CheckpointManager&) = delete;
  CheckpointManager& operator=(const CheckpointManager&) = delete;

  // Writes <dir>/checkpoint-<step>.safetensors (state.step) under this run's id, then prunes. Returns the
  // path.
  std::string save(const CheckpointState& state);
  // Deletes all but the newest keep_last of this run's checkpoint files (by step). `just_saved` is never
  // deleted and counts as one of them, so a resumed run that writes a lower step than stale files beside it
  // keeps its own.
  void prune(const std::string& just_saved = "") const;
  const std::string& dir() const { return dir_; }
  const std::string& run_id() const { return run_id_; }
  // "" or one line to show the user: a stale lock of a dead process was taken over.
  const std::string& lock_note() const { return lock_note_; }
  static std::string file_name(int64_t step);
  // A fresh run id: "<UTC date>T<time>Z-<8 hex digits>".
  static std::string new_run_id();

 private:
  std::string dir_;
  int64_t keep_last_;
  std::string run_id_;
  std::string lock_note_;
  bool adopt_unlabelled_ = false;
  std::unique_ptr<platform::FileLock> lock_;

  bool owns(const std::string& owner) const {
    return owner == run_id_ || (adopt_unlabelled_ && owner.empty());
  }
};

}  // namespace liftoff
