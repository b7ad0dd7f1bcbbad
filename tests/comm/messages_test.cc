// Point-to-point messages (send, recv) with threads as ranks over the real shared-memory and
// TCP links, and with processes over the real rendezvous for a peer that dies: every pair on
// odd rank counts, tags received out of order, count 0, large messages both ways at once,
// messages beside collectives, group tags, and the exact errors (a size that differs, a bad
// peer, a peer that is gone or silent); receives from any source: senders racing, beside named
// receives, group tags, ranks that ended or never send.

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "comm/core/communicator.h"
#include "comm/core/subgroup.h"
#include "ranks.h"

namespace ddl::comm {
namespace {

using namespace std::chrono_literals;
using test_ranks::fast;
using test_ranks::grid;
using test_ranks::run_ranks;

/// This host's name, as peer names give it.
std::string host() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

/// Every rank sends every other a message per tag 0..2 (tag t: t+1 elements), receiving them
/// in the reverse tag order, so the first two wait aside.
void every_pair(Communicator& c) {
  for (int p = 0; p < c.size(); ++p) {
    if (p == c.rank()) continue;
    for (int tag = 0; tag < 3; ++tag) {
      std::vector<int64_t> v(static_cast<size_t>(tag) + 1, c.rank() * 100 + p * 10 + tag);
      c.send(v.data(), v.size(), DataType::kInt64, p, tag);
    }
  }
  for (int p = 0; p < c.size(); ++p) {
    if (p == c.rank()) continue;
    for (int tag = 2; tag >= 0; --tag) {
      std::vector<int64_t> v(static_cast<size_t>(tag) + 1, -1);
      c.recv(v.data(), v.size(), DataType::kInt64, p, tag);
      for (int64_t e : v)
        ASSERT_EQ(e, p * 100 + c.rank() * 10 + tag);
    }
  }
}

TEST(MessageTest, EveryPairWithTagsOutOfOrder) {
  for (int n : {2, 3, 5}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    run_ranks(n, std::nullopt, fast(), every_pair);
  }
  const Topology t = grid(1, 3, "messages-tcp-" + std::to_string(getpid()));  // TCP only
  run_ranks(3, t, fast(), every_pair);
}

TEST(MessageTest, CountZeroAndLargeMessagesBothWaysAtOnce) {
  run_ranks(2, std::nullopt, fast(), [](Communicator& c) {
    const int other = 1 - c.rank();
    c.send(nullptr, 0, DataType::kFloat32, other, 7);
    c.recv(nullptr, 0, DataType::kFloat32, other, 7);
    // 32 MiB each way, far more than a link holds: the send runs on a thread of its own.
    std::vector<float> out(8 << 20), in(8 << 20);
    std::iota(out.begin(), out.end(), static_cast<float>(c.rank()));
    std::thread sender([&] { c.send(out.data(), out.size(), DataType::kFloat32, other, 1); });
    c.recv(in.data(), in.size(), DataType::kFloat32, other, 1);
    sender.join();
    EXPECT_EQ(in[12345], static_cast<float>(12345 + other));
  });
}

TEST(MessageTest, AMessageSentJustBeforeFinalisingArrives) {
  // Shared memory keeps nothing after a close: rank 0's close waits until rank 1 has read.
  run_ranks(2, std::nullopt, fast(), [](Communicator& c) {
    std::vector<int32_t> msg(1000, 5);
    if (c.rank() == 0) {
      c.send(msg.data(), msg.size(), DataType::kInt32, 1, 0);
      return;
    }
    std::this_thread::sleep_for(200ms);
    std::vector<int32_t> got(1000);
    c.recv(got.data(), got.size(), DataType::kInt32, 0, 0);
    EXPECT_EQ(got[999], 5);
  });
}

TEST(MessageTest, MessagesNeverMixWithCollectives) {
  // Rank 0 sends before an allreduce that rank 1 makes before receiving.
  run_ranks(3, std::nullopt, fast(), [](Communicator& c) {
    std::vector<int32_t> msg(1000, 77);
    if (c.rank() == 0) c.send(msg.data(), msg.size(), DataType::kInt32, 1, 0);
    std::vector<int32_t> v(50'000, 1);
    c.allreduce(v.data(), v.data(), v.size(), DataType::kInt32, ReduceOp::kSum);
    EXPECT_EQ(v[49'999], 3);
    if (c.rank() == 1) {
      std::vector<int32_t> got(1000);
      c.recv(got.data(), got.size(), DataType::kInt32, 0, 0);
      EXPECT_EQ(got[999], 77);
    }
  });
}

TEST(MessageTest, MessagesOnOneThreadWhileCollectivesRunOnAnother) {
  run_ranks(3, std::nullopt, fast(), [](Communicator& c) {
    const int next = (c.rank() + 1) % 3, prev = (c.rank() + 2) % 3;
    std::thread messages([&] {
      for (int i = 0; i < 200; ++i) {
        std::vector<int32_t> out(1 + i * 37, c.rank() * 1000 + i), in(out.size());
        c.send(out.data(), out.size(), DataType::kInt32, next, i % 4);
        c.recv(in.data(), in.size(), DataType::kInt32, prev, i % 4);
        ASSERT_EQ(in.back(), prev * 1000 + i);
      }
    });
    for (int i = 0; i < 200; ++i) {
      std::vector<int32_t> v(1 + i * 501, 1);
      c.allreduce(v.data(), v.data(), v.size(), DataType::kInt32, ReduceOp::kSum);
      ASSERT_EQ(v.back(), 3);
    }
    messages.join();
  });
}

TEST(MessageTest, GroupTagsAreTheGroups) {
  // The same tag on the job and on a group: each receive takes its own.
  run_ranks(3, std::nullopt, fast(), [](Communicator& c) {
    const int list[] = {2, 0};
    std::unique_ptr<Subgroup> g = c.create_group(list);
    if (c.rank() == 2) {
      const int32_t job = 1, group = 2;
      c.send(&job, 1, DataType::kInt32, 0, 5);
      g->send(&group, 1, DataType::kInt32, 1, 5);  // group rank 1 is rank 0
    } else if (c.rank() == 0) {
      int32_t job = 0, group = 0;
      g->recv(&group, 1, DataType::kInt32, 0, 5);
      c.recv(&job, 1, DataType::kInt32, 2, 5);
      EXPECT_EQ(group, 2);
      EXPECT_EQ(job, 1);
    }
  });
}

TEST(MessageTest, ASizeThatDiffersNamesTheSenderAndDropsTheMessage) {
  std::string error;
  run_ranks(2, std::nullopt, fast(), [&](Communicator& c) {
    if (c.rank() == 0) {
      std::vector<float> ten(10, 1);
      const int32_t next = 9;
      c.send(ten.data(), 10, DataType::kFloat32, 1, 5);
      c.send(&next, 1, DataType::kInt32, 1, 6);
      c.barrier();
      return;
    }
    std::vector<float> twelve(12);
    try {
      c.recv(twelve.data(), 12, DataType::kFloat32, 0, 5);
    } catch (const MismatchError& e) {
      error = e.what();
    }
    int32_t next = 0;
    c.recv(&next, 1, DataType::kInt32, 0, 6);
    EXPECT_EQ(next, 9);
    // Collectives still work: a message mismatch is the receiver's alone.
    c.barrier();
  });
  EXPECT_EQ(error, "recv from rank 0 (" + host() + ")" +
                       ", tag 5: rank 0 sent 10 elements of float32, this rank expects 12 "
                       "elements of float32; the message was dropped (pass the same count and "
                       "type to send and recv)");
}

TEST(MessageTest, BadPeersAreRefused) {
  run_ranks(2, std::nullopt, fast(), [](Communicator& c) {
    float x = 0;
    auto error = [&](auto call) -> std::string {
      try {
        call();
      } catch (const ArgumentError& e) {
        return e.what();
      }
      return "no error";
    };
    EXPECT_EQ(error([&] { c.send(&x, 1, DataType::kFloat32, 2, 0); }),
              "send: peer 2 is not a rank (0..1)");
    EXPECT_EQ(
        error([&] { c.recv(&x, 1, DataType::kFloat32, c.rank(), 0); }),
        "recv: peer " + std::to_string(c.rank()) + " is this rank; messages go to other ranks");
    EXPECT_EQ(error([&] { c.send(nullptr, 1, DataType::kFloat32, 1 - c.rank(), 0); }),
              "send: a null buffer");
  });
}

TEST(MessageTest, ASilentPeerTimesOutNamingIt) {
  std::string error;
  CommOptions o = fast();
  o.timeout = 1s;
  run_ranks(2, std::nullopt, o, [&](Communicator& c) {
    if (c.rank() == 1) {
      // Connect, then say nothing until rank 0 has given up.
      const int32_t hello = 1;
      c.send(&hello, 1, DataType::kInt32, 0, 0);
      std::this_thread::sleep_for(2s);
      return;
    }
    int32_t v = 0;
    c.recv(&v, 1, DataType::kInt32, 1, 0);
    try {
      c.recv(&v, 1, DataType::kInt32, 1, 0);
    } catch (const transport::TransportError& e) {
      error = e.what();
    }
  });
  const std::string peer = "rank 1 (" + host() + ")";
  EXPECT_EQ(error, "recv from " + peer + ", tag 0: " + peer +
                       ": no progress for 1 s (if that rank died, its own output says why; if it "
                       "is only slow, raise DDL_TIMEOUT)");
}

/// Ranks 1.. each send rank 0 `n` messages under tag 4 ({sender, i}); rank 0 takes them all
/// from any source and checks each sender's come in order, the source reported with each.
void senders_race(Communicator& c, int n) {
  if (c.rank() != 0) {
    for (int i = 0; i < n; ++i) {
      const std::vector<int32_t> msg{c.rank(), i};
      c.send(msg.data(), msg.size(), DataType::kInt32, 0, 4);
    }
    return;
  }
  std::vector<int> next(static_cast<size_t>(c.size()), 0);
  for (int k = 0; k < n * (c.size() - 1); ++k) {
    std::vector<int32_t> msg(2, -1);
    const int from = c.recv_any(msg.data(), msg.size(), DataType::kInt32, 4);
    ASSERT_EQ(msg[0], from);
    ASSERT_EQ(msg[1], next[static_cast<size_t>(from)]++);
  }
  for (int r = 1; r < c.size(); ++r)
    EXPECT_EQ(next[static_cast<size_t>(r)], n) << "from rank " << r;
}

TEST(AnySourceTest, SendersRaceAndEachOnesMessagesComeInOrder) {
  for (int n : {2, 3, 5}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    run_ranks(n, std::nullopt, fast(), [](Communicator& c) { senders_race(c, 200); });
  }
  const Topology t = grid(1, 3, "anysource-tcp-" + std::to_string(getpid()));  // TCP only
  run_ranks(3, t, fast(), [](Communicator& c) { senders_race(c, 200); });
}

TEST(AnySourceTest, AHigherRankReceivesFromLowerOnesThatSendLater) {
  // Rank 2 waits for links that ranks 0 and 1 make only when they send (their sends come late).
  run_ranks(3, std::nullopt, fast(), [](Communicator& c) {
    if (c.rank() < 2) {
      std::this_thread::sleep_for(100ms * (c.rank() + 1));
      const int32_t v = 10 + c.rank();
      c.send(&v, 1, DataType::kInt32, 2, 0);
      return;
    }
    std::vector<int> from;
    for (int k = 0; k < 2; ++k) {
      int32_t v = -1;
      from.push_back(c.recv_any(&v, 1, DataType::kInt32, 0));
      EXPECT_EQ(v, 10 + from.back());
    }
    std::sort(from.begin(), from.end());
    EXPECT_EQ(from, (std::vector<int>{0, 1}));
  });
}

TEST(AnySourceTest, MixedWithNamedReceivesAndTags) {
  run_ranks(3, std::nullopt, fast(), [](Communicator& c) {
    if (c.rank() == 1) {
      const int32_t a = 1, b = 2, late = 7, other = 8;
      c.send(&a, 1, DataType::kInt32, 0, 1);
      c.send(&b, 1, DataType::kInt32, 0, 2);
      std::this_thread::sleep_for(100ms);
      c.send(&other, 1, DataType::kInt32, 0, 8);  // while a named receive reads this link
      std::this_thread::sleep_for(100ms);
      c.send(&late, 1, DataType::kInt32, 0, 7);
    } else if (c.rank() == 2) {
      const int32_t v = 3;
      c.send(&v, 1, DataType::kInt32, 0, 2);
    } else {
      int32_t v = 0;
      c.recv(&v, 1, DataType::kInt32, 1, 2);  // rank 1's tag 1 waits aside
      EXPECT_EQ(v, 2);
      EXPECT_EQ(c.recv_any(&v, 1, DataType::kInt32, 1), 1);  // taken from aside
      EXPECT_EQ(v, 1);
      EXPECT_EQ(c.recv_any(&v, 1, DataType::kInt32, 2), 2);
      EXPECT_EQ(v, 3);
      int32_t named = 0;
      std::thread t([&] { c.recv(&named, 1, DataType::kInt32, 1, 7); });
      std::this_thread::sleep_for(20ms);
      EXPECT_EQ(c.recv_any(&v, 1, DataType::kInt32, 8), 1);
      EXPECT_EQ(v, 8);
      t.join();
      EXPECT_EQ(named, 7);
    }
  });
}

TEST(AnySourceTest, GroupTagsAreTheGroupsAndSourcesGroupRanks) {
  run_ranks(3, std::nullopt, fast(), [](Communicator& c) {
    const int list[] = {2, 0};
    std::unique_ptr<Subgroup> g = c.create_group(list);
    if (c.rank() == 2) {
      const int32_t job = 1, group = 2;
      c.send(&job, 1, DataType::kInt32, 0, 5);
      g->send(&group, 1, DataType::kInt32, 1, 5);
    } else if (c.rank() == 0) {
      int32_t v = 0;
      EXPECT_EQ(g->recv_any(&v, 1, DataType::kInt32, 5), 0);  // group rank 0 is rank 2
      EXPECT_EQ(v, 2);
      EXPECT_EQ(c.recv_any(&v, 1, DataType::kInt32, 5), 2);
      EXPECT_EQ(v, 1);
    }
  });
}

TEST(AnySourceTest, ARankThatNeverSendsIsNamedWhenTheTimeoutPasses) {
  std::string error;
  CommOptions o = fast();
  o.timeout = 1s;
  std::atomic<bool> given_up{false};
  run_ranks(3, std::nullopt, o, [&](Communicator& c) {
    if (c.rank() == 0) {
      int32_t v = 0;
      EXPECT_EQ(c.recv_any(&v, 1, DataType::kInt32, 3), 1);
      try {
        c.recv_any(&v, 1, DataType::kInt32, 3);
      } catch (const transport::TransportError& e) {
        error = e.what();
      }
      given_up = true;
      return;
    }
    if (c.rank() == 1) {
      const int32_t v = 1;
      c.send(&v, 1, DataType::kInt32, 0, 3);
    }
    while (!given_up)  // ranks 1 and 2 stay (not gone) until rank 0 has given up
      std::this_thread::sleep_for(10ms);
  });
  const std::string one = "rank 1 (" + host() + ")", two = "rank 2 (" + host() + ")";
  EXPECT_EQ(error, "recv from any of " + one + ", " + two + ", tag 3: no message within 1 s; " +
                       two +
                       " has sent this rank nothing (does every sender use this tag? if a rank "
                       "died, its own output says why; if it is only slow, raise DDL_TIMEOUT)");
}

TEST(AnySourceTest, ARankThatEndedIsLeftOutUntilEveryOneHas) {
  std::string error;
  const Topology t = grid(1, 3, "anysource-ended-" + std::to_string(getpid()));  // TCP only
  run_ranks(3, t, fast(), [&](Communicator& c) {
    int32_t v = c.rank();
    c.barrier();
    if (c.rank() == 2) {
      c.send(&v, 1, DataType::kInt32, 0, 0);
      return;  // gone
    }
    if (c.rank() == 1) {
      std::this_thread::sleep_for(500ms);  // after rank 2 has sent and ended
      c.send(&v, 1, DataType::kInt32, 0, 0);
      return;
    }
    std::vector<int> from;
    for (int k = 0; k < 2; ++k)
      from.push_back(c.recv_any(&v, 1, DataType::kInt32, 0));
    EXPECT_EQ(from, (std::vector<int>{2, 1}));
    std::this_thread::sleep_for(500ms);  // rank 1 ends too
    try {
      c.recv_any(&v, 1, DataType::kInt32, 0);
    } catch (const transport::TransportError& e) {
      error = e.what();
    }
  });
  const std::string one = "rank 1 (" + host() + ")", two = "rank 2 (" + host() + ")";
  EXPECT_EQ(error, "recv from any of " + one + ", " + two + ", tag 0: every one is gone (" + one +
                       ": the connection was closed by the peer; " + two +
                       ": the connection was closed by the peer)");
}

TEST(AnySourceTest, BadCallsAreRefused) {
  run_ranks(1, std::nullopt, fast(), [](Communicator& c) {
    float x = 0;
    try {
      c.recv_any(&x, 1, DataType::kFloat32, 0);
      ADD_FAILURE() << "no error";
    } catch (const ArgumentError& e) {
      EXPECT_STREQ(e.what(),
                   "recv_any: this rank is alone in its group; there is no other rank to "
                   "receive from");
    }
  });
  run_ranks(2, std::nullopt, fast(), [](Communicator& c) {
    try {
      c.recv_any(nullptr, 1, DataType::kFloat32, 0);
      ADD_FAILURE() << "no error";
    } catch (const ArgumentError& e) {
      EXPECT_STREQ(e.what(), "recv_any: a null buffer");
    }
  });
}

// Ranks as processes over the real rendezvous and TCP: rank 1 dies while rank 0 waits for its
// message, and rank 0 fails at once naming it rather than waiting for the timeout.
TEST(MessageProcessTest, AKilledPeerIsNamed) {
  RendezvousServer server("tok", 2);
  const Topology t = grid(1, 2, "messages-death-" + std::to_string(getpid()));
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  std::vector<pid_t> kids;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid != 0) {
      kids.push_back(pid);
      continue;
    }
    std::string result = "ok";
    try {
      CommOptions o = fast();
      o.timeout = 30s;
      Communicator c(
          make_rendezvous_bootstrap("127.0.0.1:" + std::to_string(server.port()), "tok", r, 2, 5s),
          t, o, "tok");
      int32_t v = 0;
      if (r == 1) {
        c.send(&v, 1, DataType::kInt32, 0, 0);
        kill(getpid(), SIGKILL);
      }
      c.recv(&v, 1, DataType::kInt32, 1, 0);
      c.recv(&v, 1, DataType::kInt32, 1, 0);
    } catch (const std::exception& e) {
      result = e.what();
    }
    [[maybe_unused]] ssize_t w = write(fds[1], result.data(), result.size());
    _exit(0);
  }
  close(fds[1]);
  const auto start = std::chrono::steady_clock::now();
  for (pid_t kid : kids)
    waitpid(kid, nullptr, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  std::string text;
  char buf[512];
  ssize_t k;
  while ((k = read(fds[0], buf, sizeof buf)) > 0)
    text.append(buf, static_cast<size_t>(k));
  close(fds[0]);
  const std::string peer = "rank 1 (" + host() + ")";
  EXPECT_EQ(text, "recv from " + peer + ", tag 0: " + peer +
                      ": the connection was closed by the peer (if that rank died, its own output "
                      "says why; if it is only slow, raise DDL_TIMEOUT)");
}

}  // namespace
}  // namespace ddl::comm
