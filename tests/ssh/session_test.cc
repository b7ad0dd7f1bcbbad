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

TEST(KeptSessions, KeepsOneSessionPerHostUntilTaken) {
  FakeConnector connector;
  connector.host("node1").endpoint = "10.0.0.1:22";
  KeptSessions kept;
  EXPECT_EQ(kept.take("node1").session, nullptr);
  kept.put("node1", KeptSessions::Kept{connector.connect("node1", {}), {}, {}, {}});
  kept.put("node2", KeptSessions::Kept{connector.connect("node2", {}), {}, {}, {}});
  EXPECT_EQ(kept.size(), 2u);
  KeptSessions::Kept one = kept.take("node1");
  ASSERT_NE(one.session, nullptr);
  EXPECT_EQ(one.session->endpoint(), "10.0.0.1:22");
  EXPECT_EQ(kept.take("node1").session, nullptr);  // taken once
  EXPECT_EQ(kept.size(), 1u);
}

TEST(KeptSessions, HasLooksWithoutTaking) {
  FakeConnector connector;
  KeptSessions kept;
  EXPECT_FALSE(kept.has("node1"));
  kept.put("node1", KeptSessions::Kept{connector.connect("node1", {}), {}, {}, {}});
  KeptSessions::Kept lost;
  lost.lost = "node2's agent is gone";
  kept.put("node2", std::move(lost));  // kept for its reason, but no session
  EXPECT_TRUE(kept.has("node1"));
  EXPECT_TRUE(kept.has("node1"));  // still there
  EXPECT_FALSE(kept.has("node2"));
  EXPECT_EQ(kept.take("node2").lost, "node2's agent is gone");
  ASSERT_NE(kept.take("node1").session, nullptr);
  EXPECT_FALSE(kept.has("node1"));
}

TEST(KeptSessions, PutReplacesAndClosesTheOldOne) {
  FakeConnector connector;
  KeptSessions kept;
  kept.put("node1", KeptSessions::Kept{connector.connect("node1", {}), {}, {}, {}});
  EXPECT_EQ(connector.host("node1").sessions_open, 1);
  kept.put("node1", KeptSessions::Kept{connector.connect("node1", {}), {}, {}, {}});
  EXPECT_EQ(connector.host("node1").sessions_open, 1);
  EXPECT_EQ(kept.size(), 1u);
}

TEST(KeptSessions, DestroyingClosesWhatWasNotTaken) {
  FakeConnector connector;
  connector.host("node1").program = [](FakeRemote&) {};
  {
    KeptSessions kept;
    std::unique_ptr<Session> session = connector.connect("node1", {});
    std::unique_ptr<Channel> channel = session->exec("agent");
    kept.put("node1", KeptSessions::Kept{std::move(session), std::move(channel), "", "agent"});
  }
  EXPECT_EQ(connector.host("node1").sessions_open, 0);
  EXPECT_TRUE(connector.host("node1").remotes.at(0)->closed());
}

// ddlrun's heartbeat while it plans (launcher/ssh/tree_start.h: keep_agents_alive): every
// session kept is beaten each interval, one taken is not, and destroying stops the beats.
TEST(KeptSessions, KeepAliveBeatsEachKeptSessionUntilTakenOrDestroyed) {
  FakeConnector connector;
  std::mutex mutex;
  std::map<std::string, int> beats;  // by endpoint ("node1:22")
  const auto count = [&](const std::string& endpoint) {
    std::lock_guard lock(mutex);
    return beats[endpoint];
  };
  {
    KeptSessions kept;
    kept.put("node1", KeptSessions::Kept{connector.connect("node1", {}), {}, {}, {}});
    kept.put("node2", KeptSessions::Kept{connector.connect("node2", {}), {}, {}, {}});
    kept.keep_alive(
        [&](KeptSessions::Kept& k) {
          std::lock_guard lock(mutex);
          ++beats[k.session->endpoint()];
          k.pending += "b";
        },
        std::chrono::milliseconds(10));
    KeptSessions::Kept one = kept.take("node1");
    ASSERT_NE(one.session, nullptr);
    const int one_beats = count("node1:22");
    for (int i = 0; i < 500 && count("node2:22") < 3; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_GE(count("node2:22"), 3);
    EXPECT_EQ(count("node1:22"), one_beats);  // taken: no more beats
    KeptSessions::Kept two = kept.take("node2");
    EXPECT_GE(two.pending.size(), 3u);  // what a beat read stays with the session
    kept.put("node2", std::move(two));
  }
  const int after = count("node2:22");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(count("node2:22"), after);  // destroyed: the beats stopped
}

// ddlrun takes SIGINT and the like with sigtimedwait() on a thread that blocks them: the beat
// thread, made while they were not blocked, must not take them (a signal's default action
// there would end ddlrun at once).
TEST(KeptSessions, TheKeepAliveThreadTakesNoSignal) {
  KeptSessions kept;
  kept.keep_alive([](KeptSessions::Kept&) {}, std::chrono::milliseconds(10));
  sigset_t usr1;
  sigset_t old;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &usr1, &old), 0);
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  const timespec wait{5, 0};
  EXPECT_EQ(sigtimedwait(&usr1, nullptr, &wait), SIGUSR1);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
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
