// RuntimeLibrary: how a vendor library opened at run time (cuDNN, cuBLAS, NCCL, MPI) is found, named when
// missing, and asked for functions. zlib stands in for the vendor library: it is loaded in every test
// process.
#include "runtime/platform/dynamic_library.h"

#include <gtest/gtest.h>

#include <string>

#include "runtime/error.h"

namespace liftoff::platform {
namespace {

RuntimeLibrary::Spec spec(std::vector<std::string> names, std::optional<std::string> chosen = std::nullopt) {
  return {"zlib 1 (libz.so.1)", std::move(names), "install zlib (Debian: zlib1g)", std::move(chosen)};
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(RuntimeLibrary, TriesTheNamesInOrderAndFindsFunctions) {
  RuntimeLibrary zlib(spec({"libnot-a-library.so.7", "libz.so.1"}));
  ASSERT_TRUE(zlib.loaded()) << zlib.load_error();
  EXPECT_EQ(zlib.load_error(), "");
  using Version = const char* (*)();
  const auto version = reinterpret_cast<Version>(zlib.require("zlibVersion"));
  EXPECT_EQ(std::string(version()).substr(0, 2), "1.");
}

TEST(RuntimeLibrary, AMissingLibrarySaysWhichWhyAndWhatToInstall) {
  RuntimeLibrary missing(spec({"libnot-a-library.so.7"}));
  EXPECT_FALSE(missing.loaded());
  const std::string error = missing.load_error();
  EXPECT_TRUE(contains(error, "zlib 1 (libz.so.1) could not be loaded (")) << error;
  EXPECT_TRUE(contains(error, "libnot-a-library.so.7")) << error;  // dlerror's reason names the file
  EXPECT_TRUE(contains(error, "); install zlib (Debian: zlib1g)")) << error;
  try {
    missing.require("zlibVersion");
    FAIL() << "require() of a library that is not loaded must throw";
  } catch (const BackendError& e) {
    EXPECT_EQ(std::string(e.what()), error);
  }
}

TEST(RuntimeLibrary, AChosenFileIsTheOnlyOneTried) {
  RuntimeLibrary chosen(spec({"libz.so.1"}, "/nonexistent/libz.so.1"));
  EXPECT_FALSE(chosen.loaded());
  EXPECT_TRUE(contains(chosen.load_error(), "/nonexistent/libz.so.1")) << chosen.load_error();
}

TEST(RuntimeLibrary, AMissingFunctionNamesTheFileAndTheFunction) {
  RuntimeLibrary zlib(spec({"libz.so.1"}));
  try {
    zlib.require("zlibNoSuchFunction");
    FAIL() << "require() of a missing function must throw";
  } catch (const BackendError& e) {
    EXPECT_EQ(std::string(e.what()),
              "the loaded libz.so.1 has no zlibNoSuchFunction; install zlib (Debian: zlib1g)");
  }
}

}  // namespace
}  // namespace liftoff::platform
