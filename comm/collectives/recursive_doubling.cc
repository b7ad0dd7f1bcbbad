// Recursive-doubling allreduce, for small messages.
//
// How it works. With p = 2^k members, step j (mask = 1, 2, 4, ...) pairs member i with
// i ^ mask; the two exchange their whole buffers and both combine them, so after k steps
// everyone holds the full reduction: log2(p) latencies instead of the ring's 2 (n - 1).
//
// The result must have the same bits on every member, so both partners evaluate the same
// expression: op(lower, higher), the lower-indexed partner's data on the left. The lower one
// folds the received buffer into its own; the higher one folds its own into the received
// copy and keeps that. (Sum and product are commutative in IEEE arithmetic, but min/max of
// +0/-0 or of two NaNs are not, so the order is fixed for every op.)
//
// When n is not a power of two, let p be the largest power of two below n and e = n - p.
// First the 2e lowest members pair up: member 2i sends its buffer to 2i + 1, which computes
// op(x[2i], x[2i+1]) and takes part in the doubling as virtual member i; members from 2e on
// take part as virtual members i - e. Virtual order follows real order, so "lower virtual
// member" still means a fixed left operand. At the end each 2i + 1 sends the result back to
// 2i. Every element is reduced along one fixed tree, so all members agree bitwise. kAvg sums,
// then every member divides by n (the same operation on the same bits).
//
// With a signature (signature.h) every message is a frame: a header, then the payload. The
// check runs in two phases so that the common case stays small. In the first, the header is
// 24 bytes: the payload's length and a summary that merges like signature.h's Verdict but
// holds hashes (the lowest rank heard from, the hash of its signature, and whether any
// signature heard of hashes otherwise), so a small allreduce's frame stays within a cache line
// or two. The receiver reads the header, then exactly as many payload bytes as it announces, so
// members whose counts differ stay in step; it folds the payload in only while no difference is
// known and the length is its own. The pattern carries every member's summary to every member,
// so all members end knowing whether any signature differs. Only then, and only on a
// difference, a second phase runs the same pattern without payload and with the full Verdict
// in each header (88 bytes), so that every member can name the same two ranks and their calls;
// then all members throw MismatchError. A mismatch costs one more pass of short messages.
//
// The messages live in two buffers (this member's [header | data] and the partner's): in the
// call's own frame for small messages, else per thread, grown on first use and kept; `buf` is
// copied in at the start and out at the end.

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/collectives/signature.h"

namespace ddl::comm {
namespace {

constexpr uint32_t kMagicSummary = 0x53'4c'44'44;  // "DDLS"
constexpr uint32_t kMagicVerdict = 0x56'4c'44'44;  // "DDLV"
constexpr uint64_t kDiffers = 1;                   ///< Summary flag: a signature hashes otherwise
/// A larger announced payload cannot be a collective's: the stream is out of step.
constexpr uint64_t kMaxPayload = uint64_t{1} << 40;

/// The first phase's header: a Verdict of hashes, 24 bytes (an 8-byte payload makes a 32-byte
/// frame, so that back-to-back frames never straddle a cache line).
struct SummaryHeader {
  uint32_t magic = kMagicSummary;
  int32_t first_rank = -1;   ///< the lowest rank heard from
  uint64_t flags_bytes = 0;  ///< flags << 56 | the payload's length
  uint64_t first_hash = 0;   ///< hash() of first_rank's signature
};
static_assert(sizeof(SummaryHeader) == 24);
constexpr int kFlagsShift = 56;

/// The second phase's header: the full Verdict.
struct VerdictHeader {
  uint32_t magic = kMagicVerdict;
  uint32_t reserved = 0;
  uint64_t payload_bytes = 0;
  Verdict verdict;
};

/// A 64-bit hash of a signature's bytes (five words, each mixed in by a multiply and a shift:
/// cheap, and any one differing word changes it).
uint64_t hash(const Signature& s) {
  uint64_t words[sizeof s / 8];
  std::memcpy(words, &s, sizeof s);
  uint64_t h = 0x9e3779b97f4a7c15u;
  for (uint64_t w : words) {
    h = (h ^ w) * 0xbf58476d1ce4e5b9u;
    h ^= h >> 31;
  }
  return h;
}

/// How a call's messages are framed.
enum class Framing { kNone, kSummary, kVerdict };

/// One call's messages: this member's [header | data] and room for a partner's.
class Messages {
 public:
  Messages(const Group& g, const void* buf, size_t bytes, const Signature* sig, Framing framing)
      : g_(g),
        framing_(sig != nullptr ? framing : Framing::kNone),
        bytes_(bytes),
        sent_bytes_(bytes) {
    header_bytes_ = framing_ == Framing::kSummary   ? sizeof(SummaryHeader)
                    : framing_ == Framing::kVerdict ? sizeof(VerdictHeader)
                                                    : 0;
    if (header_bytes_ + bytes <= kInlineBytes) {
      out_ = inline_out_;
      in_ = inline_in_;
    } else {
      thread_local std::vector<std::byte> out, in;
      out.resize(std::max(out.size(), header_bytes_ + bytes));
      in.resize(std::max(in.size(), header_bytes_ + bytes));
      out_ = out.data();
      in_ = in.data();
    }
    if (bytes > 0) std::memcpy(mine(), buf, bytes);
    if (sig != nullptr) {
      const int me = g.global(g.rank());
      if (framing_ == Framing::kVerdict) verdict_ = Verdict::of(me, *sig);
      first_rank_ = me;
      first_hash_ = hash(*sig);
    }
  }

  /// This member's data, reduced in place.
  std::byte* mine() { return out_ + header_bytes_; }
  /// The last payload received.
  std::byte* theirs() { return in_ + header_bytes_; }
  /// Whether this member's messages carry its payload (with framing only; by default they do).
  void send_payload(bool yes) { sent_bytes_ = yes && framing_ != Framing::kNone ? bytes_ : 0; }

  /// Sends this member's message to `to` and receives `from`'s (either may be null). True when
  /// the received payload may be used: it has this member's length and no difference is known.
  bool exchange(transport::Link* to, transport::Link* from) {
    const auto timeout = g_.timeout();
    std::span<const std::byte> send;
    if (to != nullptr) {
      write_header();
      send = {out_, header_bytes_ + sent_bytes_};
    }
    if (header_bytes_ == 0 || from == nullptr) {
      transport::exchange(to, send, from, {in_, from != nullptr ? bytes_ : 0}, timeout);
      return true;
    }
    from_ = from;
    // The header alone first: a sender's shorter frame may be followed by its next one. The
    // lambda captures one pointer, so std::function keeps it without allocating.
    transport::exchange(to, send, from, {in_, header_bytes_}, header_bytes_, timeout,
                        [this](std::span<const std::byte> got) { return frame_after(got); });
    return usable_;
  }

  /// Whether any member's signature differs (known to every member at the end of the pattern).
  bool differs() const { return framing_ == Framing::kVerdict ? verdict_.mismatch() : differs_; }
  const Verdict& verdict() const { return verdict_; }

  /// Copies the result to `buf`.
  void finish(void* buf) {
    if (bytes_ > 0) std::memcpy(buf, mine(), bytes_);
  }

 private:
  /// Reads a received header: merges what it knows, and returns where the whole frame goes.
  std::span<std::byte> frame_after(std::span<const std::byte> got) {
    uint64_t payload = 0;
    uint32_t magic = 0;
    std::memcpy(&magic, got.data(), sizeof magic);
    if (framing_ == Framing::kSummary && magic == kMagicSummary) {
      SummaryHeader h;
      std::memcpy(&h, got.data(), sizeof h);
      payload = h.flags_bytes & ((uint64_t{1} << kFlagsShift) - 1);
      // The two sides' lowest ranks' signatures differ, or one side knew of a difference.
      if (h.first_hash != first_hash_ || ((h.flags_bytes >> kFlagsShift) & kDiffers) != 0) {
        differs_ = true;
      }
      if (h.first_rank < first_rank_) {
        first_rank_ = h.first_rank;
        first_hash_ = h.first_hash;
      }
    } else if (framing_ == Framing::kVerdict && magic == kMagicVerdict) {
      VerdictHeader h;
      std::memcpy(&h, got.data(), sizeof h);
      payload = h.payload_bytes;
      verdict_.merge(h.verdict);
    } else {
      payload = kMaxPayload + 1;
    }
    if (payload > kMaxPayload) {
      throw transport::TransportError(from_->peer_name() +
                                      ": sent bytes that are not a collective's message (its "
                                      "calls are out of step with this rank's)");
    }
    usable_ = payload == bytes_ && !differs();
    if (payload == bytes_) return {in_, header_bytes_ + bytes_};
    drain_.resize(header_bytes_ + payload);
    return drain_;
  }

  void write_header() {
    if (framing_ == Framing::kSummary) {
      SummaryHeader h;
      h.first_rank = first_rank_;
      h.flags_bytes = (differs_ ? kDiffers << kFlagsShift : 0) | sent_bytes_;
      h.first_hash = first_hash_;
      std::memcpy(out_, &h, sizeof h);
    } else if (framing_ == Framing::kVerdict) {
      VerdictHeader h;
      h.payload_bytes = sent_bytes_;
      h.verdict = verdict_;
      std::memcpy(out_, &h, sizeof h);
    }
  }

  /// Small messages (the latency-bound ones) live in the object itself.
  static constexpr size_t kInlineBytes = 256;
  alignas(64) std::byte inline_out_[kInlineBytes];
  alignas(64) std::byte inline_in_[kInlineBytes];
  const Group& g_;
  Framing framing_;
  size_t header_bytes_ = 0;
  size_t bytes_;       ///< this member's payload, and the length of a usable received one
  size_t sent_bytes_;  ///< what it sends: bytes_, or 0 (a broadcast's member without the data)
  std::byte* out_;
  std::byte* in_;
  std::vector<std::byte> drain_;
  Verdict verdict_;                  ///< kVerdict
  int32_t first_rank_ = -1;          ///< kSummary: the lowest rank heard from
  uint64_t first_hash_ = 0;          ///< kSummary: its signature's hash
  bool differs_ = false;             ///< kSummary: whether any signature heard of hashes otherwise
  transport::Link* from_ = nullptr;  ///< the sender of the frame being received
  bool usable_ = false;              ///< whether its payload may be used
};

/// What a step does with a received payload.
enum class Use { kTakeResult, kFoldAsLeft, kFoldAsRight };

/// Recursive doubling's pattern over `m`: `use(how)` combines each usable payload received.
template <typename UseFn>
void pattern(const Group& g, Messages& m, UseFn&& use) {
  const int n = g.size();
  int p = 1;
  while (p * 2 <= n)
    p *= 2;
  const int extra = n - p;
  const int r = g.rank();

  // Fold: member 2i hands its data to 2i + 1 and waits for the result.
  if (r < 2 * extra) {
    if (r % 2 == 0) {
      m.exchange(&g.link(r + 1), nullptr);
      if (m.exchange(nullptr, &g.link(r + 1))) use(Use::kTakeResult);
      return;
    }
    if (m.exchange(nullptr, &g.link(r - 1))) use(Use::kFoldAsRight);  // op(x[2i], x[2i+1])
  }

  const int virt = r < 2 * extra ? r / 2 : r - extra;
  auto real = [extra](int v) { return v < extra ? 2 * v + 1 : v + extra; };
  for (int mask = 1; mask < p; mask *= 2) {
    const int partner = real(virt ^ mask);
    transport::Link& link = g.link(partner);
    if (m.exchange(&link, &link)) use(partner > r ? Use::kFoldAsLeft : Use::kFoldAsRight);
  }

  if (r < 2 * extra) m.exchange(&g.link(r - 1), nullptr);
}

/// The second phase: the full verdicts, so that every member names the same two calls.
[[noreturn]] void throw_mismatch(const Group& g, const Signature& sig) {
  Messages m(g, nullptr, 0, &sig, Framing::kVerdict);
  pattern(g, m, [](Use) {});
  DDL_CHECK(m.verdict().mismatch(), "signatures hash apart but compare equal");
  throw MismatchError(m.verdict().message());
}

}  // namespace

void recursive_doubling_allreduce(const Group& g, void* buf, size_t count, DataType type,
                                  ReduceOp op, const Signature* sig) {
  const int n = g.size();
  if (n == 1 || (count == 0 && sig == nullptr)) return;
  const size_t bytes = count * type_size(type);
  Messages m(g, buf, bytes, sig, Framing::kSummary);
  // mine = op(lower member's data, higher member's data), the same expression on both sides.
  pattern(g, m, [&](Use how) {
    switch (how) {
      case Use::kTakeResult:
        std::memcpy(m.mine(), m.theirs(), bytes);
        break;
      case Use::kFoldAsLeft:
        reduce_into(m.mine(), m.theirs(), count, type, op);
        break;
      case Use::kFoldAsRight:
        reduce_into(m.theirs(), m.mine(), count, type, op);
        std::memcpy(m.mine(), m.theirs(), bytes);
        break;
    }
  });
  if (m.differs()) throw_mismatch(g, *sig);
  m.finish(buf);
  if (op == ReduceOp::kAvg && count > 0) divide(buf, count, type, n);
}

void recursive_doubling_broadcast(const Group& g, void* buf, size_t bytes, int root,
                                  const Signature& sig) {
  if (g.size() == 1) return;
  // The same pattern: a member sends the data once it holds it (the root from the start), and
  // takes the first copy it receives; it reaches every member as every verdict does.
  bool have = g.rank() == root;
  Messages m(g, buf, bytes, &sig, Framing::kSummary);
  m.send_payload(have);
  pattern(g, m, [&](Use) {
    if (have) return;
    std::memcpy(m.mine(), m.theirs(), bytes);
    have = true;
    m.send_payload(true);
  });
  if (m.differs()) throw_mismatch(g, sig);
  m.finish(buf);
}

}  // namespace ddl::comm
