// Collective signatures: every call compared across the ranks before its data moves.
//
// How it works. Each collective call of a communicator gets a Signature: its kind, element
// count, type, reduction, root, route, and its number in the communicator's sequence of calls.
// Every member starts a verdict over itself (Verdict::of) and the first messages of the call
// carry each sender's verdict in a small header (recursive_doubling.cc: hashed in the first
// pass, in full in a second pass that runs only when the hashes differ): a receiver merges the
// sender's verdict into its own. Recursive doubling's pattern, with the fold of a non-power
// of two and the result sent back, carries every member's verdict to every member, so all end
// with the verdict over the whole group and either all go on or all throw MismatchError with
// the same text. For small allreduces the headers ride on the data messages themselves
// (recursive doubling is also the algorithm), so checking adds no message; other collectives
// first run the same pattern with empty payloads (check_signatures), log2(n) short exchanges.
//
// A verdict is the lowest rank heard from with its call and the lowest rank whose call differs
// from that one. Merging two verdicts keeps the lower first rank; the other rank is the lower of
// the two sides' candidates, where the second side's candidate is its own first rank when its
// call differs from the kept call (it is the lowest rank of its side), else its own other rank.
// So the result depends only on the union of the ranks heard from, whatever the order or
// overlap of the merges, and names the same two ranks on every member.

#include "comm/collectives/signature.h"

#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <optional>
#include <utility>

#include "base/table.h"
#include "comm/collectives/algorithms.h"

namespace ddl::comm {

namespace {

/// What the checks know of each collective: its name, and whether it reduces (so that its op
/// must match).
struct KindInfo {
  std::string_view name;
  bool reduces;
};

constexpr std::pair<CollectiveKind, KindInfo> kKinds[] = {
    {CollectiveKind::kAllreduce, {"allreduce", true}},
    {CollectiveKind::kAllreduceN, {"allreduce_n", true}},
    {CollectiveKind::kBroadcast, {"broadcast", false}},
    {CollectiveKind::kAllgather, {"allgather", false}},
    {CollectiveKind::kReduceScatter, {"reduce_scatter", true}},
    {CollectiveKind::kBarrier, {"barrier", false}},
    {CollectiveKind::kAlltoall, {"alltoall", false}},
    {CollectiveKind::kAlltoallv, {"alltoallv", false}}};

std::string_view kind_name(CollectiveKind k) {
  const std::optional<KindInfo> info = base::lookup(kKinds, k);
  return info ? info->name : "unknown collective";
}

bool reduces(CollectiveKind k) {
  const std::optional<KindInfo> info = base::lookup(kKinds, k);
  return info && info->reduces;
}

}  // namespace

namespace {

/// What describe() puts between the parentheses, before the route.
std::string arguments(const Signature& s) {
  switch (s.kind) {
    case CollectiveKind::kBarrier:
      return "";
    case CollectiveKind::kAlltoallv: {
      std::string out(to_string(static_cast<DataType>(s.type)));
      if (s.root >= 0) {
        out += ", expecting " + std::to_string(s.count) + " elements from rank " +
               std::to_string(s.root) + ", which sends " + std::to_string(s.layout);
      }
      return out;
    }
    default:
      break;
  }
  std::string out = "count=" + std::to_string(s.count);
  if (s.kind == CollectiveKind::kAllreduceN) {
    out += " in " + std::to_string(s.buffers) + (s.buffers == 1 ? " buffer" : " buffers");
  }
  out += ", ";
  out += to_string(static_cast<DataType>(s.type));
  if (reduces(s.kind)) {
    out += ", ";
    out += to_string(static_cast<ReduceOp>(s.op));
  }
  if (s.kind == CollectiveKind::kBroadcast) out += ", root=" + std::to_string(s.root);
  return out;
}

}  // namespace

std::string describe(const Signature& s, bool detailed) {
  std::string out(kind_name(s.kind));
  out += "(" + arguments(s);
  if (detailed) {
    if (out.back() != '(') out += ", ";
    out += "algorithm=";
    out += route_name(s.route);
    if (s.kind == CollectiveKind::kAllreduceN) {
      char hash[32];
      std::snprintf(hash, sizeof hash, ", layout=%016" PRIx64, s.layout);
      out += hash;
    }
  }
  out += ") #" + std::to_string(s.seq);
  if (s.group != 0) {
    char id[32];
    std::snprintf(id, sizeof id, " in group %08" PRIx32, s.group);
    out += id;
  }
  return out;
}

Signature make_signature(uint64_t seq, CollectiveKind kind, size_t count, DataType type,
                         ReduceOp op, int root) {
  Signature s;
  s.seq = seq;
  s.kind = kind;
  s.count = count;
  s.type = static_cast<uint8_t>(type);
  s.op = static_cast<uint8_t>(op);
  s.root = root;
  return s;
}

Verdict Verdict::of(int rank, const Signature& s) {
  Verdict v;
  v.first_rank = rank;
  v.first = s;
  return v;
}

void Verdict::merge(const Verdict& v) {
  if (v.first_rank < 0) return;
  if (other_rank < 0 && v.other_rank < 0 && first == v.first) {
    // Every call the same so far (the common case): only the lowest rank changes.
    if (first_rank < 0 || v.first_rank < first_rank) first_rank = v.first_rank;
    return;
  }
  Verdict low = *this, high = v;
  if (first_rank < 0 || v.first_rank < first_rank) std::swap(low, high);
  // high's lowest rank differing from low's call: its first rank if that call differs, else
  // its own other rank (which differs from its first call, equal to low's).
  int32_t cand_rank = high.other_rank;
  Signature cand = high.other;
  if (!(high.first == low.first)) {
    cand_rank = high.first_rank;
    cand = high.first;
  }
  *this = low;
  if (cand_rank >= 0 && (other_rank < 0 || cand_rank < other_rank)) {
    other_rank = cand_rank;
    other = cand;
  }
}

std::string Verdict::message() const {
  bool detailed = describe(first) == describe(other);
  return "collective mismatch: rank " + std::to_string(first_rank) + " called " +
         describe(first, detailed) + " but rank " + std::to_string(other_rank) + " called " +
         describe(other, detailed) +
         " (every rank must make the same calls in the same order; this communicator now "
         "fails every call)";
}

void check_signatures(const Group& g, const Signature& mine) {
  recursive_doubling_allreduce(g, nullptr, 0, DataType::kUint8, ReduceOp::kSum, &mine);
}

}  // namespace ddl::comm
