#include "ssh/session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <map>
#include <mutex>
#include <thread>

#include "tests/ssh/fake_ssh.h"

namespace ddl::ssh {
namespace {

TEST(DescriptorExhaustion, NamesTheLimitAndTheFix) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(descriptor_exhaustion(EMFILE),
            "too many open files (limit " + std::to_string(limit.rlim_cur) + "): raise ulimit -n");
  EXPECT_EQ(descriptor_exhaustion(ENFILE),
            "the system's open files are exhausted (fs.file-max): close some, or raise it");
  EXPECT_EQ(descriptor_exhaustion(ECONNREFUSED), "");
  EXPECT_EQ(descriptor_exhaustion(0), "");
  EXPECT_EQ(descriptors_exhausted_now(), "");
}

TEST(DescriptorExhaustion, IsSeenWhenEveryDescriptorIsTaken) {
  // In a child, so that this process keeps its descriptors and limit.
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = 64;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(3);
    while (open("/dev/null", O_RDONLY) >= 0) {
    }
    _exit(descriptors_exhausted_now() == "too many open files (limit 64): raise ulimit -n" ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(SecondsText, WholeSecondsAndFractions) {
  EXPECT_EQ(seconds_text(std::chrono::milliseconds(10'000)), "10 s");
  EXPECT_EQ(seconds_text(std::chrono::milliseconds(300)), "0.3 s");
  EXPECT_EQ(seconds_text(std::chrono::milliseconds(2500)), "2.5 s");
}

// The double itself: what the units' tests rely on.
// The "took no data" rule's clock: it runs only while bytes wait and none moves.
// A jammed channel (a host cut off) stalls after the deadline; a throttled one (a slow link,
// each 64 KiB write taking 8x the deadline to drain) never does while its bytes move; excuse()
// restarts the clock; nothing waiting is never a stall.
TEST(Outbox, StallsOnlyWhileBytesWaitAndNoneMoves) {
  const std::chrono::milliseconds deadline(100);
  const auto remote = [](const char* name) { return std::make_shared<FakeRemote>(name); };
  std::shared_ptr<FakeRemote> cut = remote("cut");
  std::shared_ptr<FakeRemote> slow = remote("slow");
  FakeChannel cut_channel(cut);
  FakeChannel slow_channel(slow);
  Outbox to_cut;
  Outbox to_slow;
  EXPECT_TRUE(to_cut.write(cut_channel));
  std::this_thread::sleep_for(2 * deadline);
  EXPECT_FALSE(to_cut.stalled(deadline));  // nothing waits
  cut->jam(std::chrono::milliseconds(0));
  slow->throttle(80 << 10);  // 64 KiB in 800 ms
  to_cut.add(std::string(1000, 'c'));
  to_slow.add(std::string(100 << 10, 's'));
  const auto start = std::chrono::steady_clock::now();
  bool slow_stalled = false;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(600)) {
    EXPECT_TRUE(to_cut.write(cut_channel));
    EXPECT_TRUE(to_slow.write(slow_channel));
    slow_stalled = slow_stalled || to_slow.stalled(deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(to_cut.stalled(deadline));
  EXPECT_EQ(to_cut.size(), 1000u);
  EXPECT_TRUE(to_cut.socket_full());
  EXPECT_FALSE(slow_stalled);
  EXPECT_GT(slow->written().size(), 0u);
  EXPECT_GT(to_slow.size(), 0u);  // still draining its first 64 KiB
  to_cut.excuse();
  EXPECT_FALSE(to_cut.stalled(deadline));
}

TEST(FakeSsh, RefusesExecFailsAndRecords) {
  FakeConnector connector;
  connector.host("down").refuse = "connection refused (10.0.0.9:22)";
  connector.host("broken").exec_error = "channel refused";
  try {
    connector.connect("down", {});
    ADD_FAILURE() << "connected";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "connection refused (10.0.0.9:22)");
  }
  std::unique_ptr<Session> s = connector.connect("broken", {});
  EXPECT_THROW(s->exec("true"), Error);
  EXPECT_EQ(s->error(), "channel refused");
  EXPECT_EQ(connector.connected(), (std::vector<std::string>{"down", "broken"}));
  EXPECT_EQ(connector.host("broken").commands, (std::vector<std::string>{"true"}));
}

TEST(FakeSsh, ChannelReadsWhatTheRemotePrintsThenEof) {
  FakeConnector connector;
  connector.host("n").program = [](FakeRemote& r) {
    r.print("out");
    r.print("err", Stream::kStderr);
    r.end(3);
  };
  std::unique_ptr<Session> s = connector.connect("n", {});
  std::unique_ptr<Channel> ch = s->exec("cmd");
  char buf[8];
  EXPECT_EQ(ch->poll(std::chrono::milliseconds(0)), 3);
  EXPECT_FALSE(ch->eof());
  EXPECT_EQ(ch->read(buf, sizeof buf, Stream::kStdout), 3);
  EXPECT_EQ(ch->read(buf, sizeof buf, Stream::kStderr), 3);
  EXPECT_EQ(std::string(buf, 3), "err");
  EXPECT_EQ(ch->read(buf, sizeof buf, Stream::kStdout), Channel::kEof);
  EXPECT_TRUE(ch->eof());
  EXPECT_EQ(ch->exit_status(), 3);
  EXPECT_EQ(ch->write("in"), 2);
  EXPECT_EQ(connector.host("n").remotes.at(0)->written(), "in");
}

}  // namespace
}  // namespace ddl::ssh
