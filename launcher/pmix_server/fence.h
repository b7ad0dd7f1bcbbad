#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "comm/comm.h"

namespace ddl::launcher::pmix_server {

// The parts of ddlrun's PMIx service that need no PMIx library: where each rank is (what the
// server registers), and the fence combiner that joins the hosts' contributions.

/// The job as PMIx describes it: hosts in host-index order (only those with ranks), and for
/// each rank its host and local rank (its position among its host's ranks, by rank).
struct JobLayout {
  struct Node {
    int index = 0;           ///< comm::Host::index
    std::string name;        ///< the host's name, as ranks see it in PMIX_HOSTNAME
    std::vector<int> ranks;  ///< its ranks, ascending
  };
  std::vector<Node> nodes;
  std::vector<int> node_of;     ///< by rank: position in `nodes`
  std::vector<int> local_rank;  ///< by rank
  int size() const { return static_cast<int>(node_of.size()); }
  /// "a,b,c": the node names in order (PMIx_generate_regex's input).
  std::string node_list() const;
  /// "0,1;2,3;4,5": each node's ranks (PMIx_generate_ppn's input).
  std::string proc_list() const;
  /// The node holding host index `host`, or nullptr.
  const Node* node(int host) const;
};

/// The layout of `topology`. Throws comm::TopologyError when its ranks are not 0..N-1.
JobLayout make_layout(const comm::Topology& topology);

/// "0-2,5,7-8": ranks (ascending) as compact ranges.
std::string rank_ranges(const std::vector<int>& ranks);

/// What one host's PMIx server hands up when every one of its ranks taking part in a fence
/// has entered it.
struct Contribution {
  /// Identifies the fence across hosts: the participants ("*" for the whole namespace, else
  /// "0,2,5") and how many fences with those participants this host has seen before ("*#0").
  std::string key;
  std::vector<int> participants;  ///< ascending; empty: every rank of the job
  int timeout_s = 0;              ///< PMIX_TIMEOUT of the fence; 0: none
  std::string data;               ///< the host's collected data (empty when not collecting)
};

/// A fence that is over, for every host in `hosts`.
struct FenceResult {
  std::string key;
  std::vector<int> hosts;  ///< the hosts (comm::Host::index) to tell
  int status = 0;          ///< 0 (PMIX_SUCCESS), or the PMIx status the ranks get
  std::string data;        ///< every host's contribution, in host order (status 0)
  std::string error;       ///< why it failed (status != 0): one line for ddlrun to print
};

/// Joins the contributions of the hosts to each fence.
///
/// How it works: a fence's participants decide which hosts must contribute (those holding a
/// participant). Contributions are kept by key until the last expected host's arrives; the
/// result carries their data concatenated in host order (PMIx's fence blob is a sequence of
/// per-server packs, so concatenating them is the allgather). The first contribution starts
/// the fence's clock: when the largest PMIX_TIMEOUT any host passed (or `default_timeout` when
/// none did) is over and hosts are still missing, expire() fails the fence for the hosts that
/// did contribute, naming the ranks of those that did not. Which of a missing host's ranks
/// entered cannot be told (a PMIx server reports a fence once all its local ranks are in), so
/// the message names the host's participating ranks.
class FenceCombiner {
 public:
  using Clock = std::chrono::steady_clock;
  /// `default_timeout`: for fences that carry no PMIX_TIMEOUT; zero: they wait forever.
  explicit FenceCombiner(JobLayout layout,
                         std::chrono::milliseconds default_timeout = std::chrono::milliseconds(0));
  /// Host `host`'s contribution; the result when it completes the fence. A second
  /// contribution from the same host to the same fence is ignored.
  std::optional<FenceResult> add(int host, Contribution contribution, Clock::time_point now);
  /// The fences whose time is up at `now`, failed (status PMIX_ERR_TIMEOUT); they are removed.
  std::vector<FenceResult> expire(Clock::time_point now);
  /// How many fences wait for contributions.
  size_t pending() const { return fences_.size(); }

 private:
  struct Pending {
    std::vector<int> participants;
    std::set<int> expected;           ///< host indices
    std::map<int, std::string> data;  ///< by host index: what it sent
    Clock::time_point started;
    int timeout_s = 0;
  };
  JobLayout layout_;
  std::chrono::milliseconds default_timeout_;
  std::map<std::string, Pending> fences_;
};

/// PMIX_ERR_TIMEOUT's value (pmix_common.h), for code that does not include PMIx.
inline constexpr int kStatusTimeout = -24;

}  // namespace ddl::launcher::pmix_server
