// Loading shared libraries at run time (dlopen on POSIX). Kept in one small platform file so a Windows port
// swaps this file only.
#pragma once
#include <string>
#include <vector>

namespace liftoff::platform {

class DynamicLibrary {
 public:
  // Tries each name in order; loaded() tells whether one was found.
  explicit DynamicLibrary(const std::vector<std::string>& names);
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

// Paths of the shared libraries mapped into this process whose file name contains `fragment`.
std::vector<std::string> loaded_library_paths(const std::string& fragment);

}  // namespace liftoff::platform
