// The transports over the real thing: TCP on this host's sockets and shared memory under
// /dev/shm, between threads and between forked processes; exchange() on top of both.

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <future>
#include <thread>
#include <vector>

#include "comm/transport/link.h"
#include "comm/transport/tcp/hello.h"

namespace ddl::comm::transport {
namespace {

using namespace std::chrono_literals;

const std::vector<size_t> kSizes = {0, 1, 7, 4096, (1u << 20) + 13, 64u << 20};

/// A job id no other test (or test run) uses.
std::string fresh_job() {
  static std::atomic<int> n{0};
  return "transport-test-" + std::to_string(getpid()) + "-" + std::to_string(n++);
}

std::string name_of(int rank) {
  return "rank " + std::to_string(rank) + " (test)";
}

/// Bytes that differ by rank, size and position (xorshift64, eight bytes a step).
std::vector<std::byte> pattern(int rank, size_t size) {
  std::vector<std::byte> v(size);
  uint64_t x = (static_cast<uint64_t>(rank) * 7919 + size) | 1;
  for (size_t i = 0; i < size; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v.data() + i, &x, std::min<size_t>(8, size - i));
  }
  return v;
}

struct Kind {
  std::string name;
  std::string device;  ///< "tcp" or "shm"
  int streams;         ///< DeviceOptions::streams
  std::unique_ptr<Device> (*make)(const DeviceOptions&);
  /// What connect() on the waiting side says when its peer never comes (0.3 s).
  std::string no_peer;
  /// What a receive says when the peer's process was killed.
  std::string killed;
};

std::ostream& operator<<(std::ostream& os, const Kind& k) {
  return os << k.name;
}

std::unique_ptr<Device> make(const Kind& kind, int rank, const std::string& job,
                             const std::string& token = "secret") {
  DeviceOptions o;
  o.rank = rank;
  o.job_id = job;
  o.token = token;
  o.streams = kind.streams;
  if (kind.device == "tcp") o.bind_address = "127.0.0.1";
  return kind.make(o);
}

/// Sends `size` bytes each way over `link` and checks what arrives; "" or what went wrong.
std::string check_exchange(Link& link, int rank, size_t size) {
  const auto send = pattern(rank, size);
  std::vector<std::byte> recv(size);
  exchange(&link, send, &link, recv, 10s);
  if (recv != pattern(link.peer(), size)) return "wrong bytes at size " + std::to_string(size);
  return "";
}

/// Runs `child` in a forked process and returns its exit status (or 128 + signal).
int wait_child(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// One line through a pipe.
void put_line(int fd, const std::string& s) {
  const std::string line = s + "\n";
  ASSERT_EQ(write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
}
std::string get_line(int fd) {
  std::string s;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n')
    s.push_back(c);
  return s;
}

/// Forks rank 1, which makes its device, trades addresses with rank 0 over pipes, connects and
/// runs `body` on its link; the child exits 0 when `body` returns "", else prints it and exits 1.
/// Returns the child's pid and, through `link`, rank 0's link to it.
pid_t fork_peer(const Kind& kind, const std::string& job, std::unique_ptr<Device>& device,
                std::unique_ptr<Link>& link, std::function<std::string(Link&)> body) {
  int to_child[2], to_parent[2];
  EXPECT_EQ(pipe(to_child), 0);
  EXPECT_EQ(pipe(to_parent), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 2;
    try {
      close(to_child[1]);
      close(to_parent[0]);
      auto d = make(kind, 1, job);
      const std::string me = d->address();
      const std::string line = me + "\n";
      if (write(to_parent[1], line.data(), line.size()) < 0) _exit(3);
      const std::string peer = get_line(to_child[0]);
      auto l = d->connect(0, name_of(0), peer, 10s);
      const std::string error = body(*l);
      if (!error.empty()) std::fprintf(stderr, "child: %s\n", error.c_str());
      rc = error.empty() ? 0 : 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
    }
    _exit(rc);
  }
  close(to_child[0]);
  close(to_parent[1]);
  device = make(kind, 0, job);
  const std::string peer = get_line(to_parent[0]);
  put_line(to_child[1], device->address());
  close(to_child[1]);
  close(to_parent[0]);
  link = device->connect(1, name_of(1), peer, 10s);
  return pid;
}

class TransportTest : public ::testing::TestWithParam<Kind> {
 protected:
  /// Two devices of this kind and a link each way, connected from two threads.
  void connect_pair() {
    const std::string job = fresh_job();
    a_ = make(GetParam(), 0, job);
    b_ = make(GetParam(), 1, job);
    auto other = std::async(std::launch::async,
                            [&] { return b_->connect(0, name_of(0), a_->address(), 5s); });
    la_ = a_->connect(1, name_of(1), b_->address(), 5s);
    lb_ = other.get();
  }

  std::unique_ptr<Device> a_, b_;
  std::unique_ptr<Link> la_, lb_;
};

TEST_P(TransportTest, ThreadsExchangeExactBytesAtEverySize) {
  connect_pair();
  EXPECT_EQ(la_->peer(), 1);
  EXPECT_EQ(lb_->peer_name(), "rank 0 (test)");
  for (size_t size : kSizes) {
    auto other = std::async(std::launch::async, [&] { return check_exchange(*lb_, 1, size); });
    EXPECT_EQ(check_exchange(*la_, 0, size), "");
    EXPECT_EQ(other.get(), "");
  }
}

TEST_P(TransportTest, ProcessesExchangeExactBytesAtEverySize) {
  std::unique_ptr<Device> device;
  std::unique_ptr<Link> link;
  const pid_t pid = fork_peer(GetParam(), fresh_job(), device, link, [](Link& l) {
    for (size_t size : kSizes) {
      const std::string error = check_exchange(l, 1, size);
      if (!error.empty()) return error;
    }
    return std::string();
  });
  for (size_t size : kSizes)
    EXPECT_EQ(check_exchange(*link, 0, size), "");
  EXPECT_EQ(wait_child(pid), 0);
}

TEST_P(TransportTest, OneWayTransfersAndEmptySides) {
  connect_pair();
  const auto data = pattern(0, 100'000);
  std::vector<std::byte> got(data.size());
  auto other = std::async(std::launch::async, [&] { exchange(nullptr, {}, lb_.get(), got, 5s); });
  exchange(la_.get(), data, nullptr, {}, 5s);
  other.get();
  EXPECT_EQ(got, data);
  exchange(nullptr, {}, nullptr, {}, 1ms);
}

TEST_P(TransportTest, RingOfFourThreadsSendsToNextAndReceivesFromPrevious) {
  const int n = 4;
  const std::string job = fresh_job();
  std::vector<std::unique_ptr<Device>> devices;
  for (int r = 0; r < n; ++r)
    devices.push_back(make(GetParam(), r, job));
  std::vector<std::future<std::string>> results;
  for (int r = 0; r < n; ++r) {
    results.push_back(std::async(std::launch::async, [&, r]() -> std::string {
      const int next = (r + 1) % n;
      const int prev = (r + n - 1) % n;
      auto to = devices[r]->connect(next, name_of(next), devices[next]->address(), 5s);
      auto from = devices[r]->connect(prev, name_of(prev), devices[prev]->address(), 5s);
      for (int round = 0; round < 5; ++round) {
        const size_t size = (1u << 20) + 13 * round;
        const auto send = pattern(r, size);
        std::vector<std::byte> recv(size);
        exchange(to.get(), send, from.get(), recv, 5s);
        if (recv != pattern(prev, size)) return "wrong bytes in round " + std::to_string(round);
      }
      return "";
    }));
  }
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(results[r].get(), "") << "rank " << r;
}

TEST_P(TransportTest, KilledPeerIsNamedWithinTheTimeout) {
  std::unique_ptr<Device> device;
  std::unique_ptr<Link> link;
  const pid_t pid = fork_peer(GetParam(), fresh_job(), device, link, [](Link& l) {
    const auto data = pattern(1, 1 << 20);
    exchange(&l, data, nullptr, {}, 5s);
    raise(SIGKILL);
    return std::string("not killed");
  });
  std::vector<std::byte> recv(64u << 20);
  const auto start = std::chrono::steady_clock::now();
  try {
    exchange(nullptr, {}, link.get(), recv, 5s);
    ADD_FAILURE() << "no error";
  } catch (const TransportError& e) {
    EXPECT_EQ(std::string(e.what()), GetParam().killed);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 4s);
  EXPECT_EQ(wait_child(pid), 128 + SIGKILL);
}

TEST_P(TransportTest, ExchangeTimeoutNamesThePeerWaitedFor) {
  connect_pair();
  std::vector<std::byte> recv(10);
  try {
    exchange(nullptr, {}, la_.get(), recv, 200ms);
    ADD_FAILURE() << "no timeout";
  } catch (const TransportError& e) {
    EXPECT_STREQ(e.what(), "rank 1 (test): no progress for 0.2 s");
  }
  // A send that cannot finish names the receiver.
  const std::vector<std::byte> big(64u << 20);
  try {
    exchange(lb_.get(), big, nullptr, {}, 200ms);
    ADD_FAILURE() << "no timeout";
  } catch (const TransportError& e) {
    EXPECT_STREQ(e.what(), "rank 0 (test): no progress for 0.2 s");
  }
}

TEST_P(TransportTest, ConnectTimeoutNamesThePeer) {
  auto d = make(GetParam(), 1, fresh_job());
  const auto start = std::chrono::steady_clock::now();
  try {
    d->connect(0, "rank 0 (nowhere)", GetParam().device == "tcp" ? "127.0.0.1:1" : "1", 300ms);
    ADD_FAILURE() << "connected";
  } catch (const TransportError& e) {
    EXPECT_EQ(std::string(e.what()), GetParam().no_peer);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST_P(TransportTest, ClosedPeerLinkIsAnError) {
  connect_pair();
  lb_.reset();
  std::vector<std::byte> recv(10);
  try {
    exchange(nullptr, {}, la_.get(), recv, 2s);
    ADD_FAILURE() << "no error";
  } catch (const TransportError& e) {
    EXPECT_EQ(std::string(e.what()), GetParam().device == "tcp"
                                         ? "rank 1 (test): the connection was closed by the peer"
                                         : "rank 1 (test): the peer closed the link");
  }
}

const std::string kTcpNoPeer =
    "rank 0 (nowhere): no connection from the peer within 0.3 s (is it running, with this job's "
    "token?)";
const std::string kTcpKilled = "rank 1 (test): the connection was closed by the peer";

INSTANTIATE_TEST_SUITE_P(
    Kinds, TransportTest,
    ::testing::Values(Kind{"tcp", "tcp", 1, make_tcp_device, kTcpNoPeer, kTcpKilled},
                      // Striped over 3 sockets (256 KiB stripes), so that stripes wrap unevenly.
                      Kind{"tcp3", "tcp", 3, make_tcp_device, kTcpNoPeer, kTcpKilled},
                      Kind{"shm", "shm", 1, make_shm_device,
                           "rank 0 (nowhere): no shared-memory segment from the peer within 0.3 s "
                           "(is it running on this host?)",
                           "rank 1 (test): the process has exited"}),
    [](const auto& info) { return info.param.name; });

// TCP only.

TEST(TcpHelloTest, Sha256MatchesKnownDigests) {
  auto hex = [](const tcp::Digest& d) {
    std::string s;
    char b[3];
    for (uint8_t x : d) {
      std::snprintf(b, sizeof b, "%02x", x);
      s += b;
    }
    return s;
  };
  EXPECT_EQ(hex(tcp::sha256("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex(tcp::sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(tcp::sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(tcp::sha256(std::string(1000, 'a'))),
            "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3");
}

TEST(TcpTest, WrongTokenIsRefusedAndTheAcceptorWaitsForTheRightPeer) {
  const std::string job = fresh_job();
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  o.job_id = job;
  o.rank = 1;
  o.token = "right";
  auto acceptor = make_tcp_device(o);
  auto waiting = std::async(std::launch::async,
                            [&] { return acceptor->connect(0, name_of(0), "unused", 5s); });
  o.rank = 0;
  o.token = "wrong";
  auto impostor = make_tcp_device(o);
  try {
    impostor->connect(1, name_of(1), acceptor->address(), 2s);
    ADD_FAILURE() << "the wrong token was accepted";
  } catch (const TransportError& e) {
    EXPECT_STREQ(e.what(),
                 "rank 1 (test): the peer refused this rank's hello (is the job token the same?)");
  }
  EXPECT_EQ(waiting.wait_for(100ms), std::future_status::timeout);
  o.token = "right";
  auto right = make_tcp_device(o);
  auto link = right->connect(1, name_of(1), acceptor->address(), 2s);
  auto accepted = waiting.get();
  const auto data = pattern(0, 1000);
  std::vector<std::byte> got(data.size());
  exchange(link.get(), data, accepted.get(), got, 2s);
  EXPECT_EQ(got, data);
}

TEST(TcpTest, OnlyAWrongTokenMeansTheAcceptorTimesOut) {
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  o.rank = 1;
  o.token = "right";
  auto acceptor = make_tcp_device(o);
  o.rank = 0;
  o.token = "wrong";
  auto impostor = make_tcp_device(o);
  auto waiting =
      std::async(std::launch::async, [&] { return acceptor->connect(0, name_of(0), "", 500ms); });
  EXPECT_THROW(impostor->connect(1, name_of(1), acceptor->address(), 2s), TransportError);
  try {
    waiting.get();
    ADD_FAILURE() << "connected";
  } catch (const TransportError& e) {
    EXPECT_STREQ(e.what(),
                 "rank 0 (test): no connection from the peer within 0.5 s (is it running, with "
                 "this job's token?)");
  }
}

/// What the process has spent on the CPU, in milliseconds.
long cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1000L + t.tv_nsec / 1'000'000L;
}

/// The child of AcceptorOutOfDescriptorsRestsThenAccepts: 0 when the acceptor rested while
/// no descriptor was left and challenged the queued connection once one freed.
int acceptor_out_of_descriptors() {
  DeviceOptions o;
  o.rank = 1;
  o.token = "t";
  o.bind_address = "127.0.0.1";
  auto d = make_tcp_device(o);
  const std::string a = d->address();
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(std::stoi(a.substr(a.rfind(':') + 1))));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = 64;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) return 3;
  std::vector<int> spare;
  for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;)
    spare.push_back(fd);
  if (spare.size() < 2) return 6;
  close(spare.back());
  const int client = socket(AF_INET, SOCK_STREAM, 0);  // the last descriptor
  if (client < 0 || connect(client, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return 4;
  const long before = cpu_ms();
  std::this_thread::sleep_for(1s);  // the connection waits in the queue, the acceptor rests
  if (cpu_ms() - before > 300) return 1;
  close(spare.front());  // a descriptor frees: the acceptor takes the connection and challenges it
  pollfd p{client, POLLIN, 0};
  char challenge[tcp::kChallengeSize];
  if (poll(&p, 1, 3000) != 1 || recv(client, challenge, sizeof challenge, MSG_WAITALL) !=
                                    static_cast<ssize_t>(sizeof challenge))
    return 2;
  return tcp::decode_challenge(std::string_view(challenge, sizeof challenge)) ? 0 : 5;
}

// A rank out of descriptors (a flood of connections, a low ulimit -n) cannot accept a queued
// connection: its acceptor leaves the listening socket alone for a moment each time (it spun
// on it, a core at 100%, for as long as no descriptor freed), and takes the connection after.
TEST(TcpTest, AcceptorOutOfDescriptorsRestsThenAccepts) {
  const pid_t pid = fork();  // in a child, so that this process keeps its descriptors and limit
  ASSERT_GE(pid, 0);
  if (pid == 0) _exit(acceptor_out_of_descriptors());
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "1: the acceptor spun on the CPU, 2: no challenge after a descriptor freed";
}

TEST(TcpTest, InitiatorTimeoutNamesThePeerAndTheAddress) {
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  auto d = make_tcp_device(o);
  try {
    d->connect(2, "rank 2 (nowhere)", "127.0.0.1:1", 300ms);
    ADD_FAILURE() << "connected";
  } catch (const TransportError& e) {
    EXPECT_STREQ(
        e.what(),
        "rank 2 (nowhere): cannot connect to 127.0.0.1:1 within 0.3 s: Connection refused");
  }
}

TEST(TcpTest, EarlyConnectionsWaitForTheirOwnConnectCall) {
  // Ranks 0 and 1 connect to rank 2 before it asks for either; it then asks from two threads,
  // in the other order.
  std::vector<std::unique_ptr<Device>> d;
  for (int r = 0; r < 3; ++r) {
    DeviceOptions o;
    o.rank = r;
    o.token = "t";
    o.bind_address = "127.0.0.1";
    d.push_back(make_tcp_device(o));
  }
  auto l0 = d[0]->connect(2, name_of(2), d[2]->address(), 2s);
  auto l1 = d[1]->connect(2, name_of(2), d[2]->address(), 2s);
  auto from1 = std::async(std::launch::async, [&] { return d[2]->connect(1, name_of(1), "", 2s); });
  auto from0 = std::async(std::launch::async, [&] { return d[2]->connect(0, name_of(0), "", 2s); });
  auto a = from0.get();
  auto b = from1.get();
  for (auto [sender, receiver, rank] : {std::tuple{l0.get(), a.get(), 0}, {l1.get(), b.get(), 1}}) {
    const auto data = pattern(rank, 5000);
    std::vector<std::byte> got(data.size());
    exchange(sender, data, receiver, got, 2s);
    EXPECT_EQ(got, data) << "from rank " << rank;
  }
}

TEST(TcpTest, AddressIsIpAndPort) {
  auto d = make_tcp_device(DeviceOptions{});
  const std::string a = d->address();
  const size_t colon = a.rfind(':');
  ASSERT_NE(colon, std::string::npos) << a;
  EXPECT_GT(std::stoi(a.substr(colon + 1)), 0);
  EXPECT_NE(a.substr(0, colon), "0.0.0.0");
}

TEST(TcpTest, BindAddressOfAnotherHostIsAnError) {
  DeviceOptions o;
  o.bind_address = "10.200.255.254";
  try {
    make_tcp_device(o);
    ADD_FAILURE() << "bound";
  } catch (const TransportError& e) {
    EXPECT_STREQ(e.what(),
                 "rank 0: cannot listen on '10.200.255.254': Cannot assign requested address (is "
                 "it an address of this host?)");
  }
}

TEST(TcpTest, SendingToAClosedPeerRaisesInsteadOfSigpipe) {
  DeviceOptions o;
  o.bind_address = "127.0.0.1";
  o.rank = 1;
  auto b = make_tcp_device(o);
  o.rank = 0;
  auto a = make_tcp_device(o);
  auto accepted = std::async(std::launch::async, [&] { return b->connect(0, name_of(0), "", 2s); });
  auto link = a->connect(1, name_of(1), b->address(), 2s);
  accepted.get().reset();
  const auto big = pattern(0, 64u << 20);
  try {
    exchange(link.get(), big, nullptr, {}, 2s);
    ADD_FAILURE() << "no error";
  } catch (const TransportError& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what == "rank 1 (test): the connection was closed by the peer" ||
                what == "rank 1 (test): the connection was reset by the peer")
        << what;
  }
}

// Shared memory only.

/// Entries of /dev/shm whose name contains `job`.
int shm_entries(const std::string& job) {
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d))
      n += std::strstr(e->d_name, job.c_str()) != nullptr;
    closedir(d);
  }
  return n;
}

TEST(ShmTest, NothingIsLeftInDevShm) {
  const std::string job = fresh_job();
  DeviceOptions o;
  o.job_id = job;
  o.rank = 0;
  auto a = make_shm_device(o);
  o.rank = 1;
  auto b = make_shm_device(o);
  auto la = a->connect(1, name_of(1), b->address(), 1s);
  EXPECT_EQ(shm_entries(job), 1);  // created, not yet attached
  auto lb = b->connect(0, name_of(0), a->address(), 1s);
  EXPECT_EQ(shm_entries(job), 0);
  // A segment its peer never attached to goes with the link.
  o.rank = 2;
  auto c = make_shm_device(o);
  auto lonely = a->connect(2, name_of(2), c->address(), 1s);
  EXPECT_EQ(shm_entries(job), 1);
  lonely.reset();
  EXPECT_EQ(shm_entries(job), 0);
}

TEST(ShmTest, SmallRingStillCarriesLargeTransfers) {
  const std::string job = fresh_job();
  DeviceOptions o;
  o.job_id = job;
  o.shm_bytes = 1000;  // 4 KiB
  auto a = make_shm_device(o);
  o.rank = 1;
  auto b = make_shm_device(o);
  auto la = a->connect(1, name_of(1), b->address(), 1s);
  auto lb = b->connect(0, name_of(0), a->address(), 1s);
  auto other = std::async(std::launch::async, [&] { return check_exchange(*lb, 1, 3'000'017); });
  EXPECT_EQ(check_exchange(*la, 0, 3'000'017), "");
  EXPECT_EQ(other.get(), "");
}

/// The one /dev/shm entry whose name contains `job`, with its leading slash ("" if not one).
std::string shm_entry(const std::string& job) {
  std::string found;
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::strstr(e->d_name, job.c_str()) == nullptr) continue;
      found = std::string("/") + e->d_name;
      ++n;
    }
    closedir(d);
  }
  return n == 1 ? found : "";
}

TEST(ShmTest, ASegmentAnotherUserOwnsIsNotJoined) {
  const std::string job = fresh_job();
  DeviceOptions o;
  o.job_id = job;
  auto a = make_shm_device(o);
  o.rank = 1;
  auto b = make_shm_device(o);
  auto la = a->connect(1, name_of(1), b->address(), 1s);
  const std::string name = shm_entry(job);
  ASSERT_NE(name, "");
  // As another user would have made it first (root here can give it away; others skip).
  if (chown(("/dev/shm" + name).c_str(), 65534, 65534) != 0) {
    GTEST_SKIP() << "cannot give " << name << " to uid 65534 (not root)";
  }
  try {
    b->connect(0, name_of(0), a->address(), 1s);
    ADD_FAILURE() << "joined";
  } catch (const TransportError& e) {
    EXPECT_EQ(std::string(e.what()),
              "rank 0 (test): the shared-memory segment " + name +
                  " belongs to uid 65534, not to this rank's uid " + std::to_string(geteuid()) +
                  ": another user of this host made a file of that name first; remove /dev/shm" +
                  name + " (as that user or root), or give the job another DDL_JOB_ID");
  }
}

TEST(ShmTest, BadAddressIsAnError) {
  auto d = make_shm_device(DeviceOptions{});
  try {
    d->connect(1, name_of(1), "10.0.0.1:5", 1s);
    ADD_FAILURE() << "connected";
  } catch (const TransportError& e) {
    EXPECT_STREQ(e.what(),
                 "rank 1 (test): '10.0.0.1:5' is not a shared-memory address (a process id)");
  }
}

}  // namespace
}  // namespace ddl::comm::transport
