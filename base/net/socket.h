#pragma once
// The socket chores every server and client of ours shares: listening, naming the peer,
// splitting "HOST:PORT", and reading with a deadline.

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace ddl::base::net {

/// A listening TCP socket and the port it listens on.
struct Listening {
  int fd = -1;  ///< -1 when it could not listen (errno says why)
  int port = 0;
  bool bad_address = false;  ///< the address to listen on is not a numeric IP address
};

/// A listening socket (non-blocking, close-on-exec, SO_REUSEADDR) on `address` (numeric IPv4
/// or IPv6; "": every address, IPv6 with IPv4 mapped, or IPv4 where there is no IPv6) and
/// `port` (0: any free one), with a queue of `backlog` connections.
Listening listen_tcp(const std::string& address, int port, int backlog);

/// The address `fd` is connected to ("10.200.0.10", "fe80::1"; IPv4 mapped into IPv6 as
/// IPv4), with ":PORT" when `with_port`; "?" when unknown. For reports.
std::string peer_address(int fd, bool with_port);
/// The address `fd` is bound to (accepted at), as peer_address() writes it.
std::string local_address(int fd, bool with_port);

/// "HOST:PORT" ("[v6]:PORT") split into host (without brackets) and port; nullopt when there
/// is no colon or no host.
std::optional<std::pair<std::string, std::string>> split_host_port(std::string_view endpoint);

/// Reads up to `n` bytes into `out` before `deadline`: how many came before the end of the
/// stream, an error or the deadline.
size_t read_upto(int fd, char* out, size_t n, std::chrono::steady_clock::time_point deadline);

}  // namespace ddl::base::net
