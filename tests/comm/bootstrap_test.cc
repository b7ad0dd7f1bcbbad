// The rendezvous (ddlrun's server and the ranks' clients over real TCP on loopback) and the
// memory bootstrap.

#include "comm/bootstrap/bootstrap.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

#include "tests/comm/memory_bootstrap.h"

namespace ddl::comm {
namespace {

using namespace std::chrono_literals;

std::string address_of(const RendezvousServer& s) {
  return "127.0.0.1:" + std::to_string(s.port());
}

TEST(RendezvousTest, AllgatherRoundsGiveEveryValueByRank) {
  const int n = 5;
  RendezvousServer server("secret", n);
  std::vector<std::future<std::vector<std::vector<std::string>>>> results;
  for (int r = 0; r < n; ++r) {
    results.push_back(std::async(std::launch::async, [&, r] {
      auto b = make_rendezvous_bootstrap(address_of(server), "secret", r, n, 5s);
      std::vector<std::vector<std::string>> rounds;
      rounds.push_back(b->allgather("addr-" + std::to_string(r), 5s));
      rounds.push_back(b->allgather(std::string(r * 1000, 'x'), 5s));  // sizes differ
      return rounds;
    }));
  }
  for (int r = 0; r < n; ++r) {
    const auto rounds = results[r].get();
    ASSERT_EQ(rounds.size(), 2u);
    for (int k = 0; k < n; ++k) {
      EXPECT_EQ(rounds[0][k], "addr-" + std::to_string(k));
      EXPECT_EQ(rounds[1][k].size(), static_cast<size_t>(k * 1000));
    }
  }
}

TEST(RendezvousTest, WrongTokenIsNotAdmitted) {
  RendezvousServer server("secret", 2);
  auto good = std::async(std::launch::async, [&] {
    auto b = make_rendezvous_bootstrap(address_of(server), "secret", 0, 2, 5s);
    return b->allgather("a", 1s);
  });
  // An impostor claiming rank 1 is dropped, so rank 0 hears that rank 1 never came.
  auto bad = make_rendezvous_bootstrap(address_of(server), "guess", 1, 2, 5s);
  try {
    good.get();
    FAIL() << "rank 0 completed with an impostor";
  } catch (const BootstrapError& e) {
    EXPECT_STREQ(e.what(),
                 "rank 1 has not joined the rendezvous in time (did they start? see their "
                 "output)");
  }
  EXPECT_THROW(bad->allgather("b", 1s), BootstrapError);
}

TEST(RendezvousTest, MissingRanksAreNamed) {
  RendezvousServer server("t", 6);
  std::vector<std::future<std::string>> errors;
  for (int r : {0, 2, 3}) {
    errors.push_back(std::async(std::launch::async, [&, r] {
      auto b = make_rendezvous_bootstrap(address_of(server), "t", r, 6, 5s);
      try {
        b->allgather("x", 500ms);
      } catch (const BootstrapError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    }));
  }
  for (auto& e : errors) {
    EXPECT_EQ(e.get(),
              "ranks 1, 4 and 5 have not joined the rendezvous in time (did they start? see "
              "their output)");
  }
}

TEST(RendezvousTest, MissingRanksAreNamedWithTheirHosts) {
  RendezvousServer server("t", 6, 0, {"a", "b", "a", "a", "b", "c"});
  auto b = make_rendezvous_bootstrap(address_of(server), "t", 0, 6, 5s);
  try {
    b->allgather("x", 300ms);
    FAIL();
  } catch (const BootstrapError& e) {
    EXPECT_STREQ(e.what(),
                 "ranks 1 and 4 (b), ranks 2 and 3 (a), rank 5 (c) have not joined the "
                 "rendezvous in time (did they start? see their output)");
  }
}

TEST(RankListTest, GroupsByHostOnlyWhenEveryHostIsKnown) {
  EXPECT_EQ(rank_list({1, 2, 3, 7}), "ranks 1-3 and 7");
  EXPECT_EQ(rank_list({4}, {"h0", "h1", "h2", "h3", "h4"}), "rank 4 (h4)");
  EXPECT_EQ(rank_list({0, 1, 3}, {"x", "y", "x", "x"}), "ranks 0 and 3 (x), rank 1 (y)");
  EXPECT_EQ(rank_list({0, 5}, {"x", "y"}), "ranks 0 and 5");  // rank 5's host unknown
}

TEST(RendezvousTest, ARankThatLeavesIsNamed) {
  RendezvousServer server("t", 2);
  auto waiting = std::async(std::launch::async, [&] {
    auto b = make_rendezvous_bootstrap(address_of(server), "t", 0, 2, 5s);
    return b->allgather("x", 10s);
  });
  {
    auto leaver = make_rendezvous_bootstrap(address_of(server), "t", 1, 2, 5s);
    std::this_thread::sleep_for(200ms);
  }  // closes its connection
  try {
    waiting.get();
    FAIL();
  } catch (const BootstrapError& e) {
    EXPECT_STREQ(e.what(), "rank 1 left the rendezvous (its process ended or lost its connection)");
  }
}

TEST(RendezvousTest, UnreachableServerSaysWhatToCheck) {
  int port;
  {
    RendezvousServer gone("t", 1);
    port = gone.port();
  }
  try {
    make_rendezvous_bootstrap("127.0.0.1:" + std::to_string(port), "t", 3, 4, 300ms);
    FAIL();
  } catch (const BootstrapError& e) {
    EXPECT_EQ(std::string(e.what()),
              "rank 3: cannot reach the rendezvous at 127.0.0.1:" + std::to_string(port) +
                  " within 0.3 s: Connection refused (is ddlrun still running, and is that "
                  "address reachable from this host?)");
  }
  EXPECT_THROW(make_rendezvous_bootstrap("nocolon", "t", 0, 1, 1s), BootstrapError);
}

TEST(MemoryBootstrapTest, ThreadsMeet) {
  auto boots = make_memory_bootstraps(3);
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> got(3);
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] { got[r] = boots[r]->allgather(std::to_string(r * r), 5s); });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < 3; ++r)
    EXPECT_EQ(got[r], (std::vector<std::string>{"0", "1", "4"}));
}

TEST(MemoryBootstrapTest, TimeoutNamesMissing) {
  auto boots = make_memory_bootstraps(3);
  try {
    boots[1]->allgather("x", 100ms);
    FAIL();
  } catch (const BootstrapError& e) {
    EXPECT_STREQ(e.what(), "ranks 0 and 2 did not join within 0.1 s");
  }
}

TEST(PmixBootstrapTest, AbsentWithoutAServer) {
  if (std::getenv("PMIX_NAMESPACE") != nullptr) GTEST_SKIP() << "running under PMIx";
  EXPECT_EQ(make_pmix_bootstrap(), nullptr);
}

}  // namespace
}  // namespace ddl::comm
