// A rank that dies mid-training: the other must not hang. Runs the 2-rank job of test_distributed_mpi with
// rank 1 calling _exit(9) after 3 steps, and checks that the job ends well within 60 s, unsuccessfully, with
// the dead rank named: by mpirun, and by rank 0 itself when mpirun does not stop it.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>

namespace {

struct JobResult {
  std::string output;
  int status = -1;
  double seconds = 0.0;
};

JobResult run_job(const std::string& mpirun_extra) {
  const std::string command = std::string(LIFTOFF_MPIRUN) + " " + mpirun_extra +
                              " -x LIFTOFF_TEST_KILL_RANK=1 -x LIFTOFF_DIST_TIMEOUT=10 " LIFTOFF_MPI_WORKER
                              " --gtest_filter=DdpMpiKill.* 2>&1";
  const auto start = std::chrono::steady_clock::now();
  JobResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) result.output.append(buffer, n);
  result.status = pclose(pipe);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

// The usual case: mpirun sees rank 1 exit with 9, stops rank 0 and names rank 1.
TEST(MpiKill, JobEndsAndNamesTheDeadRank) {
  const JobResult job = run_job("");
  EXPECT_LT(job.seconds, 60.0) << job.output;
  ASSERT_TRUE(WIFEXITED(job.status)) << job.output;
  EXPECT_NE(WEXITSTATUS(job.status), 0) << job.output;
  // Open MPI: "Process name: [[jobid,1],1]  Exit code: 9".
  EXPECT_TRUE(std::regex_search(job.output, std::regex(",1\\]\\s+Exit code:\\s+9"))) << job.output;
  EXPECT_EQ(job.output.find("kept training after its peer died"), std::string::npos) << job.output;
}

// mpirun told not to stop the job (as when the dead rank's node is lost): the survivor must end on its own,
// within the timeout, with its own clear error naming the rank that stopped answering.
TEST(MpiKill, SurvivorTimesOutWithClearError) {
  const JobResult job = run_job("--mca orte_abort_on_non_zero_status 0");
  EXPECT_LT(job.seconds, 60.0) << job.output;
  EXPECT_TRUE(std::regex_search(
      job.output,
      std::regex("rank 0: error: mpi all_reduce on rank 0 of 2 did not complete within 10 s: rank 1 "
                 "\\(the other rank\\) has died or hung")))
      << job.output;
  EXPECT_EQ(job.output.find("kept training after its peer died"), std::string::npos) << job.output;
}

}  // namespace
