#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/digest.h"
#include "base/net/codec.h"
#include "base/net/handshake.h"
#include "base/net/listener.h"

namespace ddl::base::net {
namespace {

using namespace std::chrono_literals;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

TEST(Codec, WritesBigEndianAndReadsItBack) {
  std::string out;
  put_u16(out, 0x0102);
  put_u32(out, 0x03040506);
  put_str(out, std::string("a\0b", 3));
  EXPECT_EQ(out, std::string("\x01\x02\x03\x04\x05\x06\0\0\0\x03"
                             "a\0b",
                             13));
  EXPECT_EQ(get_u32(out, 2), 0x03040506u);
  Decoder in(out, "test");
  EXPECT_EQ(in.u16(), 0x0102);
  EXPECT_EQ(in.i32(), 0x03040506);
  EXPECT_EQ(in.str(), std::string("a\0b", 3));
  EXPECT_TRUE(in.done());
}

TEST(Codec, RefusesShortLongAndOversizedInputNamingWhatItReads) {
  const std::string short_str(
      "\0\0\0\x09"
      "abc",
      7);
  EXPECT_EQ(error_of([&] { Decoder(short_str, "fence frame").str(); }),
            "malformed fence frame: truncated");
  EXPECT_EQ(error_of([] { Decoder(std::string("\0\0\0\x01x", 5), "frame").expect_done(); }),
            "malformed frame: trailing bytes");
  EXPECT_EQ(error_of([] { Decoder(std::string("\0\0\0\x03\0\0\0\0", 8), "job").count(4); }),
            "malformed job: a count of 3 exceeds the data");
}

TEST(InBuffer, TakesWholeMessagesOffTheFrontAndKeepsTheRest) {
  InBuffer in;
  in.add("abcdef");
  in.take(2);
  EXPECT_EQ(in.pending(), "cdef");
  in.add("gh");
  in.take(5);
  EXPECT_EQ(in.pending(), "h");
  EXPECT_EQ(in.take_rest(), "h");
  EXPECT_EQ(in.pending(), "");
}

TEST(FieldsReader, ReadsMessagesAByteAtATime) {
  const std::string bytes = encode(7, {"one", "", "three"}) + encode(2, {});
  FieldsReader r(1024, 8);
  std::vector<Fields> got;
  for (char c : bytes) {
    r.add(std::string_view(&c, 1));
    while (auto m = r.take())
      got.push_back(*m);
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].type, 7);
  EXPECT_EQ(got[0].fields, (std::vector<std::string>{"one", "", "three"}));
  EXPECT_EQ(got[1].type, 2);
  EXPECT_TRUE(got[1].fields.empty());
}

TEST(FieldsReader, RefusesACountOrALengthPastItsLimitsBeforeTheBytesCome) {
  FieldsReader many(1024, 4);
  many.add(encode(1, std::vector<std::string>(5)).substr(0, 5));
  EXPECT_EQ(error_of([&] { many.take(); }), "a message with 5 fields");
  FieldsReader big(2048, 4);
  std::string head(1, '\1');
  put_u32(head, 1);
  put_u32(head, 4096);
  big.add(head);
  EXPECT_EQ(error_of([&] { big.take(); }), "a message over 2 KiB");
  EXPECT_EQ(FieldsReader(2048, 4).room(), 2048u + 8);
}

TEST(FieldsReader, FillsFromASocketAndSendsWholeMessages) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(send(sv[0], 3, {"x"}));
  ASSERT_TRUE(send_now(sv[0], 4, {"y", "z"}));
  FieldsReader r(1024, 4);
  std::vector<Fields> got;
  while (got.size() < 2 && fill(sv[1], r))
    while (auto m = r.take())
      got.push_back(*m);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].fields, (std::vector<std::string>{"y", "z"}));
  close(sv[0]);
  EXPECT_FALSE(fill(sv[1], r));
  close(sv[1]);
}

TEST(Handshake, AProofIsTheHmacOfLabelAndContextAndNothingElseProvesIt) {
  const std::string n = nonce();
  EXPECT_EQ(n.size(), kNonceSize);
  EXPECT_NE(n, nonce());
  const std::string p = proof("secret", "label: ", n);
  EXPECT_EQ(p, bytes(hmac_sha256("secret", "label: " + n)));
  EXPECT_TRUE(proves(p, "secret", "label: ", n));
  EXPECT_FALSE(proves(p, "other", "label: ", n));
  EXPECT_FALSE(proves(p, "secret", "other: ", n));
  EXPECT_FALSE(proves(p, "secret", "label: ", nonce()));
  EXPECT_FALSE(proves(p.substr(1), "secret", "label: ", n));
}

TEST(Handshake, TheMagicIsCheckedAsTheBytesCome) {
  EXPECT_TRUE(may_speak("", "DDLRV2"));
  EXPECT_TRUE(may_speak("DDL", "DDLRV2"));
  EXPECT_TRUE(may_speak("DDLRV2 and more", "DDLRV2"));
  EXPECT_FALSE(may_speak("G", "DDLRV2"));
  EXPECT_FALSE(may_speak("DDLRV1", "DDLRV2"));
  EXPECT_EQ(after_magic("MAGICxyz", "MAGIC", 8).value_or("-"), "xyz");
  EXPECT_FALSE(after_magic("MAGICxy", "MAGIC", 8));
  EXPECT_FALSE(after_magic("MAGECxyz", "MAGIC", 8));
}

GuardLimits limits(size_t max_waiting, std::chrono::milliseconds grace,
                   std::chrono::milliseconds hello_time) {
  GuardLimits l;
  l.max_waiting = max_waiting;
  l.grace = grace;
  l.hello_time = hello_time;
  l.max_reports = 2;
  return l;
}

TEST(ListenerGuard, ClosesTheOldestOnlyOnceItHadItsGraceAndSaysSoOnce) {
  std::vector<std::string> told;
  ListenerGuard g(limits(2, 50ms, 10s), [&](const std::string& l) { told.push_back(l); });
  g.name("server", 7, "peers", "peers");
  EXPECT_TRUE(g.arrive(1).empty());
  EXPECT_TRUE(g.arrive(2).empty());
  EXPECT_GT(g.room_at(), ListenerGuard::Clock::now());  // full: the listener waits
  EXPECT_TRUE(g.arrive(3).empty());                     // the oldest is within its grace
  std::this_thread::sleep_for(60ms);
  EXPECT_LE(g.room_at(), ListenerGuard::Clock::now());
  EXPECT_EQ(g.arrive(4), (std::vector<ListenerGuard::Id>{1, 2}));
  std::this_thread::sleep_for(60ms);
  EXPECT_EQ(g.arrive(5), (std::vector<ListenerGuard::Id>{3}));
  EXPECT_EQ(told, (std::vector<std::string>{
                      "server: more than 2 connections have not said hello; closing the oldest "
                      "(is something other than peers connecting to port 7?)"}));
  g.settled(4);
  EXPECT_EQ(g.waiting(), 1u);
  EXPECT_EQ(g.room_at(), ListenerGuard::Clock::time_point{});
}

TEST(ListenerGuard, GivesBackTheConnectionsPastTheirHelloTime) {
  ListenerGuard g(limits(8, 0ms, 30ms));
  g.arrive(1);
  g.arrive(2);
  g.settled(1);
  EXPECT_TRUE(g.overdue().empty());
  EXPECT_LE(g.next_due(), ListenerGuard::Clock::now() + 30ms);
  std::this_thread::sleep_for(40ms);
  EXPECT_EQ(g.overdue(), (std::vector<ListenerGuard::Id>{2}));
  EXPECT_EQ(g.waiting(), 0u);
}

TEST(ListenerGuard, ReportsTheFirstRefusalsThenOneLineMore) {
  std::vector<std::string> told;
  ListenerGuard g(limits(8, 0ms, 1s), [&](const std::string& l) { told.push_back(l); });
  g.name("server", 7, "peers", "this job's peers");
  for (const char* line : {"a", "b", "c", "d"})
    g.refused(line);
  EXPECT_EQ(told, (std::vector<std::string>{
                      "a", "b",
                      "server: more refused connections are not shown (is something other than "
                      "this job's peers connecting to port 7?)"}));
}

TEST(ListenerGuard, ServersShareOneSetOfLimits) {
  const GuardLimits l;
  EXPECT_EQ(l.max_waiting, 32u);
  EXPECT_EQ(l.grace, 200ms);
  EXPECT_EQ(l.max_reports, 10);
}

TEST(Socket, JoinsHostAndPortWithAnIpv6AddressInBrackets) {
  EXPECT_EQ(join_host_port("node1", 29500), "node1:29500");
  EXPECT_EQ(join_host_port("10.200.3.2", 22), "10.200.3.2:22");
  EXPECT_EQ(join_host_port("fe80::1", 22), "[fe80::1]:22");
  EXPECT_EQ(join_host_port("[fe80::1]", 22), "[fe80::1]:22");
  EXPECT_EQ(split_host_port(join_host_port("fe80::1", 5)),
            std::make_optional(std::pair<std::string, std::string>{"fe80::1", "5"}));
}

TEST(Socket, SplitsHostAndPortAndRefusesWhatIsNotOne) {
  using Split = std::optional<std::pair<std::string, std::string>>;
  EXPECT_EQ(split_host_port("node1:29500"), Split({"node1", "29500"}));
  EXPECT_EQ(split_host_port("[fe80::1]:5"), Split({"fe80::1", "5"}));
  EXPECT_EQ(split_host_port("fe80::1:5"), Split({"fe80::1", "5"}));
  EXPECT_EQ(split_host_port("host:"), Split({"host", ""}));
  EXPECT_EQ(split_host_port("node1"), std::nullopt);
  EXPECT_EQ(split_host_port(":5"), std::nullopt);
}

TEST(Socket, ListensNamesBothEndsAndReadsUntilItsDeadline) {
  const Listening l = listen_tcp("127.0.0.1", 0, 4);
  ASSERT_GE(l.fd, 0);
  ASSERT_GT(l.port, 0);
  const int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(l.port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(c, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  EXPECT_EQ(peer_address(c, true), "127.0.0.1:" + std::to_string(l.port));
  EXPECT_EQ(local_address(l.fd, false), "127.0.0.1");
  ASSERT_EQ(write(c, "abc", 3), 3);
  int a = -1;
  for (int i = 0; i < 100 && a < 0; ++i, std::this_thread::sleep_for(10ms))
    a = accept4(l.fd, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(a, 0);
  char buf[8];
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(read_upto(a, buf, sizeof buf, start + 100ms), 3u);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 100ms);
  EXPECT_EQ(std::string(buf, 3), "abc");
  for (int fd : {a, c, l.fd})
    close(fd);
}

TEST(Socket, SaysWhenTheAddressIsNoNumericAddressOrNotThisHosts) {
  EXPECT_TRUE(listen_tcp("localhost", 0, 4).bad_address);
  const Listening l = listen_tcp("10.200.255.254", 0, 4);
  EXPECT_EQ(l.fd, -1);
  EXPECT_FALSE(l.bad_address);
  EXPECT_EQ(errno, EADDRNOTAVAIL);
}

}  // namespace
}  // namespace ddl::base::net
