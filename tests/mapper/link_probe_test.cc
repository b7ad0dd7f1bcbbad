#include "mapper/link_probe.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "tests/lib/link_agent_thread.h"

namespace ddl::mapper {
namespace {

// The agents themselves, over real loopback TCP: agents of "this host" run in this process.

using AgentThread = ddl::testing::LinkAgentThread;

TEST(LinkAgentTest, MeasuresLoopback) {
  AgentThread a, b;
  a.greet();
  b.greet();
  a.send("token t0k3n");
  b.send("token t0k3n");
  EXPECT_EQ(a.line(), "ready");
  EXPECT_EQ(b.line(), "ready");
  a.send("test 127.0.0.1 " + std::to_string(b.port()));
  double latency = 0, bandwidth = 0;
  const std::string reply = a.line();
  ASSERT_EQ(std::sscanf(reply.c_str(), "ok %lf %lf", &latency, &bandwidth), 2) << reply;
  EXPECT_GT(latency, 0);
  EXPECT_LT(latency, 0.1);
  EXPECT_GT(bandwidth, 10e6) << "loopback moves more than 10 MB/s";
}

TEST(LinkAgentTest, AWrongTokenIsNotServed) {
  AgentThread a, b;
  a.greet();
  b.greet();
  a.send("token mine");
  b.send("token theirs");
  EXPECT_EQ(a.line(), "ready");
  EXPECT_EQ(b.line(), "ready");
  a.send("test 127.0.0.1 " + std::to_string(b.port()));
  EXPECT_TRUE(a.line().starts_with("error ")) << "b closes the connection";
}

TEST(LinkAgentTest, ErrorsAreLines) {
  AgentThread a;
  a.greet();
  a.send("hello");
  EXPECT_EQ(a.line(), "error unknown request 'hello'");
  a.send("test no.such.host.invalid 1");
  EXPECT_TRUE(a.line().starts_with("error cannot resolve no.such.host.invalid: ")) << "";
}

TEST(ProbeLinksTest, ThreeLocalHostsAreOneRack) {
  // An empty address: no other host saw where ddlrun logs in from, so the name.
  const std::vector<LinkHost> hosts = {
      {"a", "127.0.0.1", true}, {"b", "127.0.0.1", true}, {"localhost", "", true}};
  std::vector<std::string> notes;
  const LinkMeasurement m = probe_links(hosts, LinkProbeOptions{}, notes);
  EXPECT_TRUE(notes.empty()) << notes.front();
  EXPECT_EQ(m.pairs.size(), 3u);
  EXPECT_EQ(m.racks, (std::vector<std::vector<int>>{{0, 1, 2}}));
  ASSERT_EQ(m.levels.size(), 1u);
  EXPECT_EQ(m.levels[0].name, "nic");
  EXPECT_LT(m.seconds, 2.0);
}

TEST(ProbeLinksTest, AHostWhoseAgentCannotStartIsNamed) {
  const std::vector<LinkHost> hosts = {{"a", "127.0.0.1", true}, {"ghost", "ghost", false}};
  LinkProbeOptions o;
  o.answer_timeout = std::chrono::milliseconds(500);
  const auto error = [&] {
    std::vector<std::string> notes;
    try {
      probe_links(hosts, o, notes);
    } catch (const LinkError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(),
            "cannot start the link agent on 1 of 2 hosts:\n"
            "  ghost: no ddlrun agent runs there to start its link agent");
  // Through an opener that cannot reach it: its reason.
  o.open = [](const LinkHost&, int) -> std::unique_ptr<LinkChannel> {
    throw LinkError("connection refused (10.0.0.9:22)");
  };
  EXPECT_EQ(error(),
            "cannot start the link agent on 1 of 2 hosts:\n"
            "  ghost: connection refused (10.0.0.9:22)");
}

/// A scripted agent's channel: greets, answers its token, and answers every test with
/// `answer`, after which `lost` (when set) is set: the other end's agent is gone meanwhile.
class ScriptedChannel : public LinkChannel {
 public:
  ScriptedChannel(std::string answer, std::shared_ptr<std::atomic<bool>> lost,
                  std::shared_ptr<std::atomic<bool>> gone)
      : answer_(std::move(answer)), lost_(std::move(lost)), gone_(std::move(gone)) {
    lines_.push_back("ddl-link-agent 2 4000 10.9.9.1");
  }
  void send(const std::string& line) override {
    if (line.starts_with("token ")) lines_.push_back("ready");
    if (!line.starts_with("test ")) return;
    lines_.push_back(answer_);
    if (lost_) *lost_ = true;
  }
  std::string line(std::chrono::milliseconds) override {
    if (lines_.empty()) throw LinkError("the link agent did not answer in time");
    std::string l = lines_.front();
    lines_.erase(lines_.begin());
    return l;
  }
  std::string gone() override {
    return gone_ && *gone_ ? "the link agent ended: no heartbeat for 3 s" : "";
  }

 private:
  std::string answer_;
  std::vector<std::string> lines_;
  std::shared_ptr<std::atomic<bool>> lost_, gone_;
};

TEST(ProbeLinksTest, AHostLostDuringItsLastPairIsNamedAsGone) {
  // b's agent stops while a measures their only pair: a's test times out, and b's parent
  // reports b gone. b has no later pair to find that out; it is named all the same.
  auto lost = std::make_shared<std::atomic<bool>>(false);
  const std::vector<LinkHost> hosts = {{"a", "10.9.9.2", false}, {"b", "10.9.9.3", false}};
  LinkProbeOptions o;
  o.budget_s = 0.05;
  o.open = [lost](const LinkHost& host, int) -> std::unique_ptr<LinkChannel> {
    if (host.name == "a")
      return std::make_unique<ScriptedChannel>("error timed out receiving", lost, nullptr);
    return std::make_unique<ScriptedChannel>("error not asked", nullptr, lost);
  };
  std::vector<std::string> notes;
  const LinkMeasurement m = probe_links(hosts, o, notes);
  EXPECT_TRUE(m.pairs.empty());
  std::string all;
  for (const std::string& n : notes)
    all += n + "\n";
  EXPECT_NE(all.find("--probe-links: a -> b: timed out receiving\n"), std::string::npos) << all;
  EXPECT_NE(all.find("--probe-links: b: the link agent ended: no heartbeat for 3 s; its pairs "
                     "after that were not measured\n"),
            std::string::npos)
      << all;
}

TEST(LinksCacheTest, ReadsBackForTheSameHostsOnly) {
  const std::string dir = ::testing::TempDir() + "links_cache_test";
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/links.cache";
  const std::vector<LinkHost> hosts = {{"n1", "10.0.0.1", false}, {"n2", "10.0.0.2", false}};
  const LinkMeasurement m{
      0.25, {{0}, {1}}, {{"uplink", 31250000.5, 1.25e-4}}, {{0, 1, 31250000.5, 1.25e-4}}};
  write_links_cache(path, hosts, m);
  EXPECT_EQ(read_links_cache(path, hosts), m);
  EXPECT_EQ(read_links_cache(path, {{"n1", "10.0.0.1", false}, {"n2", "10.0.9.2", false}}),
            std::nullopt)
      << "another address";
  EXPECT_EQ(read_links_cache(path, {hosts[0]}), std::nullopt) << "fewer hosts";
  EXPECT_EQ(read_links_cache(dir + "/none", hosts), std::nullopt);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ddl::mapper
