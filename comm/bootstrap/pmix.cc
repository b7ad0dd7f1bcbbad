// The PMIx bootstrap: whatever PMIx server started this process (mpirun, srun --mpi=pmix,
// prterun, jsrun, ddlrun's own agents) carries the allgather.
//
// How it works: PMIx_Init gives this process's namespace and rank, and PMIx_Get of the job's
// PMIX_JOB_SIZE the size. Each allgather round r puts the value under "ddl.rv.<r>" (global
// scope), commits, fences with data collection and a timeout, then gets every rank's key.

#include <pmix.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "comm/bootstrap/bootstrap.h"

namespace ddl::comm {

namespace {

class PmixBootstrap : public Bootstrap {
 public:
  PmixBootstrap(const pmix_proc_t& me, int size) : me_(me), size_(size) {}
  ~PmixBootstrap() override { PMIx_Finalize(nullptr, 0); }
  int rank() const override { return static_cast<int>(me_.rank); }
  int size() const override { return size_; }

  std::vector<std::string> allgather(const std::string& value,
                                     std::chrono::milliseconds timeout) override {
    const std::string key = "ddl.rv." + std::to_string(round_++);
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = const_cast<char*>(value.data());
    v.data.bo.size = value.size();
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v);
    if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS) fail("cannot publish this rank's address", rc);

    pmix_info_t info[2];
    PMIX_INFO_CONSTRUCT(&info[0]);
    PMIX_INFO_CONSTRUCT(&info[1]);
    bool collect = true;
    int seconds = static_cast<int>(std::max<int64_t>(1, timeout.count() / 1000));
    PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
    rc = PMIx_Fence(nullptr, 0, info, 2);
    PMIX_INFO_DESTRUCT(&info[0]);
    PMIX_INFO_DESTRUCT(&info[1]);
    if (rc != PMIX_SUCCESS) {
      const std::vector<int> missing = missing_here(key);
      if (!missing.empty()) {
        throw BootstrapError("rank " + std::to_string(me_.rank) + ": " +
                             rank_list(missing, std::vector<std::string>(size_, host_name())) +
                             " did not reach ddl_init within " + std::to_string(seconds) +
                             " s (PMIx_Fence: " + PMIx_Error_string(rc) +
                             (missing.size() == 1 ? "; did it start? see its output)"
                                                  : "; did they start? see their output)"));
      }
      fail("the ranks did not all reach ddl_init within " + std::to_string(seconds) +
               " s (PMIx_Fence)",
           rc);
    }
    std::vector<std::string> out(size_);
    for (int r = 0; r < size_; ++r) {
      pmix_proc_t peer;
      PMIX_PROC_LOAD(&peer, me_.nspace, static_cast<pmix_rank_t>(r));
      pmix_value_t* got = nullptr;
      rc = PMIx_Get(&peer, key.c_str(), nullptr, 0, &got);
      if (rc != PMIX_SUCCESS || got == nullptr || got->type != PMIX_BYTE_OBJECT) {
        if (got != nullptr) PMIX_VALUE_RELEASE(got);
        fail("cannot get the address of rank " + std::to_string(r), rc);
      }
      out[r].assign(got->data.bo.bytes, got->data.bo.size);
      PMIX_VALUE_RELEASE(got);
    }
    return out;
  }

 private:
  /// The ranks on this node (PMIX_LOCAL_PEERS) that have not published `key`, i.e. never
  /// reached this round: this node's PMIx server holds what its clients committed, so asking
  /// it without waiting (PMIX_IMMEDIATE) tells. Ranks on other nodes cannot be told this way
  /// (their launcher names them: ddlrun's ssh launcher does).
  std::vector<int> missing_here(const std::string& key) const {
    std::vector<int> missing;
    pmix_proc_t wildcard;
    PMIX_PROC_LOAD(&wildcard, me_.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t* peers = nullptr;
    if (PMIx_Get(&wildcard, PMIX_LOCAL_PEERS, nullptr, 0, &peers) != PMIX_SUCCESS ||
        peers == nullptr || peers->type != PMIX_STRING || peers->data.string == nullptr) {
      if (peers != nullptr) PMIX_VALUE_RELEASE(peers);
      return missing;
    }
    const std::string list = peers->data.string;
    PMIX_VALUE_RELEASE(peers);
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    bool immediate = true;
    PMIX_INFO_LOAD(&info, PMIX_IMMEDIATE, &immediate, PMIX_BOOL);
    size_t at = 0;
    while (at < list.size()) {
      size_t end = list.find(',', at);
      if (end == std::string::npos) end = list.size();
      const int r = std::atoi(list.substr(at, end - at).c_str());
      at = end + 1;
      if (r == static_cast<int>(me_.rank) || r < 0 || r >= size_) continue;
      pmix_proc_t peer;
      PMIX_PROC_LOAD(&peer, me_.nspace, static_cast<pmix_rank_t>(r));
      pmix_value_t* got = nullptr;
      if (PMIx_Get(&peer, key.c_str(), &info, 1, &got) != PMIX_SUCCESS) missing.push_back(r);
      if (got != nullptr) PMIX_VALUE_RELEASE(got);
    }
    PMIX_INFO_DESTRUCT(&info);
    std::sort(missing.begin(), missing.end());
    return missing;
  }

  /// This rank's host as its launcher names it (PMIX_HOSTNAME), else gethostname().
  std::string host_name() const {
    pmix_value_t* got = nullptr;
    std::string name;
    if (PMIx_Get(&me_, PMIX_HOSTNAME, nullptr, 0, &got) == PMIX_SUCCESS && got != nullptr &&
        got->type == PMIX_STRING && got->data.string != nullptr) {
      name = got->data.string;
    }
    if (got != nullptr) PMIX_VALUE_RELEASE(got);
    if (name.empty()) {
      char buf[256] = {};
      gethostname(buf, sizeof buf - 1);
      name = buf;
    }
    return name;
  }

  [[noreturn]] void fail(const std::string& what, pmix_status_t rc) const {
    throw BootstrapError("rank " + std::to_string(me_.rank) + ": " + what + ": " +
                         PMIx_Error_string(rc));
  }
  pmix_proc_t me_;
  int size_;
  uint32_t round_ = 0;
};

}  // namespace

std::unique_ptr<Bootstrap> make_pmix_bootstrap() {
  if (std::getenv("PMIX_NAMESPACE") == nullptr && std::getenv("PMIX_SERVER_URI4") == nullptr &&
      std::getenv("PMIX_SERVER_URI3") == nullptr && std::getenv("PMIX_SERVER_URI2") == nullptr) {
    return nullptr;
  }
  pmix_proc_t me;
  if (PMIx_Init(&me, nullptr, 0) != PMIX_SUCCESS) return nullptr;
  pmix_proc_t wildcard;
  PMIX_PROC_LOAD(&wildcard, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* val = nullptr;
  int size = 0;
  if (PMIx_Get(&wildcard, PMIX_JOB_SIZE, nullptr, 0, &val) == PMIX_SUCCESS && val != nullptr) {
    if (val->type == PMIX_UINT32) size = static_cast<int>(val->data.uint32);
    PMIX_VALUE_RELEASE(val);
  }
  if (size <= 0) {
    PMIx_Finalize(nullptr, 0);
    return nullptr;
  }
  return std::make_unique<PmixBootstrap>(me, size);
}

}  // namespace ddl::comm
