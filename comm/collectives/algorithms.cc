// The registry of allreduce algorithms (see algorithms.h): the table, and the choice made from it.
//
// How it works. kAlgorithms holds one row per algorithm in the order DDL_ALGO lists them. The
// automatic choice asks the rows by rising auto_rank and takes the first whose rule holds: the
// ranks of one host in shared memory, then recursive doubling below DDL_SMALL_BYTES, then the
// multi-dimensional ring when there are two dimensions or more, else the flat ring (whose rule
// always holds). A row that DDL_ALGO names but that cannot run here (shared memory across hosts,
// the multi-dimensional ring without a topology) gives way to the row it names instead. A row's
// route, the byte its signatures carry, is its place in the table after the two routes that are
// no algorithm's.

#include "comm/collectives/algorithms.h"

#include <algorithm>
#include <array>
#include <stdexcept>
#include <vector>

#include "base/check.h"
#include "base/text.h"
#include "comm/collectives/dimension.h"
#include "comm/collectives/node.h"
#include "comm/collectives/signature.h"
#include "comm/device/device.h"
#include "comm/mode.h"

namespace ddl::comm {

namespace {

void shm_run(const AllreduceSite& site, void* buf, size_t count, DataType type, ReduceOp op,
             Signature* sig) {
  if (sig != nullptr) sig->route = route_of("shm");
  site.node->allreduce(buf, buf, count, type, op, sig);
}

void shm_run_apart(const AllreduceSite& site, const void* send, void* recv, size_t count,
                   DataType type, ReduceOp op, Signature* sig) {
  if (sig != nullptr) sig->route = route_of("shm");
  site.node->allreduce(send, recv, count, type, op, sig);
}

void ring_run(const AllreduceSite& site, void* buf, size_t count, DataType type, ReduceOp op,
              Signature* sig) {
  if (sig != nullptr) {
    sig->route = route_of("ring");
    site.verify(*sig);
  }
  if (count > 0) ring_allreduce(site.flat, buf, count, type, op);
}

void multiring_run(const AllreduceSite& site, void* buf, size_t count, DataType type, ReduceOp op,
                   Signature* sig) {
  if (sig != nullptr) {
    sig->route = route_of("multiring");
    site.verify(*sig);
  }
  if (count == 0) return;
  std::vector<int> sizes;
  for (const Dimension* d : site.dimensions)
    sizes.push_back(d->size());
  multi_dim_allreduce(site.dimensions, buf, count, type, op,
                      pipeline_chunk_bytes(site.pipeline_bytes, sizes));
}

void rd_run(const AllreduceSite& site, void* buf, size_t count, DataType type, ReduceOp op,
            Signature* sig) {
  // The signature rides on the data's own messages, unless every call is checked apart.
  if (sig != nullptr) sig->route = route_of("rd");
  if (sig != nullptr && site.verify_always) {
    site.verify(*sig);
    sig = nullptr;
  }
  recursive_doubling_allreduce(site.flat, buf, count, type, op, sig);
}

bool always(const AllreduceShape&) {
  return true;
}

constexpr AllreduceAlgorithm kAlgorithms[] = {
    {"shm", "the ranks of one host, each reducing its slice where the others' data lies", 0,
     [](const AllreduceShape& s) { return s.one_host; },
     [](const AllreduceShape& s) { return s.one_host; }, "auto", true, shm_run, shm_run_apart,
     nullptr},
    {"ring", "reduce-scatter then allgather around every rank in rank order", 3, always, always, "",
     false, ring_run, nullptr, nullptr},
    {"multiring", "the PowerAI DDL ring of each dimension of the topology, pipelined", 2,
     [](const AllreduceShape& s) { return s.dimensions >= 2; },
     [](const AllreduceShape& s) { return s.rings > 0; }, "ring", false, multiring_run, nullptr,
     device::multi_dim_allreduce},
    {"rd", "recursive doubling: log2(n) exchanges of the whole buffer, for small ones", 1,
     [](const AllreduceShape& s) { return s.bytes < s.small_bytes; }, always, "", false, rd_run,
     nullptr, nullptr},
};

/// The rows in the order the automatic choice asks them.
const std::vector<const AllreduceAlgorithm*>& by_auto_rank() {
  static const std::vector<const AllreduceAlgorithm*> rows = [] {
    std::vector<const AllreduceAlgorithm*> out;
    for (const AllreduceAlgorithm& a : kAlgorithms)
      out.push_back(&a);
    std::stable_sort(out.begin(), out.end(),
                     [](auto* a, auto* b) { return a->auto_rank < b->auto_rank; });
    return out;
  }();
  return rows;
}

/// "auto, shm, ring, multiring or rd": the words DDL_ALGO takes.
std::string choices() {
  std::string out = "auto";
  for (size_t i = 0; i < std::size(kAlgorithms); ++i) {
    out += i + 1 == std::size(kAlgorithms) ? " or " : ", ";
    out += kAlgorithms[i].name;
  }
  return out;
}

}  // namespace

std::span<const AllreduceAlgorithm> allreduce_algorithms() {
  return kAlgorithms;
}

const AllreduceAlgorithm* find_allreduce(std::string_view name) {
  if (name == "auto") return nullptr;
  std::vector<std::string_view> words{"auto"};
  for (const AllreduceAlgorithm& a : kAlgorithms) {
    if (a.name == name) return &a;
    words.push_back(a.name);
  }
  throw std::invalid_argument("$DDL_ALGO is '" + std::string(name) + "'" +
                              base::did_you_mean(name, words) + "; expected " + choices());
}

const AllreduceAlgorithm& choose_allreduce(const AllreduceAlgorithm* named,
                                           const AllreduceShape& shape) {
  if (named != nullptr && !named->usable(shape)) named = find_allreduce(named->otherwise);
  if (named != nullptr && named->usable(shape)) return *named;
  for (const AllreduceAlgorithm* a : by_auto_rank())
    if (a->automatic(shape)) return *a;
  DDL_FAIL("no allreduce algorithm's rule holds (the last row's must always)");
}

uint8_t route_of(std::string_view name) {
  for (size_t i = 0; i < std::size(kAlgorithms); ++i)
    if (kAlgorithms[i].name == name) return static_cast<uint8_t>(kRouteDevice + 1 + i);
  DDL_FAIL("no allreduce algorithm is called '" + std::string(name) + "'");
}

std::string_view route_name(uint8_t route) {
  if (route == kRouteDefault) return "default";
  if (route == kRouteDevice) return "nccl on GPU memory";
  const size_t i = route - kRouteDevice - 1u;
  return i < std::size(kAlgorithms) ? kAlgorithms[i].name : "unknown";
}

}  // namespace ddl::comm
