// The convolution algorithms chosen on this machine, kept on disk between runs (as MIOpen's find-db and
// TensorRT's timing cache do): a run's first use of a shape then restores the choice instead of timing a
// dozen candidates again (cuDNN's search costs tens of milliseconds per shape and direction, most of a short
// run's first epoch). One text file per GPU model and cuDNN version, one line per choice:
//   <key>\t<choice>
// Lines that do not parse are ignored, a file that cannot be read or written is skipped with one warning:
// the store never fails a run. Host-only (no cuDNN types), so the format is tested without a GPU.
// LIFTOFF_CONV_CACHE: auto (default: $XDG_CACHE_HOME/liftoff, else ~/.cache/liftoff) | off | a directory.
#pragma once
#include <map>
#include <mutex>
#include <optional>
#include <string>

namespace liftoff {

class AlgorithmStore {
 public:
  // The store in `path` (read on first lookup; the file and its folder are made on first add). A store that
  // does not keep new choices (`keeps_new_choices` false: a CUDA profiler is attached, whose overheads skew
  // the timings) still serves the file's and remembers this run's in memory.
  explicit AlgorithmStore(std::string path, bool keeps_new_choices = true);
  // The choice kept for `key`, if any (the last line for it wins).
  std::optional<std::string> find(const std::string& key);
  // Keeps `choice` for `key`, in memory and (unless the store keeps no new choices) appended to the file.
  // Keys and choices must not hold tabs or line breaks (ValueError).
  void add(const std::string& key, const std::string& choice);
  const std::string& path() const { return path_; }
  bool keeps_new_choices() const { return keeps_new_choices_; }

 private:
  void load_locked();
  std::string path_;
  bool keeps_new_choices_ = true;
  std::mutex mutex_;
  bool loaded_ = false;
  bool write_failed_ = false;
  std::map<std::string, std::string> entries_;
};

// The file for a device identity (e.g. "NVIDIA H100 80GB HBM3 sm_90 cuDNN 91600") under LIFTOFF_CONV_CACHE;
// empty when the store is off or no folder can be named (no HOME).
std::string algorithm_store_path(const std::string& identity);
// What shows that a CUDA profiler is attached to this process ("" when nothing does): CUDA_INJECTION64_PATH
// set, or a profiler's library loaded (profiler_library_in_maps over /proc/self/maps). Choices searched under
// a profiler are not written: ResNet-18 fp32 b128 restoring the choices an ncu run had searched trained at
// 29,095 images/s, against 30,887-31,005 with its own (session 30, H100).
std::string cuda_profiler_evidence();
// The first library in `maps` (the text of /proc/<pid>/maps) that a CUDA profiler loads into its target: a
// file name with "injection" in it or a path under an Nsight folder, case-insensitive; "" when none.
std::string profiler_library_in_maps(const std::string& maps);

}  // namespace liftoff
