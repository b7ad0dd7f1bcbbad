// Collectives among the ranks of one host, read directly from shared memory.
//
// How it works. The members share one segment (node_segment.h): per member its control lines
// (for each step parity a post line holding the `posted` counter, the call's signature and a
// tiny allreduce's input; then the other counters and a futex word) and two slots that every
// other member reads. A collective is a sweep of steps; step j handles piece j (`piece` elements)
// of every member's slice of the buffer (partition(count, n) for allreduce), so a step's data stays
// in cache from the copy in to the copy out. In step j member r:
//
//   1. waits until every member has finished reading step j - 2 (its `done`): the slot this
//      step uses (j % 2) is free again, so a fast member runs at most a step ahead;
//   2. copies into its slot the pieces the others need: for a reduction the piece of each
//      other member's slice (at that member's place in the slot), for a gather its own piece;
//      stores its signature when the call has one, and publishes `posted`;
//   3. waits for every member's `posted`; in a call's first step it then compares everyone's
//      signature (all members read the same n signatures, so all reach the same verdict and
//      all throw the same MismatchError before any data is used);
//   4. allreduce: copies out the others' reduced pieces of step j - 1 (each member published
//      them before its `posted` of step j, so no wait is needed) and publishes `done` for
//      j - 1; then reduces the piece of its own slice from every member in rank order 0..n-1
//      (its own input read where it lies, the others' from their slots), a block at a time:
//      members 0 and 1 in one pass (reduce_of), any further ones after them (reduce_into
//      into an accumulator in L1, the last reduce_of), the last pass writing straight into
//      the output (whether or not the call is in place; its block then lies in L1); kAvg
//      divides once; the block is copied into its own place in its slot, then `reduced`.
//      Streamed output (below) is reduced into the accumulator and copied out instead.
//      After the last step one more wait for `reduced` collects the last pieces.
//   5. reduce-scatter reduces without the copy back; allgather and broadcast copy the others'
//      pieces straight after step 3; each then publishes `done`.
//
// Output that outgrows the cache (stream_bytes: the members' inputs and outputs, 2nS, larger
// than the last-level cache) is written with streaming stores (node_copy.h): no read for
// ownership of each output line, and the slots stay in the cache; an sfence ends the call. A
// member copies the others' pieces out starting with the next member (r + 1, r + 2, ...), so
// the members do not all read the same slot at once. Nothing waits after the last copy out:
// the next call's steps use the other slot first, and its step j waits for `done` of j - 2.
//
// The slots are one core's L2 cache by default (auto_chunk_bytes): each step is a wait for
// every member, so the fewer the better, as long as a step's slot stays in its writer's cache
// while the others read it (measured on 2 ranks at 1-4 MiB, on a loaded machine: 256 KiB
// slots 10-35% slower than 1 MiB ones, 2 MiB ones slower again at 4 MiB).
//
// Each element is reduced by one member in one fixed order, so results are bitwise identical
// on every member and independent of timing. Allreduces of at most small_bytes take one step
// instead: every member copies its whole input into its slot and reduces all n inputs
// itself, in rank order (the same bits everywhere, one wait); an input of at most 16 bytes goes
// into the post line instead of the slot, so that a peer's wait for `posted`, its signature
// check and its read of the input touch one cache line. A barrier is a step without
// data. Traffic per member for an allreduce of S bytes: (n-1)/n S copied in, S read and S/n
// written by the reduction (and S/n into the slot), (n-1)/n S copied out; one wait per step.
// Of that, only the input (S read) and the output (S written) need reach memory: the slots
// stay in the cache, so a large allreduce can approach one memcpy of S per member.
//
// Waiting spins a while when the host has a core for every member (a few microseconds'
// latency), hardly at all when the members outnumber the cores; then yields the core for up to
// 0.5 ms (handing it to a member that can use it at once), then sleeps on the awaited
// member's `wake` word with a futex (the segment is shared, so the futex is too); publishing
// bumps `wake` and wakes the sleepers. Every 20 ms a wait checks that the awaited member is still
// there (its process, through a pidfd, and its `closed` flag) and that DDL_TIMEOUT has not passed,
// and throws TransportError naming it otherwise.

#include "comm/collectives/node.h"

#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "comm/collectives/node_copy.h"
#include "comm/collectives/node_segment.h"
#include "comm/collectives/node_sweep.h"
#include "comm/transport/link.h"
#include "comm/transport/os.h"

namespace ddl::comm {

namespace {

using transport::open_pidfd;
using transport::safe_job;
using transport::seconds_text;

using Clock = std::chrono::steady_clock;
using transport::TransportError;
constexpr size_t kBlockBytes = 16 * 1024;  // the reduction's accumulator, kept in L1
// A block of 2 members reduced straight into the output, then copied into the slot from L1
// (still in L1, the smallest L1 being 32 KiB). Measured taking turns call by call with 16 KiB
// blocks: on 2 ranks 2-7% faster at 64 KiB-4 MiB in the loaded machine's slow mode, level to
// 4% faster in its fast one (64 and 128 KiB went either way, a whole piece a block 5% slower);
// on 4 ranks, where the accumulator takes the first members' sums, 6-8% slower at 256 KiB and
// 1 MiB, so 3 members and more keep kBlockBytes.
constexpr size_t kDirectBlockBytes = 32 * 1024;
constexpr auto kCheckEvery = std::chrono::milliseconds(20);
constexpr auto kSleepAtMost = std::chrono::milliseconds(5);
constexpr auto kYieldFor = std::chrono::microseconds(500);

void futex_wait(std::atomic<uint32_t>& word, uint32_t seen, std::chrono::nanoseconds at_most) {
  timespec ts{static_cast<time_t>(at_most.count() / 1'000'000'000),
              static_cast<long>(at_most.count() % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr,
          0);
}

/// This host's cores (not this process's affinity: a launcher binds each rank to its own).
int host_cores() {
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Reads one value of cpu0's cache `index` from sysfs into `out` ("32768K" as text); false
/// when it is missing.
bool cache_field(int index, const char* field, std::string& out) {
  const std::string path =
      "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/" + field;
  FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return false;
  char buf[64] = "";
  const bool got = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  out = buf;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
    out.pop_back();
  return got;
}

/// The bytes of cpu0's unified or data cache of `level` as sysfs gives them, or 0.
size_t cache_bytes(int level) {
  std::string v;
  for (int i = 0; i < 8 && cache_field(i, "level", v); ++i) {
    if (v != std::to_string(level)) continue;
    if (!cache_field(i, "type", v) || v == "Instruction" || !cache_field(i, "size", v)) continue;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    return static_cast<size_t>(n) * (*end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : 1);
  }
  return 0;
}

/// Whether [a, a + bytes) and [b, b + bytes) share a byte.
bool overlaps(const std::byte* a, const std::byte* b, size_t bytes) {
  return a < b + bytes && b < a + bytes;
}

size_t round_up(size_t v, size_t to) {
  return (v + to - 1) / to * to;
}

}  // namespace

size_t auto_chunk_bytes() {
  static const size_t l2 = cache_bytes(2);
  return l2 > 0 ? std::clamp<size_t>(l2, 256 * 1024, 4 << 20) : 256 * 1024;
}

size_t auto_stream_bytes(int members) {
  static const size_t cache = [] {
    const size_t c = cache_bytes(3);
    return c > 0 ? c : size_t{32} << 20;
  }();
  return cache / (2 * static_cast<size_t>(std::max(members, 1))) + 1;
}

NodeGroup::NodeGroup(std::vector<NodeMember> members, int self, NodeOptions options)
    : members_(std::move(members)), self_(self), options_(std::move(options)) {
  const auto n = static_cast<uint32_t>(members_.size());
  name_ = "/ddl-" + safe_job(options_.job) + "-node-" + std::to_string(members_[0].pid) + "-" +
          std::to_string(members_[0].rank);
  if (options_.chunk_bytes == NodeOptions::kChunkAuto) options_.chunk_bytes = auto_chunk_bytes();
  const size_t slot_bytes = round_up(
      std::max({options_.chunk_bytes, options_.small_bytes, size_t{n} * 64}), size_t{4096});
  const auto small = static_cast<uint32_t>(std::min(options_.small_bytes, slot_bytes));
  node::Segment* s = self_ == 0
                         ? node::create_segment(name_, n, slot_bytes, small, options_.cma_bytes)
                         : node::attach_segment(name_, members_[0].name, options_.timeout);
  segment_ = s;
  segment_bytes_ = node::segment_bytes(s->members, s->slot_bytes);
  if (s->members != n) {
    throw TransportError(members_[0].name + ": its shared-memory segment is for " +
                         std::to_string(s->members) + " ranks on this host, this rank counts " +
                         std::to_string(n) + " (were the ranks started by different plans?)");
  }
  cma_probe_ = node::kReady;
  node::control(s, self_).probe_addr = reinterpret_cast<uintptr_t>(&cma_probe_);
  node::control(s, self_).probe_fd = make_probe_fd();  // before pid: the others' probe reads it
  node::control(s, self_).pid.store(members_[self_].pid, std::memory_order_release);
  if (s->attached.fetch_add(1, std::memory_order_acq_rel) + 1 == n) {
    shm_unlink(name_.c_str());  // everyone holds it: no name left behind
    name_.clear();
  }
  for (const NodeMember& m : members_)
    pidfds_.push_back(m.pid != getpid() ? open_pidfd(m.pid) : -1);
  spin_limit_ = static_cast<int>(n) <= host_cores() ? 4000 : 16;
  if (options_.stream_bytes == NodeOptions::kStreamAuto) {
    options_.stream_bytes = auto_stream_bytes(static_cast<int>(n));
  }
  await_attached();
  probe_cma();
  probe_share();
  scratch_.resize(std::max(kBlockBytes, kDirectBlockBytes));  // reduce_block's accumulator
  done_seen_.assign(n, 0);
}

NodeGroup::~NodeGroup() {
  release();
}

void NodeGroup::await_attached() {
  // No member may leave (and so unlink the name or unmap) before every member has mapped it.
  const auto since = Clock::now();
  while (segment_->attached.load(std::memory_order_acquire) < segment_->members) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    for (int m = 0; m < size(); ++m) {
      if (node::control(segment_, m).pid.load(std::memory_order_acquire) != 0) continue;
      std::string why;
      if (exited(m)) {
        why = "the process has exited";
      } else if (Clock::now() - since >= options_.timeout) {
        why = "did not join within " + seconds_text(options_.timeout);
      } else {
        continue;
      }
      release();
      throw TransportError(members_[m].name + ": " + why +
                           " (before it joined this host's shared-memory group)");
    }
  }
}

void NodeGroup::release() {
  if (segment_ == nullptr) return;
  node::Control& mine = node::control(segment_, self_);
  if (mine.probe_fd >= 0) close(mine.probe_fd);
  mine.probe_fd = -1;
  mine.closed.store(1, std::memory_order_release);
  if (self_ == 0 && !name_.empty() &&
      segment_->attached.load(std::memory_order_acquire) < segment_->members) {
    shm_unlink(name_.c_str());
  }
  munmap(segment_, segment_bytes_);
  segment_ = nullptr;
  for (int fd : pidfds_)
    if (fd >= 0) close(fd);
  pidfds_.clear();
}

std::byte* NodeGroup::slot(int member, uint64_t step) const {
  return node::slot(segment_, member, step);
}

void NodeGroup::publish(Field f, uint64_t value) {
  node::Control& c = node::control(segment_, self_);
  // seq_cst store, then load: either a waiter's re-check (after it counted itself among the
  // sleepers) sees the new value, or this sees the sleeper and changes `wake` under it.
  (f == kPosted ? c.post[value % 2].posted : f == kReduced ? c.reduced : c.done).store(value);
  if (c.sleepers.load() != 0) {
    c.wake.fetch_add(1);
    futex_wake_all(c.wake);
  }
}

bool NodeGroup::exited(int m) const {
  if (pidfds_[m] >= 0) {
    pollfd p{pidfds_[m], POLLIN, 0};
    return ::poll(&p, 1, 0) > 0;
  }
  const int pid = members_[m].pid;
  return pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH;
}

void NodeGroup::check_member(int m, Clock::time_point since) {
  const NodeMember& who = members_[m];
  if (node::control(segment_, m).closed.load(std::memory_order_acquire) != 0) {
    throw TransportError(who.name + ": it left the collective (its communicator was closed)");
  }
  if (exited(m)) throw TransportError(who.name + ": the process has exited");
  if (Clock::now() - since >= options_.timeout) {
    throw TransportError(who.name + ": no progress for " + seconds_text(options_.timeout));
  }
}

namespace {
/// Field `f` of member c for `step` (posted: the post of its parity).
std::atomic<uint64_t>& field_of(node::Control& c, int f, uint64_t step) {
  return f == 0 ? c.post[step % 2].posted : f == 1 ? c.reduced : c.done;
}
}  // namespace

void NodeGroup::wait_until(int m, const std::atomic<uint64_t>& counter, uint64_t value) {
  for (unsigned spins = 0; spins < spin_limit_; ++spins) {
    if (counter.load(std::memory_order_acquire) >= value) return;
    cpu_relax();
  }
  node::Control& c = node::control(segment_, m);
  const auto since = Clock::now();
  auto next_check = since + kCheckEvery;
  // Yielding hands the core to a runnable member at once; a futex wake-up costs tens of us.
  while (Clock::now() - since < kYieldFor) {
    if (counter.load(std::memory_order_acquire) >= value) return;
    sched_yield();
  }
  for (;;) {
    const uint32_t seen = c.wake.load();
    if (counter.load() >= value) return;
    c.sleepers.fetch_add(1);
    if (counter.load() < value) futex_wait(c.wake, seen, kSleepAtMost);
    c.sleepers.fetch_sub(1);
    if (counter.load(std::memory_order_acquire) >= value) return;
    const auto now = Clock::now();
    if (now >= next_check) {
      check_member(m, since);
      next_check = now + kCheckEvery;
    }
  }
}

void NodeGroup::begin_step(const Signature* sig) {
  ++step_;
  // The slot of step_ - 2 is free once everyone has finished that step. A member's `done`
  // seen earlier may already say so: then its line is not fetched again. So does every post of
  // step_ - 1 when that was a one-wait step: a member reads an earlier step's slots after its
  // next post only inside a sweep (the pipelined gather), never across a one-wait step. Then
  // no `done` line is fetched at all (small allreduces back to back: one line less per call).
  const bool after_one_wait = posts_seen_step_ + 1 == step_;
  for (int m = 0; step_ > 2 && !after_one_wait && m < size(); ++m) {
    if (m == self_ || done_seen_[m] >= step_ - 2) continue;
    const std::atomic<uint64_t>& done = node::control(segment_, m).done;
    wait_until(m, done, step_ - 2);
    done_seen_[m] = done.load(std::memory_order_acquire);
  }
  if (sig != nullptr) node::control(segment_, self_).post[step_ % 2].sig = *sig;
}

void NodeGroup::await_all(Field f, const Signature* sig) {
  for (int m = 0; m < size(); ++m)
    if (m != self_) wait_until(m, field_of(node::control(segment_, m), f, step_), step_);
  if (sig != nullptr) check_signatures(*sig);
}

void NodeGroup::check_signatures(const Signature& mine) const {
  // The common case first: every member's bytes equal this one's (no verdicts to build).
  bool same = true;
  for (int m = 0; same && m < size(); ++m)
    same = m == self_ ||
           std::memcmp(&node::control(segment_, m).post[step_ % 2].sig, &mine, sizeof mine) == 0;
  if (same) return;
  Verdict v = Verdict::of(members_[self_].rank, mine);
  for (int m = 0; m < size(); ++m) {
    if (m == self_) continue;
    v.merge(Verdict::of(members_[m].rank, node::control(segment_, m).post[step_ % 2].sig));
  }
  if (v.mismatch()) throw MismatchError(v.message());
}

void NodeGroup::sig_only(const Signature* sig) {
  begin_step(sig);
  publish(kPosted, step_);
  await_all(kPosted, sig);
  posts_seen_step_ = step_;
  publish(kDone, step_);
}

void NodeGroup::run(const Sweep& s) {
  const size_t steps = s.steps();
  if (steps == 0) {
    if (s.sig != nullptr) sig_only(s.sig);
    return;
  }
  direct_any_ = false;
  for (size_t j = 0; j < steps; ++j)
    if (step(s, j)) return;
  if (s.reduce && s.gather) {
    // The last step's reduced pieces, which no later step collects.
    await_all(kReduced, nullptr);
    gather_piece(s, steps - 1, step_);
    publish(kDone, step_);
  }
  if (s.stream) node::stream_fence();  // the output is all there before the caller has it
}

bool NodeGroup::step(const Sweep& s, size_t j) {
  begin_step(j == 0 ? s.sig : nullptr);
  if (j == 0 && s.share) {
    node::Control& c = node::control(segment_, self_);
    if (s.mine != nullptr) c.shared = *s.mine;
    c.share.store(s.mine != nullptr ? static_cast<uint32_t>(step_) : 0, std::memory_order_relaxed);
  }
  if (s.mine == nullptr) copy_in(s, j);  // a shared buffer is read where it lies
  publish(kPosted, step_);
  await_all(kPosted, j == 0 ? s.sig : nullptr);
  if (j == 0 && s.share && adopt_shared(s)) return true;
  if (s.reduce && s.gather) {
    // Every member published step j - 1's `reduced` before this step's `posted`: collect those
    // pieces now, one wait instead of two per step.
    if (j > 0) {
      gather_piece(s, j - 1, step_ - 1);
      publish(kDone, step_ - 1);
    }
    reduce_piece(s, j);
    publish(kReduced, step_);
    return false;
  }
  if (s.reduce) reduce_piece(s, j);
  if (s.gather) gather_piece(s, j, step_);
  publish(kDone, step_);
  return false;
}

void NodeGroup::copy_in(const Sweep& s, size_t j) {
  const size_t ts = s.ts();
  std::byte* mine = slot(self_, step_);
  if (s.reduce) {
    // The pieces of the others' slices, each at its owner's place in the slot.
    for (int q = 0; q < size(); ++q)
      if (q != self_ && s.count(q, j) > 0)
        std::memcpy(mine + s.slot_at(q), s.in + (s.in_off[q] + j * s.piece) * ts,
                    s.count(q, j) * ts);
  } else if ((s.source < 0 || s.source == self_) && s.count(self_, j) > 0) {
    std::memcpy(mine + s.slot_at(self_), s.in + (s.in_off[self_] + j * s.piece) * ts,
                s.count(self_, j) * ts);
  }
}

void NodeGroup::reduce_piece(const Sweep& s, size_t j) {
  // This member's piece from every member in rank order, a block at a time.
  const size_t ts = s.ts(), k = s.count(self_, j);
  const std::byte* own = s.in + (s.in_off[self_] + j * s.piece) * ts;
  std::byte* dst = s.out + (s.out_off[self_] + j * s.piece) * ts;
  std::byte* back = slot(self_, step_) + s.slot_at(self_);  // where the others collect it
  // Reduced straight into the output (no streaming) when it is exactly this member's input
  // (in place: reduce_of reads each element before it writes it) or overlaps it nowhere: its
  // lines are this member's own, and the block is then in L1 for the copy into the slot. Else
  // reduced in the accumulator in L1 and copied out. Never reduced into the slot: its lines
  // were last read by the others, and memcpy's whole-line stores take them back faster than
  // the reduction's own stores (measured: 1 MiB on 2 ranks ~40% slower that way).
  const bool direct = !s.stream && !direct_any_ && (dst == own || !overlaps(dst, own, k * ts));
  const bool wide = direct && size() == 2;  // no accumulator: members 0 and 1 in one pass
  const size_t block = std::max<size_t>(1, (wide ? kDirectBlockBytes : kBlockBytes) / ts);
  for (size_t b = 0; b < k; b += block) {
    const size_t c = std::min(block, k - b);
    auto src = [&](int q) -> const std::byte* {
      if (q == self_) return own + b * ts;
      if (direct_any_ && direct_[q] != nullptr) return direct_[q] + (own - s.in) + b * ts;
      return slot(q, step_) + s.slot_at(self_) + b * ts;
    };
    std::byte* to = dst + b * ts;
    const std::byte* acc = reduce_block(src, direct ? to : nullptr, c, s.type, s.op, s.divisor);
    if (!direct) node::copy_out(to, acc, c * ts, s.stream);
    if (s.gather) std::memcpy(back + b * ts, acc, c * ts);
  }
}

void NodeGroup::gather_piece(const Sweep& s, size_t j, uint64_t at_step) {
  // Member r reads r + 1, r + 2, ...: the members start on different peers' slots.
  const size_t ts = s.ts();
  for (int k = 1; k < size(); ++k) {
    const int q = (self_ + k) % size();
    if ((s.source >= 0 && q != s.source) || s.count(q, j) == 0) continue;
    node::copy_out(s.out + (s.out_off[q] + j * s.piece) * ts, slot(q, at_step) + s.slot_at(q),
                   s.count(q, j) * ts, s.stream);
  }
}

void NodeGroup::small_allreduce(const void* send, void* recv, size_t count, DataType type,
                                ReduceOp op, const Signature* sig) {
  const size_t ts = type_size(type), bytes = count * ts;
  const ReduceOp fold = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  begin_step(sig);
  // A tiny input rides in the post line itself, with the counter and the signature: a peer
  // waits, checks and reads it in one line.
  const bool tiny = bytes <= node::kInlineBytes;
  auto input = [&](int q) -> std::byte* {
    return tiny ? node::control(segment_, q).post[step_ % 2].data : slot(q, step_);
  };
  std::memcpy(input(self_), send, bytes);
  publish(kPosted, step_);
  await_all(kPosted, sig);
  posts_seen_step_ = step_;
  const size_t block = std::max<size_t>(1, kBlockBytes / ts);
  auto* out = static_cast<std::byte*>(recv);
  for (size_t b = 0; b < count; b += block) {
    const size_t c = std::min(block, count - b);
    // The inputs are copies (post line or slot), so out overlaps none of them.
    reduce_block([&](int q) -> const std::byte* { return input(q) + b * ts; }, out + b * ts, c,
                 type, fold, op == ReduceOp::kAvg ? size() : 1);
  }
  publish(kDone, step_);
}

void NodeGroup::allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                          const Signature* sig) {
  const size_t ts = type_size(type);
  if (count > 0 && count * ts <= segment_->small_bytes) {
    small_allreduce(send, recv, count, type, op, sig);
    return;
  }
  if (cma_ && segment_->cma_bytes > 0 && count * ts >= segment_->cma_bytes) {
    cma_allreduce(send, recv, count, type, op, sig);
    return;
  }
  Sweep s = sweep(send, recv, type, op, sig);
  s.reduce = s.gather = true;
  s.stream = streams(count * ts);
  s.by_slices(count, size());
  // A shared buffer (ddl_alloc) is held against ddl_free for the call.
  const SharedPin pin(share_ok_ && send == recv ? recv : nullptr, count * ts);
  s.share = share_ok_;  // every member's word is read, shared or not
  s.mine = pin.ok() ? &pin.ref() : nullptr;
  run(s);
}

bool NodeGroup::streams(size_t bytes) const {
  return options_.stream_bytes > 0 && bytes >= options_.stream_bytes;
}

NodeGroup::Sweep NodeGroup::sweep(const void* in, void* out, DataType type, ReduceOp op,
                                  const Signature* sig) const {
  Sweep s;
  s.in = static_cast<const std::byte*>(in);
  s.out = static_cast<std::byte*>(out);
  s.type = type;
  s.op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  s.divisor = op == ReduceOp::kAvg ? size() : 1;
  s.piece = std::max<size_t>(1, segment_->slot_bytes / (size() * type_size(type)));
  s.sig = sig;
  return s;
}

void NodeGroup::reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                               ReduceOp op, const Signature* sig) {
  Sweep s = sweep(send, recv, type, op, sig);
  s.reduce = true;
  for (int q = 0; q < size(); ++q) {
    s.in_off.push_back(q * recv_count);
    s.out_off.push_back(0);
    s.len.push_back(recv_count);
  }
  run(s);
}

void NodeGroup::allgather(const void* send, void* recv, size_t count, DataType type,
                          const Signature* sig) {
  const size_t ts = type_size(type);
  auto* out = static_cast<std::byte*>(recv);
  if (count > 0 && out + count * ts * self_ != send) {
    std::memmove(out + count * ts * self_, send, count * ts);
  }
  Sweep s = sweep(send, recv, type, ReduceOp::kSum, sig);
  s.gather = true;
  s.stream = streams(count * ts * size());
  for (int q = 0; q < size(); ++q) {
    s.in_off.push_back(0);
    s.out_off.push_back(q * count);
    s.len.push_back(count);
  }
  run(s);
}

void NodeGroup::broadcast(void* buf, size_t bytes, int root, const Signature* sig) {
  Sweep s = sweep(buf, buf, DataType::kUint8, ReduceOp::kSum, sig);
  s.gather = true;
  s.source = root;
  s.in_off.assign(size(), 0);
  s.out_off.assign(size(), 0);
  s.len.assign(size(), 0);
  s.len[root] = bytes;
  s.piece = segment_->slot_bytes;
  s.stream = streams(bytes);
  run(s);
}

void NodeGroup::barrier(const Signature* sig) {
  sig_only(sig);
}

void NodeGroup::reduce_scatter_in_place(void* buf, size_t count, DataType type, ReduceOp op) {
  Sweep s = sweep(buf, buf, type, op, nullptr);
  s.reduce = true;
  s.by_slices(count, size());
  run(s);
}

void NodeGroup::allgather_in_place(void* buf, size_t count, DataType type) {
  Sweep s = sweep(buf, buf, type, ReduceOp::kSum, nullptr);
  s.gather = true;
  s.stream = streams(count * type_size(type));
  s.by_slices(count, size());
  run(s);
}

}  // namespace ddl::comm
