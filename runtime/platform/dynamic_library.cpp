#include "runtime/platform/dynamic_library.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>

#include "runtime/error.h"

namespace liftoff::platform {

DynamicLibrary::DynamicLibrary(const std::vector<std::string>& names, bool global) {
  for (const auto& n : names) {
    handle_ = dlopen(n.c_str(), RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (handle_ != nullptr) {
      name_ = n;
      return;
    }
    const char* e = dlerror();
    error_ = e ? e : "not found";
  }
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

void* DynamicLibrary::symbol(const char* name) const {
  return handle_ ? dlsym(handle_, name) : nullptr;
}

RuntimeLibrary::RuntimeLibrary(Spec spec) : spec_(std::move(spec)) {}

DynamicLibrary& RuntimeLibrary::library() {
  // Leaked on purpose: handles the library gave out (streams, communicators) may be released at exit.
  std::call_once(opened_, [this] {
    library_ = new DynamicLibrary(spec_.chosen ? std::vector<std::string>{*spec_.chosen} : spec_.names,
                                  spec_.global);
  });
  return *library_;
}

bool RuntimeLibrary::loaded() {
  return library().loaded();
}

std::string RuntimeLibrary::load_error() {
  if (library().loaded()) return {};
  return str_cat(spec_.title, " could not be loaded (", library().error(), "); ", spec_.remedy);
}

void* RuntimeLibrary::require(const char* name) {
  if (!library().loaded()) throw BackendError(load_error());
  void* address = library().symbol(name);
  if (address == nullptr) {
    throw BackendError(str_cat("the loaded ", library().name(), " has no ", name, "; ", spec_.remedy));
  }
  return address;
}

std::vector<std::string> loaded_library_paths(const std::string& fragment) {
  struct Query {
    std::string fragment;
    std::vector<std::string> paths;
  } query{fragment, {}};
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) {
        auto* q = static_cast<Query*>(data);
        const std::string path = info->dlpi_name ? info->dlpi_name : "";
        const std::string file = path.substr(path.find_last_of('/') + 1);
        if (!path.empty() && file.find(q->fragment) != std::string::npos &&
            std::find(q->paths.begin(), q->paths.end(), path) == q->paths.end()) {
          q->paths.push_back(path);
        }
        return 0;
      },
      &query);
  return query.paths;
}

}  // namespace liftoff::platform
