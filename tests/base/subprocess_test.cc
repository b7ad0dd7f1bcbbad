#include "base/subprocess.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <csignal>

namespace ddl::base {
namespace {

const std::vector<std::string> kEnv = {"PATH=/usr/bin:/bin", "GREETING=hi"};

TEST(RunCapture, KeepsStdoutAndStderrApartAndTheExitCode) {
  const Captured c =
      run_capture({"/bin/sh", "-c", "echo $GREETING; echo oops >&2; exit 3"}, {.environ = kEnv});
  EXPECT_EQ(c.spawn_error, 0);
  EXPECT_EQ(c.exit_status, 3);
  EXPECT_EQ(c.signal, 0);
  EXPECT_FALSE(c.timed_out);
  EXPECT_EQ(c.out, "hi\n");
  EXPECT_EQ(c.err, "oops\n");
}

TEST(RunCapture, MergesStderrWhenAsked) {
  const Captured c = run_capture({"/bin/sh", "-c", "echo a; echo b >&2; echo c"},
                                 {.environ = kEnv, .merge_stderr = true});
  EXPECT_EQ(c.exit_status, 0);
  EXPECT_EQ(c.out, "a\nb\nc\n");
  EXPECT_EQ(c.err, "");
}

TEST(RunCapture, StdinIsEmpty) {
  const Captured c = run_capture({"/bin/cat"}, {.environ = kEnv});
  EXPECT_EQ(c.exit_status, 0);
  EXPECT_EQ(c.out, "");
}

TEST(RunCapture, KillsTheWholeGroupAtTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  // The grandchild holds the pipe open: without the group kill, the read would wait 60 s.
  const Captured c =
      run_capture({"/bin/sh", "-c", "sleep 60 & echo started; wait"},
                  {.environ = kEnv, .timeout = std::chrono::milliseconds(300), .own_group = true});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_TRUE(c.timed_out);
  EXPECT_EQ(c.exit_status, -1);
  EXPECT_EQ(c.signal, SIGKILL);
  EXPECT_EQ(c.out, "started\n");
}

TEST(RunCapture, NamesWhyAProgramDidNotStart) {
  const Captured c = run_capture({"/nonexistent/program"}, {.environ = kEnv});
  EXPECT_EQ(c.spawn_error, ENOENT);
  EXPECT_EQ(c.exit_status, -1);
  EXPECT_EQ(run_capture({}, {}).spawn_error, ENOENT);
}

}  // namespace
}  // namespace ddl::base
