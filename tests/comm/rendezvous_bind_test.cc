// Where libddl's rendezvous server listens (bind_address): the address given, as the kernel
// reports the listening socket in /proc/net/tcp and tcp6, or every address when none is given.

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "comm/bootstrap/bootstrap.h"

namespace ddl::comm {
namespace {

/// The local address ("0100007F" style hex, as the kernel writes it) of the socket listening on
/// `port` in /proc/net/`table`; "" when there is none.
std::string listening_address(const std::string& table, int port) {
  std::ifstream in("/proc/net/" + table);
  std::string line;
  char suffix[8];
  std::snprintf(suffix, sizeof suffix, ":%04X", port);
  while (std::getline(in, line)) {
    char local[64] = "", remote[64] = "", state[8] = "";
    if (std::sscanf(line.c_str(), " %*d: %63s %63s %7s", local, remote, state) != 3) continue;
    const std::string l(local);
    if (std::string(state) == "0A" && l.size() > 5 && l.substr(l.size() - 5) == suffix)
      return l.substr(0, l.size() - 5);
  }
  return "";
}

TEST(RendezvousBindTest, ListensOnTheAddressGivenOnly) {
  RendezvousServer server("token", 2, 0, {}, {}, "127.0.0.1");
  EXPECT_EQ(listening_address("tcp", server.port()), "0100007F");
  EXPECT_EQ(listening_address("tcp6", server.port()), "");
}

TEST(RendezvousBindTest, ListensOnEveryAddressWhenNoneIsGiven) {
  RendezvousServer server("token", 2);
  EXPECT_EQ(listening_address("tcp6", server.port()), "00000000000000000000000000000000");
}

TEST(RendezvousBindTest, RefusesANameWithWhatToGive) {
  try {
    RendezvousServer server("token", 2, 0, {}, {}, "localhost");
    FAIL() << "a host name was taken";
  } catch (const BootstrapError& e) {
    EXPECT_STREQ(e.what(), "rendezvous: 'localhost' is not a numeric IP address to listen on");
  }
}

}  // namespace
}  // namespace ddl::comm
