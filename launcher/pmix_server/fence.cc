// The job's layout for PMIx, and the fence combiner (fence.h).

#include "launcher/pmix_server/fence.h"

#include <algorithm>

namespace ddl::launcher::pmix_server {

std::string JobLayout::node_list() const {
  std::string out;
  for (const Node& n : nodes)
    out += (out.empty() ? "" : ",") + n.name;
  return out;
}

std::string JobLayout::proc_list() const {
  std::string out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (i > 0) out += ";";
    for (size_t j = 0; j < nodes[i].ranks.size(); ++j)
      out += (j > 0 ? "," : "") + std::to_string(nodes[i].ranks[j]);
  }
  return out;
}

const JobLayout::Node* JobLayout::node(int host) const {
  for (const Node& n : nodes) {
    if (n.index == host) return &n;
  }
  return nullptr;
}

JobLayout make_layout(const comm::Topology& t) {
  JobLayout l;
  const int size = static_cast<int>(t.ranks.size());
  std::vector<const comm::RankPlacement*> by_rank(size, nullptr);
  for (const comm::RankPlacement& r : t.ranks) {
    if (r.rank < 0 || r.rank >= size || by_rank[r.rank] != nullptr) {
      throw comm::TopologyError("job " + t.job_id + ": rank " + std::to_string(r.rank) +
                                " is out of range or repeated (ranks must be 0.." +
                                std::to_string(size - 1) + ")");
    }
    by_rank[r.rank] = &r;
  }
  std::vector<comm::Host> hosts = t.hosts;
  std::sort(hosts.begin(), hosts.end(),
            [](const comm::Host& a, const comm::Host& b) { return a.index < b.index; });
  l.node_of.assign(size, -1);
  l.local_rank.assign(size, 0);
  for (const comm::Host& h : hosts) {
    JobLayout::Node n;
    n.index = h.index;
    n.name = h.name;
    for (int r = 0; r < size; ++r) {
      if (by_rank[r]->host == h.index) n.ranks.push_back(r);
    }
    if (n.ranks.empty()) continue;
    for (size_t i = 0; i < n.ranks.size(); ++i) {
      l.node_of[n.ranks[i]] = static_cast<int>(l.nodes.size());
      l.local_rank[n.ranks[i]] = static_cast<int>(i);
    }
    l.nodes.push_back(std::move(n));
  }
  for (int r = 0; r < size; ++r) {
    if (l.node_of[r] < 0) {
      throw comm::TopologyError("job " + t.job_id + ": rank " + std::to_string(r) + " is on host " +
                                std::to_string(by_rank[r]->host) +
                                ", which is not in the topology");
    }
  }
  return l;
}

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

FenceCombiner::FenceCombiner(JobLayout layout, std::chrono::milliseconds default_timeout)
    : layout_(std::move(layout)), default_timeout_(default_timeout) {}

std::optional<FenceResult> FenceCombiner::add(int host, Contribution c, Clock::time_point now) {
  auto it = fences_.find(c.key);
  if (it == fences_.end()) {
    Pending p;
    p.participants = c.participants;
    p.started = now;
    if (p.participants.empty()) {
      for (const JobLayout::Node& n : layout_.nodes)
        p.expected.insert(n.index);
    } else {
      for (int r : p.participants) {
        if (r >= 0 && r < layout_.size())
          p.expected.insert(layout_.nodes[layout_.node_of[r]].index);
      }
    }
    it = fences_.emplace(c.key, std::move(p)).first;
  }
  Pending& p = it->second;
  p.timeout_s = std::max(p.timeout_s, c.timeout_s);
  if (p.expected.count(host) == 0 || p.data.count(host) != 0) return std::nullopt;
  p.data[host] = std::move(c.data);
  if (p.data.size() < p.expected.size()) return std::nullopt;
  FenceResult done;
  done.key = it->first;
  for (auto& [h, bytes] : p.data) {
    done.hosts.push_back(h);
    done.data += bytes;
  }
  fences_.erase(it);
  return done;
}

std::vector<FenceResult> FenceCombiner::expire(Clock::time_point now) {
  std::vector<FenceResult> out;
  for (auto it = fences_.begin(); it != fences_.end();) {
    const Pending& p = it->second;
    const std::chrono::milliseconds limit =
        p.timeout_s > 0 ? std::chrono::milliseconds(p.timeout_s * 1000L) : default_timeout_;
    if (limit.count() <= 0 || now < p.started + limit) {
      ++it;
      continue;
    }
    FenceResult r;
    r.key = it->first;
    r.status = kStatusTimeout;
    for (const auto& [h, bytes] : p.data)
      r.hosts.push_back(h);
    std::string missing;
    for (int h : p.expected) {
      if (p.data.count(h) != 0) continue;
      const JobLayout::Node* n = layout_.node(h);
      if (n == nullptr) continue;
      std::vector<int> ranks;
      for (int rank : n->ranks) {
        if (p.participants.empty() ||
            std::binary_search(p.participants.begin(), p.participants.end(), rank)) {
          ranks.push_back(rank);
        }
      }
      missing += std::string(missing.empty() ? "" : ", ") +
                 (ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges(ranks) + " (" + n->name +
                 ")";
    }
    const std::string who = p.participants.empty()
                                ? "all " + std::to_string(layout_.size()) + " ranks"
                                : "ranks " + rank_ranges(p.participants);
    const long seconds = std::chrono::duration_cast<std::chrono::seconds>(limit).count();
    r.error = "a PMIx fence of " + who + " timed out after " + std::to_string(seconds) +
              " s waiting for " + missing +
              ": it never entered the fence (is it stuck, or does it skip the call?)";
    out.push_back(std::move(r));
    it = fences_.erase(it);
  }
  return out;
}

}  // namespace ddl::launcher::pmix_server
