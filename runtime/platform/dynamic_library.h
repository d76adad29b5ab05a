// Loading shared libraries at run time (dlopen on POSIX). Kept in one small platform file so a Windows port
// swaps this file only.
#pragma once
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace liftoff::platform {

class DynamicLibrary {
 public:
  // Tries each name in order; loaded() tells whether one was found. `global`: its symbols serve libraries
  // it opens itself (MPI's plugins need that).
  explicit DynamicLibrary(const std::vector<std::string>& names, bool global = false);
  ~DynamicLibrary();
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  const std::string& name() const { return name_; }
  const std::string& error() const { return error_; }
  // Null when the symbol is absent.
  void* symbol(const char* name) const;

 private:
  void* handle_ = nullptr;
  std::string name_;
  std::string error_;
};

// A vendor library Liftoff calls but does not link (cuDNN, cuBLAS, NCCL, MPI): opened on first use and kept
// until the process ends, so that a machine without it runs everything else and hears what to install.
class RuntimeLibrary {
 public:
  struct Spec {
    std::string title;               // e.g. "cuBLAS 13 (libcublas.so.13)"
    std::vector<std::string> names;  // file names tried in order
    std::string remedy;  // what to install or set, e.g. "install ... or set LIFTOFF_CUBLAS_LIBRARY"
    std::optional<std::string> chosen;  // a file the user named (a LIFTOFF_*_LIBRARY knob): only that one
    bool global = false;                // RTLD_GLOBAL (see DynamicLibrary)
  };
  explicit RuntimeLibrary(Spec spec);

  bool loaded();
  // Empty when loaded; otherwise what could not be loaded, why, and the remedy.
  std::string load_error();
  // The address of `name`; throws BackendError naming the library and the remedy when it or the name is
  // missing.
  void* require(const char* name);

 private:
  DynamicLibrary& library();

  Spec spec_;
  DynamicLibrary* library_ = nullptr;  // opened once (call_once), never closed
  std::once_flag opened_;
};

// Paths of the shared libraries mapped into this process whose file name contains `fragment`.
std::vector<std::string> loaded_library_paths(const std::string& fragment);

}  // namespace liftoff::platform
