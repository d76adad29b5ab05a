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

// Under a CUDA profiler (CUDA_INJECTION64_PATH) the store serves what earlier runs chose but writes nothing:
// choices timed under the profiler's overheads would slow every later run on the machine.
TEST(AlgorithmStore, UnderAProfilerChoicesAreReadButNotWritten) {
  const std::string path = fresh_folder("profiled") + "/conv.tsv";
  AlgorithmStore(path).add("kept", "legacy 1 1 graph 0 12");
  {
    config::ScopedSetting profiler(config::Knob::cuda_injection64_path, "/opt/tool/libInjection.so");
    EXPECT_EQ(cuda_profiler_evidence(), "CUDA_INJECTION64_PATH=/opt/tool/libInjection.so");
  }
  {
    config::ScopedSetting no_profiler(config::Knob::cuda_injection64_path, std::nullopt);
    EXPECT_EQ(cuda_profiler_evidence(), "") << "no profiler loads into the test";
  }
  AlgorithmStore profiled(path, /*keeps_new_choices=*/false);
  EXPECT_EQ(profiled.find("kept").value_or(""), "legacy 1 1 graph 0 12");
  profiled.add("searched under the profiler", "legacy 0 1 graph 3 27");
  EXPECT_EQ(profiled.find("searched under the profiler").value_or(""), "legacy 0 1 graph 3 27")
      << "this run still reuses its own choice";
  AlgorithmStore next_run(path);
  EXPECT_EQ(next_run.find("kept").value_or(""), "legacy 1 1 graph 0 12");
  EXPECT_FALSE(next_run.find("searched under the profiler").has_value());
}

// A profiler that preloads its library instead of setting CUDA_INJECTION64_PATH is found in the process's
// mappings; the CUDA libraries themselves are not a profiler.
TEST(AlgorithmStore, ProfilerLibrariesAreFoundInTheMappings) {
  const std::string plain =
      "55d0c000-55d0d000 r--p 00000000 08:01 123 /usr/bin/train\n"
      "7f00a000-7f00b000 r-xp 00000000 08:01 456 /usr/lib/x86_64-linux-gnu/libcuda.so.580.1\n"
      "7f00c000-7f00d000 r-xp 00000000 08:01 789 "
      "/usr/lib/x86_64-linux-gnu/libcudnn_engines_precompiled.so.9\n"
      "7ffd0000-7ffd1000 rw-p 00000000 00:00 0 [stack]\n"
      "7f00e000-7f00f000 rw-p 00000000 00:00 0\n";
  EXPECT_EQ(profiler_library_in_maps(plain), "");
  EXPECT_EQ(profiler_library_in_maps(plain + "7f010000-7f011000 r-xp 00000000 08:01 42 "
                                             "/opt/tools/target/x64/libTreeLauncherTargetInjection.so\n"),
            "/opt/tools/target/x64/libTreeLauncherTargetInjection.so");
  EXPECT_EQ(
      profiler_library_in_maps(plain + "7f010000-7f011000 r-xp 00000000 08:01 42 "
                                       "/usr/local/cuda/Nsight-Compute-2026.1/target/libnvperf_target.so\n"),
      "/usr/local/cuda/Nsight-Compute-2026.1/target/libnvperf_target.so");
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
