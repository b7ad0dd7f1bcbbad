// libddl's path for GPU buffers, without a GPU.
//
// TEST DOUBLE: GPUs and NCCL cannot exist in CI, so FakeDevice stands in for the NCCL runtime.
// It calls host buffers registered with it "GPU memory", and its communicators compute each
// collective directly from every member's buffers (the members are threads of this process),
// combining members in member order, and record each call. With it these tests check how the
// multi-dimensional allreduce maps onto NCCL's reduce-scatter / allreduce / allgather per
// dimension, that the results are right for every count, type and op, and that the
// communicator sends GPU buffers (and only those) to the device runtime. The real NCCL runtime
// is exercised by tests/comm_gpu/ on a machine with a GPU.

#include "comm/device/device.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "comm/collectives/signature.h"
#include "comm/core/communicator.h"
#include "ranks.h"

namespace ddl::comm {
namespace {

using device::Comm;
using test_ranks::fast;
using test_ranks::grid;
using test_ranks::run_ranks;

/// What the members of one fake communicator share.
struct Shared {
  explicit Shared(int n) : size(n), sync(n), send(n), recv(n) {}
  int size;
  std::barrier<> sync;
  std::vector<const void*> send;
  std::vector<void*> recv;
};

/// Records each call as "name:size:count" (count: the `count` argument NCCL would get).
class Log {
 public:
  void add(std::string entry) {
    std::lock_guard lock(mutex_);
    entries_.push_back(std::move(entry));
    threads_.push_back(std::this_thread::get_id());
  }
  std::vector<std::string> take() {
    std::lock_guard lock(mutex_);
    threads_.clear();
    return std::exchange(entries_, {});
  }
  /// The entries that thread `id` made.
  std::vector<std::string> of(std::thread::id id) {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (size_t i = 0; i < entries_.size(); ++i)
      if (threads_[i] == id) out.push_back(entries_[i]);
    return out;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> entries_;
  std::vector<std::thread::id> threads_;
};

class FakeComm : public Comm {
 public:
  FakeComm(std::shared_ptr<Shared> shared, int rank, Log* log)
      : shared_(std::move(shared)), rank_(rank), log_(log) {}
  int size() const override { return shared_->size; }
  int rank() const override { return rank_; }

  void allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op) override {
    record("allreduce", count);
    collective(send, recv, count * type_size(type), [&](std::vector<std::byte>& out) {
      out.assign(static_cast<const std::byte*>(shared_->send[0]),
                 static_cast<const std::byte*>(shared_->send[0]) + count * type_size(type));
      for (int m = 1; m < size(); ++m)
        reduce_into(out.data(), shared_->send[m], count, type, op);
      if (op == ReduceOp::kAvg) divide(out.data(), count, type, size());
    });
  }
  void reduce_scatter(const void* send, void* recv, size_t recv_count, DataType type,
                      ReduceOp op) override {
    record("reduce_scatter", recv_count);
    const size_t bytes = recv_count * type_size(type);
    collective(send, recv, bytes, [&](std::vector<std::byte>& out) {
      auto part = [&](int m) {
        return static_cast<const std::byte*>(shared_->send[m]) + bytes * rank_;
      };
      out.assign(part(0), part(0) + bytes);
      for (int m = 1; m < size(); ++m)
        reduce_into(out.data(), part(m), recv_count, type, op);
      if (op == ReduceOp::kAvg) divide(out.data(), recv_count, type, size());
    });
  }
  void allgather(const void* send, void* recv, size_t send_count, DataType type) override {
    record("allgather", send_count);
    const size_t bytes = send_count * type_size(type);
    collective(send, recv, bytes * size(), [&](std::vector<std::byte>& out) {
      out.clear();
      for (int m = 0; m < size(); ++m) {
        const auto* p = static_cast<const std::byte*>(shared_->send[m]);
        out.insert(out.end(), p, p + bytes);
      }
    });
  }
  void broadcast(void* buf, size_t count, DataType type, int root) override {
    record("broadcast", count);
    const size_t bytes = count * type_size(type);
    collective(buf, buf, bytes, [&](std::vector<std::byte>& out) {
      const auto* p = static_cast<const std::byte*>(shared_->send[root]);
      out.assign(p, p + bytes);
    });
  }

 private:
  void record(const char* name, size_t count) {
    log_->add(std::string(name) + ":" + std::to_string(size()) + ":" + std::to_string(count));
  }
  /// Every member posts its buffers; each computes its result from all members' inputs; only
  /// when all have read does anyone write (in-place calls alias inputs and outputs).
  template <typename Compute>
  void collective(const void* send, void* recv, size_t out_bytes, Compute compute) {
    shared_->send[rank_] = send;
    shared_->recv[rank_] = recv;
    shared_->sync.arrive_and_wait();
    std::vector<std::byte> out;
    compute(out);
    EXPECT_EQ(out.size(), out_bytes);
    shared_->sync.arrive_and_wait();
    if (!out.empty()) std::memcpy(recv, out.data(), out.size());
    shared_->sync.arrive_and_wait();
  }

  std::shared_ptr<Shared> shared_;
  int rank_;
  Log* log_;
};

/// The test double for NCCL (see the top of this file). One instance serves every rank.
class FakeDevice : public device::Runtime {
 public:
  std::string describe() const override { return "fake"; }
  bool is_device_pointer(const void* p) override {
    std::lock_guard lock(mutex_);
    return device_.count(p) > 0;
  }
  void on_device(const void* p) {
    std::lock_guard lock(mutex_);
    device_.insert(p);
  }
  std::string new_id() override {
    std::lock_guard lock(mutex_);
    std::string id = "fake-" + std::to_string(next_id_++);
    id.resize(id_bytes(), '.');
    return id;
  }
  size_t id_bytes() const override { return 16; }
  std::unique_ptr<Comm> join(const std::string& id, int size, int rank, int gpu,
                             std::chrono::milliseconds) override {
    std::lock_guard lock(mutex_);
    auto& shared = comms_[id];
    if (!shared) shared = std::make_shared<Shared>(size);
    EXPECT_EQ(shared->size, size) << id;
    joins_.push_back(id.substr(0, id.find('.')) + " rank " + std::to_string(rank) + "/" +
                     std::to_string(size) + " gpu " + std::to_string(gpu));
    return std::make_unique<FakeComm>(shared, rank, &log);
  }
  std::vector<std::string> joins() {
    std::lock_guard lock(mutex_);
    return joins_;
  }

  Log log;

 private:
  std::mutex mutex_;
  std::set<const void*> device_;
  std::map<std::string, std::shared_ptr<Shared>> comms_;
  std::vector<std::string> joins_;
  int next_id_ = 0;
};

/// Fake communicators for a grid of `dims` (innermost first), as rank r sees them.
struct GridComms {
  std::vector<std::unique_ptr<Comm>> dims;
  std::unique_ptr<Comm> flat;
};

std::vector<GridComms> make_grid(FakeDevice& dev, const std::vector<int>& sizes) {
  int n = 1;
  for (int s : sizes)
    n *= s;
  std::vector<GridComms> out(n);
  std::map<std::string, std::string> ids;
  auto id_for = [&](const std::string& key) {
    auto [it, fresh] = ids.emplace(key, "");
    if (fresh) it->second = dev.new_id();
    return it->second;
  };
  for (int r = 0; r < n; ++r) {
    out[r].flat = dev.join(id_for("flat"), n, r, 0, std::chrono::seconds(1));
    int stride = 1;
    for (size_t d = 0; d < sizes.size(); ++d) {
      const int index = r / stride % sizes[d];
      const int base = r - index * stride;  // the member with index 0 in this ring
      out[r].dims.push_back(dev.join(id_for(std::to_string(d) + "/" + std::to_string(base)),
                                     sizes[d], index, 0, std::chrono::seconds(1)));
      stride *= sizes[d];
    }
  }
  return out;
}

/// A value for rank r, element i that keeps sums exact in every type.
double value(int r, size_t i, DataType type) {
  const int v = static_cast<int>((static_cast<size_t>(r) * 7 + i * 3) % 11);
  if (type == DataType::kBool) return v % 2;
  return type == DataType::kUint8 ? v % 4 : v - 3;
}

void fill(std::vector<std::byte>& buf, int r, size_t count, DataType type) {
  buf.assign(count * type_size(type), std::byte{0});
  for (size_t i = 0; i < count; ++i) {
    const double v = value(r, i, type);
    switch (type) {
      case DataType::kFloat32: {
        const float f = static_cast<float>(v);
        std::memcpy(buf.data() + i * 4, &f, 4);
        break;
      }
      case DataType::kFloat64:
        std::memcpy(buf.data() + i * 8, &v, 8);
        break;
      case DataType::kInt32: {
        const int32_t x = static_cast<int32_t>(v);
        std::memcpy(buf.data() + i * 4, &x, 4);
        break;
      }
      case DataType::kInt64: {
        const int64_t x = static_cast<int64_t>(v);
        std::memcpy(buf.data() + i * 8, &x, 8);
        break;
      }
      case DataType::kUint8:
      case DataType::kBool:
        buf[i] = static_cast<std::byte>(static_cast<uint8_t>(v));
        break;
      case DataType::kInt8:
        buf[i] = static_cast<std::byte>(static_cast<int8_t>(v));
        break;
      default:
        FAIL() << "type not used here";
    }
  }
}

/// The reference: every rank's input reduced in rank order on the host.
std::vector<std::byte> reference(int n, size_t count, DataType type, ReduceOp op) {
  std::vector<std::byte> acc, in;
  fill(acc, 0, count, type);
  for (int r = 1; r < n; ++r) {
    fill(in, r, count, type);
    reduce_into(acc.data(), in.data(), count, type, op);
  }
  if (op == ReduceOp::kAvg) divide(acc.data(), count, type, n);
  return acc;
}

void run_grid(const std::vector<int>& sizes, size_t count, DataType type, ReduceOp op,
              bool in_place) {
  FakeDevice dev;
  std::vector<GridComms> comms = make_grid(dev, sizes);
  const int n = static_cast<int>(comms.size());
  std::vector<std::vector<std::byte>> send(n), recv(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    fill(send[r], r, count, type);
    recv[r].assign(send[r].size(), std::byte{0x5a});
    threads.emplace_back([&, r] {
      std::vector<Comm*> dims;
      for (auto& c : comms[r].dims)
        dims.push_back(c.get());
      device::multi_dim_allreduce(dims, *comms[r].flat, send[r].data(),
                                  in_place ? send[r].data() : recv[r].data(), count, type, op);
    });
  }
  for (auto& t : threads)
    t.join();
  const std::vector<std::byte> want = reference(n, count, type, op);
  for (int r = 0; r < n; ++r) {
    const auto& got = in_place ? send[r] : recv[r];
    ASSERT_EQ(got, want) << "rank " << r << " count " << count << " " << to_string(type) << " "
                         << to_string(op) << (in_place ? " in place" : " out of place");
  }
}

TEST(DeviceMultiDimTest, ResultsForEveryGridCountTypeAndOp) {
  for (const std::vector<int>& sizes :
       std::vector<std::vector<int>>{{4}, {2, 3}, {3, 2}, {2, 2, 2}, {1, 3}}) {
    for (size_t count : {0ul, 1ul, 5ul, 6ul, 7ul, 24ul, 1001ul}) {
      for (DataType type : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32,
                            DataType::kInt64, DataType::kUint8, DataType::kInt8, DataType::kBool}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax,
                            ReduceOp::kProd, ReduceOp::kBand, ReduceOp::kBor}) {
          if (op == ReduceOp::kAvg && (type == DataType::kFloat32 || type == DataType::kFloat64))
            continue;  // float averages of averages round differently: checked below
          if (!reduction_error(type, op).empty() || !device::nccl_reduction_error(type, op).empty())
            continue;  // refused: ReductionsNcclLacksAreRefusedBeforeItIsCalled
          run_grid(sizes, count, type, op, count % 2 == 0);
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST(DeviceMultiDimTest, FloatAverageIsTheJobsAverage) {
  // Values chosen so that every partial average is exact in binary.
  FakeDevice dev;
  std::vector<GridComms> comms = make_grid(dev, {2, 4});
  std::vector<std::vector<double>> buf(8, std::vector<double>(17));
  std::vector<std::thread> threads;
  for (int r = 0; r < 8; ++r) {
    for (size_t i = 0; i < 17; ++i)
      buf[r][i] = r * 8.0 + static_cast<double>(i);
    threads.emplace_back([&, r] {
      std::vector<Comm*> dims{comms[r].dims[0].get(), comms[r].dims[1].get()};
      device::multi_dim_allreduce(dims, *comms[r].flat, buf[r].data(), buf[r].data(), 17,
                                  DataType::kFloat64, ReduceOp::kAvg);
    });
  }
  for (auto& t : threads)
    t.join();
  for (int r = 0; r < 8; ++r)
    for (size_t i = 0; i < 17; ++i)
      ASSERT_EQ(buf[r][i], 28.0 + static_cast<double>(i)) << r << " " << i;
}

/// The NCCL calls one rank makes for one allreduce on a grid.
std::vector<std::string> calls(const std::vector<int>& sizes, size_t count, DataType type,
                               ReduceOp op) {
  FakeDevice dev;
  std::vector<GridComms> comms = make_grid(dev, sizes);
  const int n = static_cast<int>(comms.size());
  std::vector<std::vector<std::byte>> buf(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    fill(buf[r], r, count, type);
    threads.emplace_back([&, r] {
      std::vector<Comm*> dims;
      for (auto& c : comms[r].dims)
        dims.push_back(c.get());
      device::multi_dim_allreduce(dims, *comms[r].flat, buf[r].data(), buf[r].data(), count, type,
                                  op);
    });
  }
  const std::thread::id rank0 = threads[0].get_id();
  for (auto& t : threads)
    t.join();
  return dev.log.of(rank0);
}

TEST(DeviceMultiDimTest, MapsToReduceScatterAllreduceAllgatherPerDimension) {
  // 6 GPUs per host x 3 hosts, 36 elements: 6 per rank after the host's reduce-scatter.
  EXPECT_EQ(calls({6, 3}, 36, DataType::kFloat32, ReduceOp::kSum),
            (std::vector<std::string>{"reduce_scatter:6:6", "allreduce:3:6", "allgather:6:6"}));
  // 2 x 2 x 3: two reduce-scatters in, the outermost allreduce, two allgathers out.
  EXPECT_EQ(calls({2, 2, 3}, 40, DataType::kFloat32, ReduceOp::kMax),
            (std::vector<std::string>{"reduce_scatter:2:20", "reduce_scatter:2:10",
                                      "allreduce:3:10", "allgather:2:10", "allgather:2:20"}));
  // 38 elements on 6 x 3: 36 through the rings, the last 2 through the whole job.
  EXPECT_EQ(calls({6, 3}, 38, DataType::kFloat32, ReduceOp::kSum),
            (std::vector<std::string>{"reduce_scatter:6:6", "allreduce:3:6", "allgather:6:6",
                                      "allreduce:18:2"}));
  // Fewer elements than GPUs per host: the whole job's allreduce only.
  EXPECT_EQ(calls({6, 3}, 5, DataType::kFloat32, ReduceOp::kSum),
            (std::vector<std::string>{"allreduce:18:5"}));
  // Integer averages: one allreduce on the whole job (exact truncation).
  EXPECT_EQ(calls({6, 3}, 36, DataType::kInt32, ReduceOp::kAvg),
            (std::vector<std::string>{"allreduce:18:36"}));
  // One dimension: its allreduce.
  EXPECT_EQ(calls({4}, 9, DataType::kFloat32, ReduceOp::kSum),
            (std::vector<std::string>{"allreduce:4:9"}));
}

/// An allreduce of 60 floats from `gpu` (GPU memory) into `host` (host memory) is refused.
void expect_mixed_buffers_refused(Communicator& c, const float* gpu, float* host) {
  try {
    c.allreduce(gpu, host, 60, DataType::kFloat32, ReduceOp::kSum);
    ADD_FAILURE() << "mixed buffers were accepted";
  } catch (const ArgumentError& e) {
    EXPECT_STREQ(e.what(),
                 "allreduce: one buffer is GPU memory and another is host memory; pass both on "
                 "the GPU or both in host memory");
  }
}

/// One rank of GpuBuffersGoToTheDeviceRuntimeAndHostBuffersDoNot: an allreduce on host memory
/// (then rank 0 takes the device's log into `first_calls`), every collective on "GPU" buffers,
/// and an allreduce with one buffer of each.
void every_collective_on_gpu(Communicator& c, FakeDevice& dev, std::mutex& logs_mutex,
                             std::vector<std::string>& first_calls) {
  const int n = c.size(), r = c.rank();
  // Host memory: the host transports, no NCCL call.
  std::vector<float> host(100, static_cast<float>(r));
  c.allreduce(host.data(), host.data(), host.size(), DataType::kFloat32, ReduceOp::kSum);
  EXPECT_EQ(host[99], 15.0f);
  c.barrier();
  if (r == 0) {
    std::lock_guard lock(logs_mutex);
    first_calls = dev.log.take();
  }
  c.barrier();

  // "GPU" memory: NCCL's multi-dimensional allreduce (2 x 3 rings), out of place.
  std::vector<float> gsend(60, static_cast<float>(r + 1)), grecv(60, -1.0f);
  dev.on_device(gsend.data());
  dev.on_device(grecv.data());
  c.allreduce(gsend.data(), grecv.data(), 60, DataType::kFloat32, ReduceOp::kSum);
  for (float x : grecv)
    ASSERT_EQ(x, 21.0f);
  EXPECT_EQ(gsend[0], static_cast<float>(r + 1));  // out of place: the input is untouched

  std::vector<int32_t> b(7, r == 4 ? 42 : 0);
  dev.on_device(b.data());
  c.broadcast(b.data(), b.size(), DataType::kInt32, 4);
  EXPECT_EQ(b, std::vector<int32_t>(7, 42));

  std::vector<int64_t> mine(3, r), all(3 * n, -1);
  dev.on_device(mine.data());
  dev.on_device(all.data());
  c.allgather(mine.data(), all.data(), 3, DataType::kInt64);
  for (int m = 0; m < n; ++m)
    EXPECT_EQ(all[3 * m + 2], m);

  std::vector<double> rs_in(2 * n), rs_out(2);
  for (int i = 0; i < 2 * n; ++i)
    rs_in[i] = i;
  dev.on_device(rs_in.data());
  dev.on_device(rs_out.data());
  c.reduce_scatter(rs_in.data(), rs_out.data(), 2, DataType::kFloat64, ReduceOp::kSum);
  EXPECT_EQ(rs_out[1], static_cast<double>(n * (2 * r + 1)));

  std::vector<float> a(5, 1.0f), bb(9, 2.0f);
  dev.on_device(a.data());
  dev.on_device(bb.data());
  void* bufs[] = {a.data(), bb.data()};
  const size_t counts[] = {5, 9};
  c.allreduce_n(bufs, counts, 2, DataType::kFloat32, ReduceOp::kAvg);
  EXPECT_EQ(a[4], 1.0f);
  EXPECT_EQ(bb[8], 2.0f);

  expect_mixed_buffers_refused(c, gsend.data(), host.data());
}

/// The joins and the NCCL calls of GpuBuffersGoToTheDeviceRuntimeAndHostBuffersDoNot.
void expect_joins_and_calls_of_every_collective(FakeDevice& dev) {
  // Every rank joined the job's communicator and one per dimension, on its GPU (the topology
  // has none, so its local rank).
  std::vector<std::string> joins = dev.joins();
  EXPECT_EQ(joins.size(), 18u);
  EXPECT_EQ(std::count(joins.begin(), joins.end(), "fake-0 rank 0/6 gpu 0"), 1);
  EXPECT_EQ(std::count_if(joins.begin(), joins.end(),
                          [](const std::string& j) { return j.find(" rank 1/2 gpu 1") != j.npos; }),
            3);
  // Rank 0's calls: 60 floats on 2 x 3 = reduce-scatter 30 on the host ring, allreduce on the
  // ring of hosts, allgather back; then broadcast, allgather, reduce-scatter on the job's
  // communicator and allreduce_n as two allreduces (5 and 9 elements: below the 64-byte
  // threshold, so the job's communicator).
  std::vector<std::string> log = dev.log.take();
  EXPECT_EQ(std::count(log.begin(), log.end(), "reduce_scatter:2:30"), 6);
  EXPECT_EQ(std::count(log.begin(), log.end(), "allreduce:3:30"), 6);
  EXPECT_EQ(std::count(log.begin(), log.end(), "allgather:2:30"), 6);
  EXPECT_EQ(std::count(log.begin(), log.end(), "broadcast:6:7"), 6);
  EXPECT_EQ(std::count(log.begin(), log.end(), "allgather:6:3"), 6);
  EXPECT_EQ(std::count(log.begin(), log.end(), "reduce_scatter:6:2"), 6);
  EXPECT_EQ(std::count(log.begin(), log.end(), "allreduce:6:5"), 6);
  EXPECT_EQ(std::count(log.begin(), log.end(), "allreduce:6:9"), 6);
  EXPECT_EQ(log.size(), 48u);
}

TEST(DeviceCommunicatorTest, GpuBuffersGoToTheDeviceRuntimeAndHostBuffersDoNot) {
  auto dev = std::make_shared<FakeDevice>();
  const Topology t = grid(2, 3, "job-device-" + std::to_string(getpid()));
  CommOptions o = fast();
  o.device = dev;
  o.small_bytes = 64;
  std::mutex logs_mutex;
  std::vector<std::string> first_calls;
  run_ranks(6, t, o,
            [&](Communicator& c) { every_collective_on_gpu(c, *dev, logs_mutex, first_calls); });
  EXPECT_EQ(first_calls, std::vector<std::string>{});
  expect_joins_and_calls_of_every_collective(*dev);
}

TEST(DeviceCommunicatorTest, DeviceErrorsReachTheCaller) {
  /// A device whose join fails on every member (after all have come, as NCCL's would).
  class Failing : public FakeDevice {
   public:
    std::unique_ptr<Comm> join(const std::string&, int size, int rank, int gpu,
                               std::chrono::milliseconds) override {
      all_.arrive_and_wait();
      throw device::DeviceError("rank " + std::to_string(rank) + " of an NCCL ring of " +
                                std::to_string(size) + " on GPU " + std::to_string(gpu) +
                                ": ncclCommInitRankConfig: not every member joined");
    }

   private:
    std::barrier<> all_{2};
  };
  auto dev = std::make_shared<Failing>();
  CommOptions o = fast();
  o.device = dev;
  std::vector<std::string> errors(2);
  run_ranks(2, std::nullopt, o, [&](Communicator& c) {
    std::vector<float> v(4);
    dev->on_device(v.data());
    try {
      c.allreduce(v.data(), v.data(), 4, DataType::kFloat32, ReduceOp::kSum);
    } catch (const device::DeviceError& e) {
      errors[c.rank()] = e.what();
    }
  });
  EXPECT_EQ(errors[0],
            "rank 0 of an NCCL ring of 2 on GPU 0: ncclCommInitRankConfig: not every member "
            "joined");
  EXPECT_EQ(errors[1],
            "rank 1 of an NCCL ring of 2 on GPU 1: ncclCommInitRankConfig: not every member "
            "joined");
}

TEST(DeviceCommunicatorTest, MismatchesAreCaughtBeforeNcclIsCalled) {
  // Rank 1 passes another count on the GPU, then (a new job) host memory where rank 0 passes
  // GPU memory: both fail on both ranks with the same text, and NCCL is never called.
  auto dev = std::make_shared<FakeDevice>();
  CommOptions o = fast();
  o.device = dev;
  const std::string tail =
      " (every rank must make the same calls in the same order; this communicator now fails "
      "every call)";
  for (bool host_on_rank_1 : {false, true}) {
    std::vector<std::string> errors(2);
    run_ranks(2, std::nullopt, o, [&](Communicator& c) {
      std::vector<float> v(5);
      if (c.rank() == 0 || !host_on_rank_1) dev->on_device(v.data());
      const size_t count = c.rank() == 1 && !host_on_rank_1 ? 5 : 4;
      try {
        c.allreduce(v.data(), v.data(), count, DataType::kFloat32, ReduceOp::kSum);
      } catch (const MismatchError& e) {
        errors[c.rank()] = e.what();
      }
    });
    const std::string want =
        host_on_rank_1
            ? "collective mismatch: rank 0 called allreduce(count=4, float32, sum, "
              "algorithm=nccl on GPU memory) #1 but rank 1 called allreduce(count=4, float32, "
              "sum, algorithm=shm) #1"
            : "collective mismatch: rank 0 called allreduce(count=4, float32, sum) #1 but rank "
              "1 called allreduce(count=5, float32, sum) #1";
    EXPECT_EQ(errors[0], want + tail);
    EXPECT_EQ(errors[1], want + tail);
  }
  EXPECT_EQ(dev->log.take(), std::vector<std::string>{});
}

/// What ArgumentError `call` throws, "(accepted)" when it throws none.
std::string refusal(const std::function<void()>& call) {
  try {
    call();
  } catch (const ArgumentError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(DeviceCommunicatorTest, ReductionsNcclLacksAreRefusedBeforeItIsCalled) {
  // NCCL has no int16/uint16 and no bitwise ops: refused on every rank before any call, the
  // communicator still usable; int16 still moves (broadcast) and bool's bor runs as a max.
  auto dev = std::make_shared<FakeDevice>();
  CommOptions o = fast();
  o.device = dev;
  std::vector<std::vector<std::string>> texts(2);
  std::vector<std::vector<uint8_t>> flags(2);
  run_ranks(2, std::nullopt, o, [&](Communicator& c) {
    std::vector<int16_t> s(4, static_cast<int16_t>(c.rank() == 1 ? -7 : 0));
    std::vector<int32_t> w(4, 1);
    std::vector<uint8_t> b{0, 1, static_cast<uint8_t>(c.rank()), 0, 1, 0};
    for (void* p :
         {static_cast<void*>(s.data()), static_cast<void*>(w.data()), static_cast<void*>(b.data())})
      dev->on_device(p);
    void* bufs[] = {w.data()};
    const size_t counts[] = {4};
    auto& t = texts[c.rank()];
    t.push_back(
        refusal([&] { c.allreduce(s.data(), s.data(), 4, DataType::kInt16, ReduceOp::kSum); }));
    t.push_back(
        refusal([&] { c.allreduce_n(bufs, counts, 1, DataType::kInt32, ReduceOp::kBand); }));
    t.push_back(refusal(
        [&] { c.reduce_scatter(b.data(), b.data(), 3, DataType::kBool, ReduceOp::kBxor); }));
    c.broadcast(s.data(), 4, DataType::kInt16, 1);
    EXPECT_EQ(s, std::vector<int16_t>(4, -7));
    c.allreduce(b.data(), b.data(), 6, DataType::kBool, ReduceOp::kBor);
    flags[c.rank()] = b;
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(texts[r], (std::vector<std::string>{
                            "allreduce: GPU buffers of int16: NCCL has no int16 reduction (pass "
                            "host memory, or int32 on the GPU)",
                            "allreduce_n: GPU buffers: NCCL has no bitwise reduction band for "
                            "int32 (pass host memory)",
                            "reduce_scatter: GPU buffers: NCCL has no bitwise reduction bxor for "
                            "bool (pass host memory)"}));
    EXPECT_EQ(flags[r], (std::vector<uint8_t>{0, 1, 1, 0, 1, 0}));
  }
  EXPECT_EQ(dev->log.take(), (std::vector<std::string>{"broadcast:2:4", "broadcast:2:4",
                                                       "allreduce:2:6", "allreduce:2:6"}));
}

TEST(DeviceRuntimeTest, TheTopologysGpuAsCudaSeesIt) {
  EXPECT_EQ(device::visible_device(3, nullptr), 3);
  EXPECT_EQ(device::visible_device(3, ""), 3);
  EXPECT_EQ(device::visible_device(3, "3"), 0);      // jsrun/srun: the rank's own GPU
  EXPECT_EQ(device::visible_device(3, "2,3,5"), 1);  // a subset that holds it
  EXPECT_EQ(device::visible_device(4, "1"), 0);      // one GPU, whatever its number
  EXPECT_EQ(device::visible_device(4, "0,1"), 4);    // not in the list: left to CUDA's error
}

TEST(DeviceRuntimeTest, NcclLoadsOrSaysWhyNot) {
  std::string why;
  std::shared_ptr<device::Runtime> nccl = device::load_nccl(&why);
  if (nccl != nullptr) {
    EXPECT_EQ(nccl->describe().rfind("nccl ", 0), 0u) << nccl->describe();
    int host = 0;
    EXPECT_FALSE(nccl->is_device_pointer(&host));
    EXPECT_EQ(nccl->new_id().size(), nccl->id_bytes());
    return;
  }
  // No GPU here (CI): the reason names what is missing.
  EXPECT_TRUE(why.find("no GPU") != why.npos || why.find("could not be loaded") != why.npos ||
              why.find("built without the NCCL path") != why.npos || why == "$DDL_NCCL is 0")
      << why;
}

}  // namespace
}  // namespace ddl::comm
