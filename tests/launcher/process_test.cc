#include "launcher/process.h"

#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace ddl::launcher {
namespace {

using namespace std::chrono_literals;

/// Every event until `n` processes have exited (or 10 s).
std::vector<Event> collect(EventQueue& q, int n) {
  std::vector<Event> out;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (n > 0) {
    auto e = q.pop(deadline);
    if (!e) break;
    if (e->type == Event::Type::kExit) --n;
    out.push_back(std::move(*e));
  }
  return out;
}

SpawnSpec sh(const std::string& script) {
  SpawnSpec s;
  s.argv = {"/bin/sh", "-c", script};
  s.env = current_environment();
  return s;
}

// Out of descriptors (ulimit -n 64): more than "cannot create a pipe: Too many open files".
TEST(ProcessSetTest, OutOfDescriptorsSaysTheLimitAndWhatToDo) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(std::string(pipe_error(EMFILE).what()),
            "cannot create a pipe: Too many open files; ddlrun holds 3 to 4 descriptors for each "
            "rank it starts here, and this process may open " +
                std::to_string(limit.rlim_cur) +
                " (ulimit -n): raise the limit (ulimit -n 4096) or start fewer ranks here");
  EXPECT_EQ(std::string(pipe_error(EINVAL).what()), "cannot create a pipe: Invalid argument");
}

TEST(ProcessSetTest, LinesThenExitInOrder) {
  EventQueue q;
  ProcessSet p(q);
  p.start(4, sh("printf 'one\\ntwo\\npartial'; echo err >&2; exit 3"), "here");
  const auto events = collect(q, 1);
  std::string out, err;
  for (const Event& e : events) {
    if (e.type == Event::Type::kOutput) (e.stream == Stream::kStdout ? out : err) += e.data;
    if (e.type != Event::Type::kExit) {
      EXPECT_EQ(e.rank, 4);
    }
  }
  EXPECT_EQ(out, "one\ntwo\npartial");  // bytes as printed: no newline added
  EXPECT_EQ(err, "err\n");
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, Event::Type::kExit);
  EXPECT_EQ(events.back().status, (ExitStatus{3, 0}));
}

TEST(ProcessSetTest, SignalReachesTheWholeGroup) {
  EventQueue q;
  ProcessSet p(q);
  // The shell waits for a child; both must die of the group signal.
  p.start(0, sh("sleep 30 & wait"), "here");
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(p.running(), 1);
  p.signal(SIGTERM);
  const auto events = collect(q, 1);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().status.signal, SIGTERM);
  EXPECT_EQ(p.running(), 0);
}

TEST(ProcessSetTest, StdinIsWrittenAndClosed) {
  EventQueue q;
  ProcessSet p(q);
  SpawnSpec s = sh("cat; echo done");
  s.pipe_stdin = true;
  p.start(0, s, "here");
  p.write_stdin(0, "abc\n");
  p.close_stdin(0);
  std::string out;
  for (const Event& e : collect(q, 1))
    if (e.type == Event::Type::kOutput) out += e.data;
  EXPECT_EQ(out, "abc\ndone\n");
}

TEST(ProcessSetTest, OutputStopsAtTheQueuesBoundAndTheProcessWaits) {
  EventQueue q;
  ProcessSet p(q);
  p.start(0, sh("head -c 100000000 /dev/zero"), "here");
  std::this_thread::sleep_for(500ms);
  EXPECT_TRUE(q.output_full());
  EXPECT_EQ(p.running(), 1);  // blocked, not done
  // Taking the output lets it go on to the end, all 100 MB of it.
  size_t bytes = 0;
  bool exited = false;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!exited) {
    std::optional<Event> e = q.pop(deadline);
    ASSERT_TRUE(e);
    if (e->type == Event::Type::kOutput) bytes += e->data.size();
    exited = e->type == Event::Type::kExit;
  }
  EXPECT_EQ(bytes, 100000000u);
}

TEST(ProcessSetTest, WriteStdinWaitsWhileTheQueueIsFullUntilClosed) {
  EventQueue q;
  ProcessSet p(q);
  SpawnSpec s = sh("sleep 30");  // never reads its stdin
  s.pipe_stdin = true;
  p.start(0, s, "here");
  size_t gone = 0;
  std::mutex m;
  p.on_stdin_gone([&](size_t n) {
    std::lock_guard lock(m);
    gone += n;
  });
  std::atomic<size_t> queued{0};
  std::atomic<bool> returned{false};
  std::thread writer([&] {
    const std::string block(64 * 1024, 'i');
    while (queued < 64 * ProcessSet::kStdinLimit && p.write_stdin(0, block))
      queued += block.size();
    returned = true;
  });
  std::this_thread::sleep_for(500ms);
  EXPECT_FALSE(returned);  // waits: bounded by the limit and the pipe's own buffer
  EXPECT_LE(queued.load(), ProcessSet::kStdinLimit + (2u << 20));
  p.close_stdin(0);
  writer.join();
  EXPECT_TRUE(returned);
  EXPECT_FALSE(p.write_stdin(0, "late"));
  p.finish();
  std::lock_guard lock(m);
  EXPECT_EQ(gone, queued.load());  // written into the pipe, or dropped with it
}

TEST(ProcessSetTest, BindsToTheCpuSet) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
  int first = -1;
  for (int i = 0; i < CPU_SETSIZE && first < 0; ++i)
    if (CPU_ISSET(i, &mine)) first = i;
  EventQueue q;
  ProcessSet p(q);
  SpawnSpec s = sh("grep Cpus_allowed_list /proc/self/status");
  s.cpus = comm::CpuSet::of({first});
  p.start(0, s, "here");
  std::string line;
  for (const Event& e : collect(q, 1))
    if (e.type == Event::Type::kOutput) line += e.data;
  EXPECT_EQ(line, "Cpus_allowed_list:\t" + std::to_string(first) + "\n");
}

TEST(ProcessSetTest, MissingProgramIsReportedBeforeAnythingRuns) {
  EventQueue q;
  ProcessSet p(q);
  SpawnSpec s;
  s.argv = {"no-such-program-xyz"};
  s.env = {"PATH=/nonexistent:/also-not"};
  try {
    p.start(0, s, "node7");
    FAIL();
  } catch (const LaunchError& e) {
    EXPECT_STREQ(e.what(),
                 "node7: cannot run 'no-such-program-xyz': not found on PATH "
                 "(/nonexistent:/also-not)");
    EXPECT_EQ(e.status(), 127);
  }
  s.argv = {"/etc/hostname"};
  try {
    p.start(0, s, "node7");
    FAIL();
  } catch (const LaunchError& e) {
    EXPECT_EQ(e.status(), 126);
    EXPECT_EQ(std::string(e.what()).rfind("node7: cannot run '/etc/hostname': ", 0), 0u)
        << e.what();
  }
  EXPECT_EQ(p.running(), 0);
}

TEST(ProcessSetTest, BadCpuSetIsReported) {
  EventQueue q;
  ProcessSet p(q);
  SpawnSpec s = sh("true");
  s.cpus = comm::CpuSet::of({1000000});
  try {
    p.start(0, s, "node7");
    FAIL();
  } catch (const LaunchError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("node7: cannot bind '/bin/sh' to CPUs 1000000: ", 0), 0u)
        << e.what();
  }
}

TEST(ProcessSetTest, FinishKillsWhatRuns) {
  EventQueue q;
  pid_t pid = 0;
  {
    ProcessSet p(q);
    p.start(0, sh("exec sleep 30"), "here");
    p.finish();
    EXPECT_EQ(p.running(), 0);
  }
  (void)pid;
}

TEST(EnvironmentTest, MergeReplacesAndAppends) {
  EXPECT_EQ(merge_environment({"A=1", "B=2", "AB=3"}, {{"B", "x"}, {"C", "y"}}),
            (std::vector<std::string>{"A=1", "AB=3", "B=x", "C=y"}));
}

}  // namespace
}  // namespace ddl::launcher
