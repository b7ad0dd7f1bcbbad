// The multi-dimensional allreduce of the PowerAI DDL paper, pipelined across its dimensions.
//
// How it works. The ranks form a grid, dims[0] the innermost dimension (the ranks of one host,
// say, through shared memory) and dims.back() the outermost (the hosts, or the racks). Each
// Dimension is this rank's group of neighbours along one dimension. One chunk of the buffer
// goes through two sweeps over a shrinking region:
//
//   1. Inward to outward: reduce-scatter the chunk among dims[0]; this rank now owns one piece
//      of it (partition(region, size) at its index), reduced over its dims[0] group. Reduce-
//      scatter that piece among dims[1], and so on. After the last dimension this rank owns
//      1 / (n0 n1 ... nk) of the chunk, reduced over the whole grid.
//   2. kAvg divides that piece once by the product of the sizes.
//   3. Outward to inward: allgather among the outermost group the region it scattered, then
//      among the next one in, ..., until dims[0]'s allgather restores the whole chunk.
//
// The pipeline. The buffer is cut into chunks of `chunk_bytes` (one chunk when 0 or when the
// buffer is smaller; at most kMaxPipelineChunks, 4096; the communicator passes
// pipeline_chunk_bytes(), comm/mode.h: every chunk pays each step of its rings a latency, so
// the chunk grows with the longest ring) and every dimension runs on a thread of its own
// (dims[0] on the caller's), working through a fixed list: the reduce-scatters of chunks 0, 1, ...,
// m-1, then their allgathers in the same order. Dimension d's reduce-scatter of chunk j waits only
// for dimension d-1's of chunk j; its allgather of chunk j for dimension d+1's allgather of chunk
// j (the outermost's, for its own reduce-scatter of j). So while the outer links carry chunk
// j, the inner dimensions already reduce chunk j+1, and the slowest link is busy from its
// first chunk to its last: the time is about that link's share plus one chunk's way in and
// out. The lists depend on nothing but the count, so every member of a dimension makes the
// same calls in the same order, and each dimension is used by one thread at a time.
//
// Every element is reduced in one fixed order (dims[0]'s order, then those partial results in
// dims[1]'s, ...), so every rank ends with the same bits whatever the timing. Chunking changes
// which member reduces an element and so, for floats, the last bits compared with the
// unchunked order; integer results (wrapping) and min/max are identical.
//
// A failure in one dimension (a peer lost, a timeout) stops the others at their next wait; the
// call throws the first error once every dimension's thread has returned (a thread inside a
// transfer returns when that transfer fails or its DDL_TIMEOUT passes).

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "comm/collectives/collectives.h"
#include "comm/collectives/dimension.h"
#include "comm/mode.h"

namespace ddl::comm {
namespace {

using Region = std::pair<size_t, size_t>;  // [begin, end) in elements

/// For each chunk, the region every dimension works on, and the piece this rank owns at the
/// end (the outermost dimension's share).
struct Schedule {
  std::vector<std::vector<Region>> region;  // [chunk][dimension]
  std::vector<Region> owned;                // [chunk]
};

/// count > 0 (multi_dim_allreduce returns before for 0).
Schedule make_schedule(std::span<Dimension* const> dims, size_t count, size_t chunk_elems) {
  Schedule s;
  for (size_t at = 0; at < count; at += chunk_elems) {
    size_t begin = at, end = std::min(count, at + chunk_elems);
    std::vector<Region> regions;
    for (const Dimension* d : dims) {
      regions.emplace_back(begin, end);
      const auto offsets = partition(end - begin, d->size());
      end = begin + offsets[d->rank() + 1];
      begin += offsets[d->rank()];
    }
    s.region.push_back(std::move(regions));
    s.owned.emplace_back(begin, end);
  }
  return s;
}

/// What the dimensions' threads have finished, and the first failure.
class Progress {
 public:
  explicit Progress(size_t dims) : scattered_(dims, 0), gathered_(dims, 0) {}

  /// Waits until dimension d has reduce-scattered (or allgathered) more than `chunk` chunks.
  /// Throws Stopped once another dimension has failed.
  void await_scattered(size_t d, size_t chunk) { await(scattered_, d, chunk); }
  void await_gathered(size_t d, size_t chunk) { await(gathered_, d, chunk); }
  void scattered(size_t d) { advance(scattered_, d); }
  void gathered(size_t d) { advance(gathered_, d); }
  void fail(std::exception_ptr e) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::move(e);
    changed_.notify_all();
  }
  void rethrow() {
    if (error_) std::rethrow_exception(error_);
  }
  struct Stopped {};

 private:
  void await(const std::vector<size_t>& done, size_t d, size_t chunk) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return done[d] > chunk || error_; });
    if (done[d] <= chunk) throw Stopped{};
  }
  void advance(std::vector<size_t>& done, size_t d) {
    std::lock_guard lock(mutex_);
    ++done[d];
    changed_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<size_t> scattered_, gathered_;
  std::exception_ptr error_;
};

struct Call {
  std::span<Dimension* const> dims;
  std::byte* base;
  DataType type;
  ReduceOp op;  // as asked: kAvg divides once, by every dimension's size
  int ranks;    // the product of the sizes
  const Schedule* schedule;
  Progress* progress;
};

/// Dimension d's reduce-scatters of every chunk, in order.
void scatter_all(const Call& c, size_t d) {
  const size_t ts = type_size(c.type), last = c.dims.size() - 1, chunks = c.schedule->owned.size();
  const ReduceOp fold = c.op == ReduceOp::kAvg ? ReduceOp::kSum : c.op;
  for (size_t j = 0; j < chunks; ++j) {
    if (d > 0) c.progress->await_scattered(d - 1, j);
    const auto [b, e] = c.schedule->region[j][d];
    c.dims[d]->reduce_scatter(c.base + b * ts, e - b, c.type, fold);
    if (d == last && c.op == ReduceOp::kAvg) {
      const auto [ob, oe] = c.schedule->owned[j];
      divide(c.base + ob * ts, oe - ob, c.type, c.ranks);
    }
    c.progress->scattered(d);
  }
}

/// Dimension d's allgathers of every chunk, in order.
void gather_all(const Call& c, size_t d) {
  const size_t ts = type_size(c.type), last = c.dims.size() - 1, chunks = c.schedule->owned.size();
  for (size_t j = 0; j < chunks; ++j) {
    if (d < last) c.progress->await_gathered(d + 1, j);
    const auto [b, e] = c.schedule->region[j][d];
    c.dims[d]->allgather(c.base + b * ts, e - b, c.type);
    c.progress->gathered(d);
  }
}

/// Dimension d's whole list on a pipeline thread; a failure stops the other dimensions.
void run_guarded(const Call& c, size_t d) {
  try {
    scatter_all(c, d);
    gather_all(c, d);
  } catch (const Progress::Stopped&) {
    // another dimension failed first; its error is the call's
  } catch (...) {
    c.progress->fail(std::current_exception());
  }
}

}  // namespace

void multi_dim_allreduce(std::span<Dimension* const> dims, void* buf, size_t count, DataType type,
                         ReduceOp op, size_t chunk_bytes) {
  if (dims.empty() || count == 0) return;
  const size_t ts = type_size(type);
  // At most kMaxPipelineChunks chunks, however small chunk_bytes: the schedule stays small.
  const size_t chunk_elems =
      dims.size() == 1 ? count : pipeline_chunk_elems(count, ts, chunk_bytes);
  const Schedule schedule = make_schedule(dims, count, chunk_elems);
  int ranks = 1;
  for (const Dimension* d : dims)
    ranks *= d->size();
  Progress progress(dims.size());
  const Call call{dims, static_cast<std::byte*>(buf), type, op, ranks, &schedule, &progress};
  if (schedule.owned.size() == 1) {
    // Nothing to overlap: every reduce-scatter inward to outward, then every allgather back.
    for (size_t d = 0; d < dims.size(); ++d)
      scatter_all(call, d);
    for (size_t d = dims.size(); d-- > 0;)
      gather_all(call, d);
    return;
  }
  std::vector<std::thread> threads;
  for (size_t d = 1; d < dims.size(); ++d)
    threads.emplace_back(run_guarded, std::cref(call), d);
  run_guarded(call, 0);
  for (std::thread& t : threads)
    t.join();
  progress.rethrow();
}

}  // namespace ddl::comm
