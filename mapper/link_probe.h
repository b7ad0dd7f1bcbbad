#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mapper/links.h"

namespace ddl::mapper {

// The side effects of --probe-links: a measuring agent on every host (run_link_agent, inside
// each host's ddlrun agent, or in this process for this host) and the LinkTester that drives
// them.
// The agents speak lines on their stdin and stdout; the measurements themselves are TCP
// between the agents, host to host, at the addresses the ranks will use.

/// The link agent, run by each host's ddlrun agent: listens on TCP port `port` (0: any free one) of
/// every address, prints "ddl-link-agent 2 PORT CLIENT" on `out_fd` (CLIENT: `client`, the
/// address ddlrun's host logged in from; when empty, the first word of $SSH_CONNECTION, "-"
/// without it), then
/// answers the lines of `in_fd`:
///   "token T"            tests against this agent must prove they know T: "ready"
///   "test ADDRESS PORT"  measures the link to the agent there: "ok LATENCY_S BYTES_PER_S",
///                        "unreachable REASON" when its port could not be connected to within
///                        a second (dropped or refused), or "error REASON"
///   "end"                the agent returns 0 (as when `in_fd` ends)
/// Between lines it serves the tests other agents run against it. Returns 0 when `in_fd`
/// ends, 1 when it cannot listen or has been idle for a minute (nothing is left running).
int run_link_agent(int in_fd, int out_fd, int port = 0, const std::string& client = {});

/// A line of ddlrun's channel to the agent, read.
struct AgentRequest {
  enum class Kind { kToken, kTest, kEnd, kUnknown };
  Kind kind = Kind::kUnknown;
  std::string token;          ///< kToken
  std::string address, port;  ///< kTest
};
AgentRequest parse_agent_request(const std::string& line);

/// The receiving side of one test, on the accepted connection `fd`: the challenge
/// "ddl-link-test 2 NONCE" (`nonce`: 32 hex digits, random for each connection) and its answer
/// (one deadline of 5 s), then the pings and the bulk transfer (8 s); any line or the end of
/// `stop_fd` (ddlrun's channel; -1: none) stops it. False when it failed or was stopped; a
/// wrong answer ends it quietly (true).
bool serve_link_test(int fd, const std::string& token, int stop_fd, const std::string& nonce);

/// The answer to the challenge with `nonce`: HMAC-SHA256(token, "ddl link test: " NONCE) in
/// hex. Proves the sender knows the run's token without sending it.
std::string link_proof(const std::string& token, const std::string& nonce);

/// The nonce of a challenge line "ddl-link-test 2 NONCE" (32 lower-case hex digits), or nullopt
/// when `line` is not one.
std::optional<std::string> parse_link_challenge(const std::string& line);

/// One host to measure.
struct LinkHost {
  std::string name;  ///< as listed, for messages and the kept sessions
  /// What the other hosts' agents connect to (its ranks' address). Empty for this host: the
  /// address the other hosts saw ddlrun log in from, else `name`.
  std::string address;
  bool local = false;  ///< this host: its agent runs in this process
};

/// ddlrun's channel to one host's link agent: the lines of run_link_agent's conversation, along
/// the frames of ddlrun's agents (launcher/ssh/tree_links.h); tests pass their own.
class LinkChannel {
 public:
  /// Ends the agent's conversation (it returns; nothing of it is left on its host).
  virtual ~LinkChannel() = default;
  /// Sends one line (the '\n' added). Throws LinkError("the link agent ended...") when it is
  /// gone.
  virtual void send(const std::string& line) = 0;
  /// The next line it prints, waiting at most `timeout`. Throws LinkError: "the link agent did
  /// not answer in time", "the link agent ended" (": why", when known).
  virtual std::string line(std::chrono::milliseconds timeout) = 0;
  /// Why the agent is known to be gone, without waiting ("the link agent ended: why"); ""
  /// while it may be there (the default: found out by send() and line()).
  virtual std::string gone() { return {}; }
};

/// Starts `host`'s link agent, listening on TCP port `port` (0: any free one), and returns the
/// channel to it, its greeting not yet read. Throws LinkError when it cannot start it.
using OpenLinkChannel = std::function<std::unique_ptr<LinkChannel>(const LinkHost& host, int port)>;

/// How to reach the hosts and how long to measure.
struct LinkProbeOptions {
  /// How long an agent may take to greet, and to answer its token.
  std::chrono::milliseconds answer_timeout{10'000};
  int agent_port = 0;     ///< the agents' TCP port (--probe-links-port); 0: any free one
  double budget_s = 1.5;  ///< for the rounds of transfers (sample_links)
  /// The remote hosts' agents (null: none; a remote host then fails, as does one it returns
  /// null for). This host's agent always runs in this process.
  OpenLinkChannel open;
};

/// Measures the links between `hosts` (job order): an agent on each, then measure_links over
/// them with the steady clock, then every agent stopped. Throws LinkError naming every host
/// whose agent could not start, and why.
LinkMeasurement probe_links(const std::vector<LinkHost>& hosts, const LinkProbeOptions& options,
                            std::vector<std::string>& notes);

/// The measurement write_links_cache left at `path` for these same hosts (names and addresses,
/// in order): nullopt when there is none, it cannot be read, or it was for other hosts.
std::optional<LinkMeasurement> read_links_cache(const std::string& path,
                                                const std::vector<LinkHost>& hosts);

/// Keeps `measured` for `hosts` at `path` (read_cache_file's rules: 0600, written atomically,
/// skipped when it cannot be written), so later ddlrun commands of the batch job skip the
/// measurement.
void write_links_cache(const std::string& path, const std::vector<LinkHost>& hosts,
                       const LinkMeasurement& measured);

}  // namespace ddl::mapper
