// probe_links: a link agent on every host, driven by lines, measured by measure_links.
//
// How it works:
//  1. Every host's agent starts at once, one thread per host: through LinkProbeOptions::open
//     (ddlrun's agents), or, for this host, in a thread of this process over a socket pair;
//     each a LinkChannel. Each says its
//     port; each gets the run's token.
//  2. measure_links runs the rounds; a round sends "test ADDRESS PORT" to the first host of
//     each pair, all pairs at once (a thread each), and waits for their answers. An agent whose
//     port cannot be reached (a firewall drops or refuses it: "unreachable" within a second) is
//     remembered: that pair and every later one with that host is measured from its side, the
//     second lost waiting is not charged to the time budget (so the other pairs are still
//     measured), and a note names the host, the port and what to do. A host whose agent is
//     gone (its channel failed, or says so: the launch tree found it lost) is left out of the
//     later pairs, so that they do not wait for it, and a note names it.
//  3. The agents are stopped by destroying their channels ("end", then the channel or the
//     socket pair closed).

#include "mapper/link_probe.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include "base/check.h"
#include "base/digest.h"
#include "base/fd.h"
#include "base/text.h"
#include "mapper/probe_remote.h"

namespace ddl::mapper {

namespace {

using std::chrono::milliseconds;

constexpr milliseconds kTestTimeout{10'000};  // one pair's test, answered by its agent
constexpr int kSliceMs = 50;

/// One host's agent: its channel, spoken to in lines, and where it listens.
struct Agent {
  std::unique_ptr<LinkChannel> channel;
  int port = 0;
  std::string address;
  std::string client;  ///< where its host saw ddlrun's host log in from; "-": not known

  void send(const std::string& line) { channel->send(line); }
  std::string line(milliseconds timeout) { return channel->line(timeout); }
};

/// Takes a line out of `buffer` when it holds one.
bool take_line(std::string& buffer, std::string& line) {
  const std::size_t nl = buffer.find('\n');
  if (nl == std::string::npos) return false;
  line = buffer.substr(0, nl);
  buffer.erase(0, nl + 1);
  return true;
}

/// This host's agent: run_link_agent in a thread, over a socket pair.
class LocalChannel : public LinkChannel {
 public:
  explicit LocalChannel(int port) {
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_) != 0) {
      throw LinkError("cannot make a socket pair: " + base::errno_text(errno));
    }
    thread_ = std::thread([fd = fds_[1], port] { run_link_agent(fd, fd, port); });
  }
  ~LocalChannel() override {
    ::shutdown(fds_[0], SHUT_RDWR);  // the agent reads EOF and returns
    thread_.join();
    ::close(fds_[0]);
    ::close(fds_[1]);
  }

  void send(const std::string& line) override {
    if (base::write_all(fds_[0], line + "\n") != 0) throw LinkError("the link agent ended");
  }

  std::string line(milliseconds timeout) override {
    const base::Deadline deadline(timeout);
    for (std::string line;;) {
      if (take_line(buffer_, line)) return line;
      pollfd p{fds_[0], POLLIN, 0};
      if (::poll(&p, 1, deadline.poll_ms(kSliceMs)) == 0) {
        if (deadline.passed()) throw LinkError("the link agent did not answer in time");
        continue;
      }
      char buf[4096];
      const ssize_t n = ::read(fds_[0], buf, sizeof buf);
      if (n <= 0 && errno != EINTR) throw LinkError("the link agent ended");
      if (n > 0) buffer_.append(buf, static_cast<std::size_t>(n));
    }
  }

 private:
  int fds_[2] = {-1, -1};
  std::thread thread_;
  std::string buffer_;
};

/// Starts `host`'s agent (in this process, or through LinkProbeOptions::open) and reads its
/// port.
std::unique_ptr<Agent> start_agent(const LinkHost& host, const LinkProbeOptions& o) {
  auto agent = std::make_unique<Agent>();
  if (host.local) agent->channel = std::make_unique<LocalChannel>(o.agent_port);
  if (!host.local && o.open) agent->channel = o.open(host, o.agent_port);
  if (!agent->channel) throw LinkError("no ddlrun agent runs there to start its link agent");
  const std::string hello = agent->line(o.answer_timeout);
  char client[64] = "";
  if (std::sscanf(hello.c_str(), "ddl-link-agent 2 %d %63s", &agent->port, client) != 2) {
    throw LinkError("its link agent printed '" + base::excerpt(hello) +
                    "', not a link agent's greeting; is ddlrun the same version there?");
  }
  agent->address = host.address;
  agent->client = client;
  return agent;
}

/// A random token, so that only our agents' tests are served.
std::string make_token() {
  return base::hex(base::random_bytes(32));
}

/// Runs `fn(i)` for i in 0..count-1, each in a thread of its own, and joins them.
template <typename Fn>
void in_parallel(std::size_t count, Fn fn) {
  std::vector<std::jthread> threads;
  threads.reserve(count);
  for (std::size_t i = 0; i < count; ++i)
    threads.emplace_back([&fn, i] { fn(i); });
}

/// Gives this host's agent (an empty address) the address the other hosts saw ddlrun log in
/// from, else its name.
void reach_this_host(std::vector<std::unique_ptr<Agent>>& agents,
                     const std::vector<LinkHost>& hosts) {
  std::string seen;
  for (const auto& agent : agents) {
    if (agent->client != "-" && !agent->client.empty()) seen = agent->client;
  }
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (agents[i]->address.empty()) agents[i]->address = seen.empty() ? hosts[i].name : seen;
  }
}

/// The agents of every host; throws LinkError naming each that failed.
std::vector<std::unique_ptr<Agent>> start_agents(const std::vector<LinkHost>& hosts,
                                                 const LinkProbeOptions& o) {
  std::vector<std::unique_ptr<Agent>> agents(hosts.size());
  std::vector<std::string> errors(hosts.size());
  const std::string token = make_token();
  in_parallel(hosts.size(), [&](std::size_t i) {
    try {
      agents[i] = start_agent(hosts[i], o);
      agents[i]->send("token " + token);
      if (const std::string ready = agents[i]->line(o.answer_timeout); ready != "ready") {
        throw LinkError("the link agent answered '" + ready + "' to its token");
      }
    } catch (const LinkError& e) {
      errors[i] = e.what();
    }
  });
  std::string failures;
  int failed = 0;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    if (errors[i].empty()) continue;
    ++failed;
    failures += "\n  " + hosts[i].name + ": " + errors[i];
  }
  if (failed > 0) {
    throw LinkError("cannot start the link agent on " + std::to_string(failed) + " of " +
                    std::to_string(hosts.size()) + " hosts:" + failures);
  }
  reach_this_host(agents, hosts);
  return agents;
}

/// Runs each round's tests through the agents. A host whose agent's port cannot be reached
/// is measured from its own side from then on (see the top).
class AgentTester : public LinkTester {
 public:
  AgentTester(std::vector<std::unique_ptr<Agent>>& agents, const std::vector<LinkHost>& hosts)
      : agents_(agents), hosts_(hosts), unreachable_(hosts.size()), gone_(hosts.size()) {}

  std::vector<LinkSample> measure(const LinkRound& round,
                                  std::vector<std::string>& notes) override {
    std::vector<std::optional<LinkSample>> got(round.size());
    std::vector<double> waited(round.size());
    in_parallel(round.size(), [&](std::size_t i) {
      const auto [a, b] = round[i];
      try {
        got[i] = test(a, b, waited[i]);
      } catch (const Skipped&) {  // a host whose agent is gone: named once, by add_notes
      } catch (const LinkError& e) {
        const std::lock_guard lock(mutex_);
        notes.push_back("--probe-links: " + name(a) + " -> " + name(b) + ": " + e.what());
      }
    });
    if (!waited.empty()) lost_s_ += *std::max_element(waited.begin(), waited.end());
    std::vector<LinkSample> out;
    for (const auto& sample : got) {
      if (sample) out.push_back(*sample);
    }
    return out;
  }

  /// Seconds the rounds lost waiting for ports that could not be reached.
  double lost_s() const { return lost_s_; }

  /// A note for each host whose agent could not be reached, and for each that is gone: also
  /// one found gone after its last pair (its loss reported while another pair was measured).
  void add_notes(std::vector<std::string>& notes);

 private:
  /// A pair not measured because one of its hosts' agents is gone.
  struct Skipped {};

  /// Measures the pair a < b: from a's agent, or from b's when b's port cannot be reached.
  /// `waited`: the seconds lost finding that out. Throws Skipped when either agent is gone.
  LinkSample test(int a, int b, double& waited) {
    if (gone(a) || gone(b)) throw Skipped{};
    if (!blocked(b)) {
      const auto start = std::chrono::steady_clock::now();
      const std::string reply = ask(a, b);
      if (!reply.starts_with("unreachable ")) return sample(a, b, reply);
      waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      block(b, a, reply.substr(12));
    }
    if (blocked(a)) throw LinkError("neither agent's port can be reached from the other");
    const std::string reply = ask(b, a);
    if (reply.starts_with("unreachable ")) {
      block(a, b, reply.substr(12));
      throw LinkError("neither agent's port can be reached from the other");
    }
    return sample(a, b, reply);
  }

  /// The answer of `from`'s agent to a test against `to`'s. A failure of its channel (it
  /// ended, or did not answer in time: a late answer would be taken for the next) makes it
  /// gone.
  std::string ask(int from, int to) {
    Agent& sender = *agents_[static_cast<std::size_t>(from)];
    const Agent& receiver = *agents_[static_cast<std::size_t>(to)];
    try {
      sender.send("test " + receiver.address + " " + std::to_string(receiver.port));
      return sender.line(kTestTimeout);
    } catch (const LinkError& e) {
      const std::lock_guard lock(mutex_);
      std::string& why = gone_[static_cast<std::size_t>(from)];
      if (why.empty()) why = e.what();
      throw;
    }
  }

  /// Whether `host`'s agent is gone: its channel failed, or says so (LinkChannel::gone).
  bool gone(int host) {
    const std::lock_guard lock(mutex_);
    std::string& why = gone_[static_cast<std::size_t>(host)];
    if (why.empty()) why = agents_[static_cast<std::size_t>(host)]->channel->gone();
    return !why.empty();
  }

  static LinkSample sample(int a, int b, const std::string& reply) {
    LinkSample s{a, b, 0, 0};
    if (std::sscanf(reply.c_str(), "ok %lf %lf", &s.latency_s, &s.bytes_per_s) != 2) {
      throw LinkError(reply.starts_with("error ") ? reply.substr(6)
                                                  : "answered '" + base::excerpt(reply) + "'");
    }
    return s;
  }

  bool blocked(int host) {
    const std::lock_guard lock(mutex_);
    return !unreachable_[static_cast<std::size_t>(host)].empty();
  }
  void block(int host, int from, const std::string& why) {
    const std::lock_guard lock(mutex_);
    std::string& seen = unreachable_[static_cast<std::size_t>(host)];
    if (seen.empty()) seen = "from " + name(from) + ": " + why;
  }
  const std::string& name(int host) const { return hosts_[static_cast<std::size_t>(host)].name; }

  std::vector<std::unique_ptr<Agent>>& agents_;
  const std::vector<LinkHost>& hosts_;
  std::mutex mutex_;
  std::vector<std::string> unreachable_;  ///< by host: how its port could not be reached
  std::vector<std::string> gone_;         ///< by host: why its agent is gone
  double lost_s_ = 0;
};

void AgentTester::add_notes(std::vector<std::string>& notes) {
  for (std::size_t h = 0; h < hosts_.size(); ++h)
    gone(static_cast<int>(h));
  for (std::size_t h = 0; h < hosts_.size(); ++h) {
    if (unreachable_[h].empty()) continue;
    const std::string& host = hosts_[h].name;
    const std::string port = std::to_string(agents_[h]->port);
    notes.push_back("--probe-links: " + host + ": its link agent's TCP port " + port +
                    " cannot be reached (" + unreachable_[h] + "); its links were measured from " +
                    host + " outward. Let TCP port " + port + " in through " + host +
                    "'s firewall (--probe-links-port PORT gives every agent that port), or leave "
                    "--probe-links out (--nodes gives the hosts per rack)");
  }
  for (std::size_t h = 0; h < hosts_.size(); ++h) {
    if (gone_[h].empty()) continue;
    notes.push_back("--probe-links: " + hosts_[h].name + ": " + gone_[h] +
                    "; its pairs after that were not measured");
  }
}

}  // namespace

LinkMeasurement probe_links(const std::vector<LinkHost>& hosts, const LinkProbeOptions& options,
                            std::vector<std::string>& notes) {
  std::vector<std::unique_ptr<Agent>> agents = start_agents(hosts, options);
  AgentTester tester(agents, hosts);
  const auto start = std::chrono::steady_clock::now();
  // The budget is for measuring: time lost on unreachable ports is not charged to it.
  const LinkClock clock = [start, &tester] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() -
           tester.lost_s();
  };
  LinkMeasurement m =
      measure_links(static_cast<int>(hosts.size()), tester, clock, options.budget_s, notes);
  m.seconds += tester.lost_s();
  tester.add_notes(notes);
  return m;
}

// ---------------------------------------------------------------------------------------------
// The job's cache: one line per host, then the measurement, one line per item.
//   ddl-links 1
//   host NAME ADDRESS
//   seconds S
//   rack H H ...
//   level NAME BYTES_PER_S LATENCY_S
//   pair A B BYTES_PER_S LATENCY_S

namespace {

constexpr std::string_view kCacheHeader = "ddl-links 1";

std::string hosts_lines(const std::vector<LinkHost>& hosts) {
  std::string out;
  for (const LinkHost& h : hosts)
    out += "host " + h.name + " " + h.address + "\n";
  return out;
}

/// One measurement line into `m`; false when it is none of the kinds.
bool read_cache_line(std::istringstream& in, const std::string& kind, LinkMeasurement& m) {
  if (kind == "seconds") return static_cast<bool>(in >> m.seconds);
  if (kind == "rack") {
    std::vector<int>& rack = m.racks.emplace_back();
    for (int h; in >> h;)
      rack.push_back(h);
    return !rack.empty();
  }
  if (kind == "level") {
    MeasuredLevel& l = m.levels.emplace_back();
    return static_cast<bool>(in >> l.name >> l.bytes_per_s >> l.latency_s);
  }
  LinkSample& p = m.pairs.emplace_back();
  return kind == "pair" && static_cast<bool>(in >> p.a >> p.b >> p.bytes_per_s >> p.latency_s);
}

}  // namespace

std::optional<LinkMeasurement> read_links_cache(const std::string& path,
                                                const std::vector<LinkHost>& hosts) {
  const std::optional<std::string> text = read_cache_file(path);
  const std::string head = std::string(kCacheHeader) + "\n" + hosts_lines(hosts);
  if (!text || !text->starts_with(head)) return std::nullopt;
  std::istringstream lines(text->substr(head.size()));
  LinkMeasurement m;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::string kind;
    if (!(in >> kind) || !read_cache_line(in, kind, m)) return std::nullopt;
  }
  for (const LinkSample& p : m.pairs) {
    const int n = static_cast<int>(hosts.size());
    if (p.a < 0 || p.b < 0 || p.a >= n || p.b >= n) return std::nullopt;
  }
  if (m.racks.empty()) return std::nullopt;
  return m;
}

void write_links_cache(const std::string& path, const std::vector<LinkHost>& hosts,
                       const LinkMeasurement& measured) {
  std::ostringstream out;
  out.precision(17);
  out << kCacheHeader << "\n" << hosts_lines(hosts) << "seconds " << measured.seconds << "\n";
  for (const std::vector<int>& rack : measured.racks) {
    out << "rack";
    for (int h : rack)
      out << " " << h;
    out << "\n";
  }
  for (const MeasuredLevel& l : measured.levels)
    out << "level " << l.name << " " << l.bytes_per_s << " " << l.latency_s << "\n";
  for (const LinkSample& p : measured.pairs)
    out << "pair " << p.a << " " << p.b << " " << p.bytes_per_s << " " << p.latency_s << "\n";
  write_cache_file(path, out.str());
}

}  // namespace ddl::mapper
