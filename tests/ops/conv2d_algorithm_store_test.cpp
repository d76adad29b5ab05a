#include "ops/conv2d/algorithm_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "runtime/config.h"
#include "runtime/error.h"

namespace liftoff {
namespace {

std::string fresh_folder(const std::string& name) {
  const std::string folder =
      ::testing::TempDir() + "liftoff_store_test_" + std::to_string(::getpid()) + "_" + name;
  std::filesystem::remove_all(folder);
  return folder;
}

// A choice written by one run is found by the next (a new store on the same file), the last line for a key
// wins, and lines a crash cut short are ignored.
TEST(AlgorithmStore, ChoicesSurviveIntoTheNextRunAndBrokenLinesAreIgnored) {
  const std::string path = fresh_folder("roundtrip") + "/sub/conv.tsv";
  {
    AlgorithmStore first(path);
    EXPECT_FALSE(first.find("bf16 nhwc 512 16 28 28 forward").has_value());
    first.add("bf16 nhwc 512 16 28 28 forward", "legacy 1 1 graph 3 27");
    first.add("bf16 nhwc 512 16 28 28 backward-data", "legacy 0 1 graph -1 -1");
    first.add("bf16 nhwc 512 16 28 28 forward", "legacy 1 1 graph 0 12");
  }
  {
    std::ofstream append(path, std::ios::app);
    append << "bf16 nhwc 8 8 8 8 forward\tlegacy 1";  // no line end: cut short, but whole fields
    append << "\nno tab on this line\n\tchoice without key\nkey without choice\t\n";
  }
  AlgorithmStore second(path);
  EXPECT_EQ(second.find("bf16 nhwc 512 16 28 28 forward").value_or(""), "legacy 1 1 graph 0 12");
  EXPECT_EQ(second.find("bf16 nhwc 512 16 28 28 backward-data").value_or(""), "legacy 0 1 graph -1 -1");
  EXPECT_FALSE(second.find("no tab on this line").has_value());
  EXPECT_FALSE(second.find("key without choice").has_value());
  EXPECT_THROW(second.add("a\tb", "c"), ValueError);
  EXPECT_THROW(second.add("a", "c\nd"), ValueError);
}

// An unwritable file costs the run its store, never the run: the choice is still kept in memory.
TEST(AlgorithmStore, AnUnwritableFileIsSkipped) {
  const std::string folder = fresh_folder("unwritable");
  std::filesystem::create_directories(folder);
  AlgorithmStore store(folder);  // a folder, not a file: fopen fails
  testing::internal::CaptureStderr();
  EXPECT_NO_THROW(store.add("k", "v"));
  EXPECT_NO_THROW(store.add("k2", "v2"));
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("cannot write the convolution algorithm store"), std::string::npos) << err;
  EXPECT_EQ(err.find("cannot write", err.find("cannot write") + 1), std::string::npos)
      << "one warning: " << err;
  EXPECT_EQ(store.find("k2").value_or(""), "v2");
}

// LIFTOFF_CONV_CACHE: off, a folder, or auto under XDG_CACHE_HOME; the identity becomes a safe file name.
TEST(AlgorithmStore, PathFollowsTheSetting) {
  {
    config::ScopedSetting off(config::Knob::conv_cache, "off");
    EXPECT_EQ(algorithm_store_path("GPU"), "");
  }
  {
    config::ScopedSetting folder(config::Knob::conv_cache, "/tmp/x");
    EXPECT_EQ(algorithm_store_path("NVIDIA H100 80GB/HBM3 sm_90"),
              "/tmp/x/conv-algorithms-v1-NVIDIA_H100_80GB_HBM3_sm_90.tsv");
  }
  config::ScopedSetting automatic(config::Knob::conv_cache, "auto");
  {
    config::ScopedSetting xdg(config::Knob::xdg_cache_home, "/tmp/xdg");
    config::ScopedSetting home(config::Knob::home, "/home/u");
    EXPECT_EQ(algorithm_store_path("A"), "/tmp/xdg/liftoff/conv-algorithms-v1-A.tsv");
  }
  {
    config::ScopedSetting xdg(config::Knob::xdg_cache_home, std::nullopt);
    config::ScopedSetting home(config::Knob::home, "/home/u");
    EXPECT_EQ(algorithm_store_path("A"), "/home/u/.cache/liftoff/conv-algorithms-v1-A.tsv");
  }
  {
    config::ScopedSetting xdg(config::Knob::xdg_cache_home, std::nullopt);
    config::ScopedSetting home(config::Knob::home, std::nullopt);
    EXPECT_EQ(algorithm_store_path("A"), "") << "no folder to name: the store is off";
  }
}

}  // namespace
}  // namespace liftoff
