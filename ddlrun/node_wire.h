#pragma once
// The wire format of per-node mode's rendezvous (rendezvous.h): a message is one type byte, a
// 4-byte field count and the fields, each a 4-byte length and its bytes (big-endian), at most
// kMaxMessage bytes in all.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddl::cli::wire {

enum Type : uint8_t {
  kHello = 1,  ///< magic, token, node rank, node count, job, host, inventory, round
  kWelcome,    ///< job id, job token, N, then node rank, host, address, inventory for each
  kPlan,       ///< digest, ddl port, master port
  kGo,         ///< ddl port, master port
  kHeartbeat,  ///< nothing
  kFail,       ///< what, status
  kDone,       ///< status, restartable ("1": failed by itself, or 0)
  kStop,       ///< node, host, what, status
  kEnd,        ///< status, final ("1": no restart), node ranks of the nodes lost
  kError,      ///< text
};

inline constexpr const char* kMagic = "DDLNODE2";
inline constexpr size_t kMaxMessage = size_t{64} << 20;

struct Message {
  int type = 0;
  std::vector<std::string> fields;
};

std::string encode(int type, const std::vector<std::string>& fields);

/// Takes one whole message off the front of `buffer`; nullopt while it is incomplete. Throws
/// std::runtime_error for a message over kMaxMessage or a malformed one.
std::optional<Message> take(std::string& buffer);

/// Appends what `fd` has to `buffer` (one read; call when poll says it is readable). False on
/// end of file or error.
bool fill(int fd, std::string& buffer);

/// Sends a whole message; false when the connection is gone.
bool send(int fd, int type, const std::vector<std::string>& fields);

/// The peer's address ("10.200.0.10"), "?" when unknown.
std::string peer_address(int fd);

/// `text` as a whole number, nullopt when it is not one.
std::optional<int> to_int(const std::string& text);

}  // namespace ddl::cli::wire
