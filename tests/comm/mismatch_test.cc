// Mismatched collectives: ranks that call different collectives, or the same one with another
// count, type, reduction, root or buffer layout, fail that call on every rank with the same
// exact text, and every later call fails the same way. Threads as ranks over the real
// shared-memory (one host) and TCP (a topology of two hosts) links, on 2, 3 and 4 ranks, in
// every size class: recursive doubling (the signature rides on the data), ring and
// multi-dimensional ring (checked first), and one rank in each.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "comm/collectives/signature.h"
#include "ranks.h"

namespace ddl::comm {
namespace {

using namespace std::chrono_literals;
using test_ranks::fast;
using test_ranks::grid;

constexpr size_t kSmall = 10;       // 40 bytes of float32: recursive doubling
constexpr size_t kLarge = 100'000;  // 400 kB: ring (multi-ring with a 2x2 topology)
const char* const kTail =
    " (every rank must make the same calls in the same order; this communicator now fails "
    "every call)";

/// A rank's collective call; `odd` is true on the rank that calls differently.
using Call = std::function<void(Communicator&, bool odd)>;

struct Outcome {
  std::string call;   ///< the mismatched call's error, "" when it succeeded
  std::string later;  ///< a barrier's error afterwards
  std::string other;  ///< any other failure
};

/// Runs two matching allreduces (#1, #2; none when `options` is given), then `call`, then a
/// barrier on `n` threads whose options come from `options(rank)`; returns what each rank saw.
std::vector<Outcome> run(int n, int odd_rank, const Call& call,
                         const std::optional<Topology>& topology = std::nullopt,
                         const std::function<CommOptions(int)>& options = nullptr) {
  auto boots = make_memory_bootstraps(n);
  std::vector<Outcome> out(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator c(std::move(boots[r]), topology, options ? options(r) : fast(), "token");
        if (!options) {
          float x[2] = {1, 2};
          c.allreduce(x, x, 2, DataType::kFloat32, ReduceOp::kSum);
          c.allreduce(x, x, 1, DataType::kFloat32, ReduceOp::kMax);
          if (x[0] != static_cast<float>(n)) out[r].other = "wrong sum before the mismatch";
        }
        try {
          call(c, r == odd_rank);
        } catch (const MismatchError& e) {
          out[r].call = e.what();
        }
        try {
          c.barrier();
        } catch (const MismatchError& e) {
          out[r].later = e.what();
        }
      } catch (const std::exception& e) {
        out[r].other = e.what();
      }
    });
  }
  for (auto& t : threads)
    t.join();
  return out;
}

/// Every rank failed the call with `want` (tail added) and the barrier after it the same way.
void expect_everywhere(const std::vector<Outcome>& got, const std::string& want) {
  for (size_t r = 0; r < got.size(); ++r) {
    EXPECT_EQ(got[r].other, "") << "rank " << r;
    EXPECT_EQ(got[r].call, want + kTail) << "rank " << r;
    EXPECT_EQ(got[r].later, want + kTail) << "rank " << r;
  }
}

std::string mismatch(int odd, const std::string& first, const std::string& other) {
  return "collective mismatch: rank 0 called " + first + " #3 but rank " + std::to_string(odd) +
         " called " + other + " #3";
}

Call allreduce_of(size_t count, size_t odd_count, DataType type = DataType::kFloat32,
                  DataType odd_type = DataType::kFloat32, ReduceOp op = ReduceOp::kSum,
                  ReduceOp odd_op = ReduceOp::kSum) {
  return [=](Communicator& c, bool odd) {
    const size_t k = odd ? odd_count : count;
    const DataType t = odd ? odd_type : type;
    std::vector<std::byte> buf(k * type_size(t));
    c.allreduce(buf.data(), buf.data(), k, t, odd ? odd_op : op);
  };
}

/// 2, 3 and 4 ranks, the odd one last; 4 ranks also as a 2x2 topology (TCP between the two
/// hosts, the multi-dimensional ring for large counts).
void for_each_job(const std::function<void(int n, int odd, const std::optional<Topology>&)>& fn) {
  for (int n : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(n) + " ranks");
    fn(n, n - 1, std::nullopt);
  }
  SCOPED_TRACE("2x2 topology");
  fn(4, 1, grid(2, 2, "mismatch-" + std::to_string(getpid())));
}

TEST(MismatchTest, CountInEverySizeClass) {
  for_each_job([](int n, int odd, const std::optional<Topology>& t) {
    expect_everywhere(
        run(n, odd, allreduce_of(kSmall, kSmall + 1), t),
        mismatch(odd, "allreduce(count=10, float32, sum)", "allreduce(count=11, float32, sum)"));
    expect_everywhere(run(n, odd, allreduce_of(kLarge, kLarge + 1), t),
                      mismatch(odd, "allreduce(count=100000, float32, sum)",
                               "allreduce(count=100001, float32, sum)"));
    // One rank below DDL_SMALL_BYTES (recursive doubling), the other above (ring).
    expect_everywhere(run(n, odd, allreduce_of(kSmall, kLarge), t),
                      mismatch(odd, "allreduce(count=10, float32, sum)",
                               "allreduce(count=100000, float32, sum)"));
    expect_everywhere(
        run(n, odd, allreduce_of(0, 3), t),
        mismatch(odd, "allreduce(count=0, float32, sum)", "allreduce(count=3, float32, sum)"));
  });
}

TEST(MismatchTest, TypeAndReduction) {
  for_each_job([](int n, int odd, const std::optional<Topology>& t) {
    for (size_t k : {kSmall, kLarge}) {
      const std::string count = "count=" + std::to_string(k);
      expect_everywhere(run(n, odd, allreduce_of(k, k, DataType::kFloat32, DataType::kFloat64), t),
                        mismatch(odd, "allreduce(" + count + ", float32, sum)",
                                 "allreduce(" + count + ", float64, sum)"));
      expect_everywhere(run(n, odd,
                            allreduce_of(k, k, DataType::kInt32, DataType::kInt32, ReduceOp::kSum,
                                         ReduceOp::kMax),
                            t),
                        mismatch(odd, "allreduce(" + count + ", int32, sum)",
                                 "allreduce(" + count + ", int32, max)"));
      expect_everywhere(run(n, odd,
                            allreduce_of(k, k, DataType::kInt16, DataType::kUint16, ReduceOp::kBand,
                                         ReduceOp::kBand),
                            t),
                        mismatch(odd, "allreduce(" + count + ", int16, band)",
                                 "allreduce(" + count + ", uint16, band)"));
    }
  });
}

TEST(MismatchTest, BroadcastRoot) {
  for_each_job([](int n, int odd, const std::optional<Topology>& t) {
    for (size_t k : {kSmall, kLarge}) {
      auto call = [k](Communicator& c, bool odd) {
        std::vector<int32_t> v(k, c.rank());
        c.broadcast(v.data(), k, DataType::kInt32, odd ? 1 : 0);
      };
      const std::string count = "count=" + std::to_string(k);
      expect_everywhere(run(n, odd, call, t),
                        mismatch(odd, "broadcast(" + count + ", int32, root=0)",
                                 "broadcast(" + count + ", int32, root=1)"));
    }
  });
}

TEST(MismatchTest, OperationKind) {
  for_each_job([](int n, int odd, const std::optional<Topology>& t) {
    for (size_t k : {kSmall, kLarge}) {
      const std::string count = "count=" + std::to_string(k);
      auto allreduce_or_broadcast = [k](Communicator& c, bool odd) {
        std::vector<float> v(k, 1.0f);
        if (odd) {
          c.broadcast(v.data(), k, DataType::kFloat32, 0);
        } else {
          c.allreduce(v.data(), v.data(), k, DataType::kFloat32, ReduceOp::kSum);
        }
      };
      expect_everywhere(run(n, odd, allreduce_or_broadcast, t),
                        mismatch(odd, "allreduce(" + count + ", float32, sum)",
                                 "broadcast(" + count + ", float32, root=0)"));
      auto allgather_or_reduce_scatter = [k](Communicator& c, bool odd) {
        std::vector<float> in(k * c.size(), 1.0f), out(k * c.size());
        if (odd) {
          c.reduce_scatter(in.data(), out.data(), k, DataType::kFloat32, ReduceOp::kSum);
        } else {
          c.allgather(in.data(), out.data(), k, DataType::kFloat32);
        }
      };
      expect_everywhere(run(n, odd, allgather_or_reduce_scatter, t),
                        mismatch(odd, "allgather(" + count + ", float32)",
                                 "reduce_scatter(" + count + ", float32, sum)"));
      auto allreduce_or_barrier = [k](Communicator& c, bool odd) {
        std::vector<float> v(k, 1.0f);
        if (odd) {
          c.barrier();
        } else {
          c.allreduce(v.data(), v.data(), k, DataType::kFloat32, ReduceOp::kSum);
        }
      };
      expect_everywhere(run(n, odd, allreduce_or_barrier, t),
                        mismatch(odd, "allreduce(" + count + ", float32, sum)", "barrier()"));
    }
  });
}

/// FNV-1a over the counts and the bucket's element count, as the communicator hashes a layout.
std::string layout(std::vector<uint64_t> counts, uint64_t bucket_elems) {
  uint64_t h = 0xcbf29ce484222325u;
  counts.push_back(bucket_elems);
  for (uint64_t v : counts) {
    for (int b = 0; b < 8; ++b) {
      h ^= (v >> (8 * b)) & 0xff;
      h *= 0x100000001b3u;
    }
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

TEST(MismatchTest, AllreduceNCountsAndLayout) {
  const uint64_t bucket = (64u << 20) / 4;
  for_each_job([&](int n, int odd, const std::optional<Topology>& t) {
    auto call = [](std::vector<size_t> counts, std::vector<size_t> odd_counts) {
      return [=](Communicator& c, bool odd) {
        const std::vector<size_t>& k = odd ? odd_counts : counts;
        std::vector<std::vector<float>> bufs;
        std::vector<void*> ptrs;
        for (size_t x : k)
          bufs.emplace_back(x, 1.0f);
        for (auto& b : bufs)
          ptrs.push_back(b.data());
        c.allreduce_n(ptrs.data(), k.data(), k.size(), DataType::kFloat32, ReduceOp::kSum);
      };
    };
    expect_everywhere(run(n, odd, call({10, 20}, {10, 21}), t),
                      mismatch(odd, "allreduce_n(count=30 in 2 buffers, float32, sum)",
                               "allreduce_n(count=31 in 2 buffers, float32, sum)"));
    // The same total cut differently: told apart by the layout hash.
    // One host: the shared-memory route; two: recursive doubling.
    const std::string algo = t ? "rd" : "shm";
    expect_everywhere(
        run(n, odd, call({10, 20}, {20, 10}), t),
        mismatch(odd,
                 "allreduce_n(count=30 in 2 buffers, float32, sum, algorithm=" + algo +
                     ", layout=" + layout({10, 20}, bucket) + ")",
                 "allreduce_n(count=30 in 2 buffers, float32, sum, algorithm=" + algo +
                     ", layout=" + layout({20, 10}, bucket) + ")"));
    expect_everywhere(run(n, odd, call({}, {kLarge}), t),
                      mismatch(odd, "allreduce_n(count=0 in 0 buffers, float32, sum)",
                               "allreduce_n(count=100000 in 1 buffer, float32, sum)"));
  });
}

TEST(MismatchTest, ACallRefusedOnOneRankPutsItOutOfStep) {
  // Rank 1's call #3 is refused (a null buffer) before it communicates; its next call is #4
  // while the others are still in #3.
  auto call = [](Communicator& c, bool odd) {
    float x = 1;
    if (odd) {
      EXPECT_THROW(c.allreduce(nullptr, &x, 1, DataType::kFloat32, ReduceOp::kSum), ArgumentError);
    }
    c.allreduce(&x, &x, 1, DataType::kFloat32, ReduceOp::kSum);
  };
  for (int n : {2, 3}) {
    const auto got = run(n, 1, call);
    const std::string want =
        "collective mismatch: rank 0 called allreduce(count=1, float32, sum) #3 but rank 1 "
        "called allreduce(count=1, float32, sum) #4";
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(got[r].other, "") << "rank " << r;
      EXPECT_EQ(got[r].call, want + kTail) << "rank " << r;
      EXPECT_EQ(got[r].later, want + kTail) << "rank " << r;
    }
  }
}

TEST(MismatchTest, RanksThatChoseDifferentAlgorithmsAreToldApart) {
  // DDL_ALGO=ring on rank 1 only: the same call, another route.
  auto options = [](int r) { return fast(r == 1 ? "ring" : "auto"); };
  expect_everywhere(run(3, 1, allreduce_of(kSmall, kSmall), std::nullopt, options),
                    "collective mismatch: rank 0 called allreduce(count=10, float32, sum, "
                    "algorithm=shm) #1 but rank 1 called allreduce(count=10, float32, sum, "
                    "algorithm=ring) #1");
  // Without the shared-memory collectives (DDL_SHM=0): recursive doubling against the ring.
  auto no_shm = [&](int r) {
    CommOptions o = options(r);
    o.shm = false;
    return o;
  };
  expect_everywhere(run(3, 1, allreduce_of(kSmall, kSmall), std::nullopt, no_shm),
                    "collective mismatch: rank 0 called allreduce(count=10, float32, sum, "
                    "algorithm=rd) #1 but rank 1 called allreduce(count=10, float32, sum, "
                    "algorithm=ring) #1");
  // And rank 1 on the shared-memory route while the others take recursive doubling.
  auto shm_on_one = [](int r) {
    CommOptions o = fast(r == 1 ? "shm" : "rd");
    return o;
  };
  expect_everywhere(run(3, 1, allreduce_of(kSmall, kSmall), std::nullopt, shm_on_one),
                    "collective mismatch: rank 0 called allreduce(count=10, float32, sum, "
                    "algorithm=rd) #1 but rank 1 called allreduce(count=10, float32, sum, "
                    "algorithm=shm) #1");
}

TEST(MismatchTest, MatchingCallsStillAgreeAfterManyRounds) {
  // The check changes nothing for ranks that agree: every collective, every size class.
  const auto got = run(3, -1, [](Communicator& c, bool) {
    for (size_t k : {size_t{0}, size_t{1}, kSmall, size_t{4096}, kLarge}) {
      std::vector<float> v(k, 1.0f);
      c.allreduce(v.data(), v.data(), k, DataType::kFloat32, ReduceOp::kSum);
      for (float x : v)
        ASSERT_EQ(x, 3.0f);
      std::vector<float> b(k, static_cast<float>(c.rank()));
      c.broadcast(b.data(), k, DataType::kFloat32, 2);
      for (float x : b)
        ASSERT_EQ(x, 2.0f);
    }
  });
  for (const Outcome& o : got) {
    EXPECT_EQ(o.other, "");
    EXPECT_EQ(o.call, "");
    EXPECT_EQ(o.later, "");
  }
}

TEST(VerdictTest, MergingDependsOnlyOnTheRanksHeardFrom) {
  Signature a, b;
  a.kind = b.kind = CollectiveKind::kAllreduce;
  a.count = 10;
  b.count = 11;
  a.seq = b.seq = 3;
  // Ranks 0..4; ranks 2 and 4 called b.
  auto v = [&](int r) { return Verdict::of(r, r == 2 || r == 4 ? b : a); };
  Verdict x = v(4);
  x.merge(v(3));
  x.merge(v(4));  // overlap
  Verdict y = v(1);
  y.merge(v(2));
  y.merge(v(0));
  x.merge(y);
  EXPECT_EQ(x.first_rank, 0);
  EXPECT_EQ(x.other_rank, 2);
  EXPECT_EQ(x.message(),
            std::string("collective mismatch: rank 0 called allreduce(count=10, float32, sum) "
                        "#3 but rank 2 called allreduce(count=11, float32, sum) #3") +
                kTail);
  Verdict same = v(0);
  same.merge(v(1));
  same.merge(v(3));
  EXPECT_FALSE(same.mismatch());
}

}  // namespace
}  // namespace ddl::comm
