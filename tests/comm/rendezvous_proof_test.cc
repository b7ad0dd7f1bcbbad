// The ranks' rendezvous hello proves the job's token by challenge and response: a
// recording proxy between the ranks and ddlrun's server sees the protocol but never the token.

#include <gtest/gtest.h>

#include <future>

#include "comm/bootstrap/bootstrap.h"
#include "tests/lib/tcp_recorder.h"

namespace ddl::comm {
namespace {

using namespace std::chrono_literals;

TEST(RendezvousProofTest, TheTokenNeverCrossesTheWire) {
  const std::string token = "ranks-token-4b1d9e0c7a";
  RendezvousServer server(token, 2);
  testing::TcpRecorder link(server.port());
  const std::string address = "127.0.0.1:" + std::to_string(link.port());
  std::vector<std::future<std::vector<std::string>>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      return make_rendezvous_bootstrap(address, token, r, 2, 5s)->allgather("v", 5s);
    }));
  }
  for (auto& f : ranks)
    EXPECT_EQ(f.get(), (std::vector<std::string>{"v", "v"}));
  const std::string seen = link.bytes();
  EXPECT_NE(seen.find("DDLRV2"), std::string::npos) << "the recorder saw nothing";
  EXPECT_EQ(seen.find(token), std::string::npos);
}

}  // namespace
}  // namespace ddl::comm
