#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/check.h"

namespace ddl::comm {

// How ranks find each other before any transport exists: an allgather of short strings (each
// rank's transport addresses). Two ways, chosen by ddl_init():
//   pmix        under any PMIx server (mpirun, srun --mpi=pmix, prterun, jsrun): PMIx_Put,
//               Commit, Fence with data collection, Get of every rank's key;
//   rendezvous  ddlrun's own server ($DDL_RENDEZVOUS), which admits only clients that present
//               the job's token ($DDL_JOB_TOKEN).

/// The other ranks could not be reached, did not come, or said something unexpected. what()
/// names the missing ranks and the next step.
using BootstrapError = base::Error<struct BootstrapErrorTag>;

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// Every rank's `value`, indexed by rank; every rank must call it the same number of times.
  /// Throws BootstrapError naming the ranks that did not come within `timeout`.
  virtual std::vector<std::string> allgather(const std::string& value,
                                             std::chrono::milliseconds timeout) = 0;
};

/// "rank 3", "ranks 1, 4 and 5-7" (`ranks` ascending); with `hosts` (each rank's host, by rank)
/// grouped by host in the order of their first rank: "ranks 1 and 3 (node1), rank 4 (node2)".
std::string rank_list(const std::vector<int>& ranks, const std::vector<std::string>& hosts = {});

/// A client of ddlrun's rendezvous server at `address` ("host:port"), presenting `token`.
/// Connects (retrying until `timeout`), says who it is. Throws BootstrapError.
std::unique_ptr<Bootstrap> make_rendezvous_bootstrap(const std::string& address,
                                                     const std::string& token, int rank, int size,
                                                     std::chrono::milliseconds timeout);

/// The PMIx client of this process (PMIx_Init); nullptr when no PMIx server is around
/// ($PMIX_NAMESPACE unset or PMIx_Init fails). rank() and size() come from PMIx.
std::unique_ptr<Bootstrap> make_pmix_bootstrap();

/// ddlrun's side of the rendezvous: listens on `bind_address` (a numeric IPv4 or IPv6 address;
/// "", the default: every address) and port `port` (0: any free port), admits
/// connections that prove they know `token` within a few seconds (others are dropped; at most
/// 32 wait at once, read no further than the hello), and answers each allgather round once
/// all `size` ranks have sent their value. Its failures name the missing ranks, with their
/// hosts when `hosts` gives each rank's (by rank). Refused connections and too many strangers
/// are told to `report` (when given; from the server's thread), the first ten refusals quoting
/// at most a short printable prefix of what came; a refused rank's first allgather throws why. Runs
/// on its own thread until destroyed.
class RendezvousServer {
 public:
  using Report = std::function<void(const std::string&)>;
  RendezvousServer(std::string token, int size, int port = 0, std::vector<std::string> hosts = {},
                   Report report = {}, const std::string& bind_address = "");
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;
  /// The port it listens on.
  int port() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace ddl::comm
