#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>

namespace ddl::launcher {

// Whom to blame when a rank fails because of another: libddl's errors name the peer a rank
// was waiting for, and whatever the program does with the error (prints it, raises it in
// Python) the text usually reaches its output:
//   "rank P (host): no progress for T s"            P stalled, or waits for someone who did
//   "rank P (host): the peer closed the link"       P left (or died)
//   "rank P (host): the process has exited"
//   "rank P (host): the connection was closed by the peer"   (TCP: P left or died)
// How it works: line() records, per rank, the peer its output named last. For a stall the
// names form chains (in a ring each rank waits for its predecessor): culprit() follows the
// chain from the failed rank to a rank that names no one, the one that stopped. Closed links
// are followed the same way (a rank that timed out waiting for a stalled one exits and closes
// its links, failing its other neighbours first): a chain that reaches a rank that exited
// with status 0 while the others still ran blames it; one that passes a stall blames the rank
// at its end.

/// What a failed rank's output says about its failure.
struct Culprit {
  enum class Kind { kNone, kLeft, kStalled };
  Kind kind = Kind::kNone;
  int rank = -1;       ///< the rank to blame (kLeft, kStalled)
  std::string detail;  ///< kStalled: "no progress for 5 s"
};

class Blame {
 public:
  /// One line of rank `rank`'s output.
  void line(int rank, std::string_view text);
  /// Rank `rank` exited with status 0 while other processes still ran.
  void left_early(int rank) { left_.insert(rank); }
  /// Rank `failed` named a peer that made no progress: its culprit may only show once the
  /// others' errors have come (supervise() waits a moment).
  bool stalled(int failed) const { return stalled_on_.count(failed) != 0; }
  /// Rank `failed`'s output named a peer (a stall or a closed link): its culprit may be further
  /// down a chain whose other links come with the other ranks' errors.
  bool names_peer(int failed) const { return stalled(failed) || closed_by_.count(failed) != 0; }
  /// The rank to blame for `failed`'s failure, when its output names one (kNone otherwise, or
  /// when the chain leads back to `failed`).
  Culprit culprit(int failed) const;
  /// The rank at the end of the chain of peers named from `failed` (`failed` itself when its
  /// output names no one, -1 on a cycle): when that rank failed too (killed, crashed), it is the
  /// cause of `failed`'s failure.
  int end_of_chain(int failed) const;

 private:
  struct Chain {
    int end;            ///< the rank the chain ends at; -1: a cycle
    std::string stall;  ///< the detail of the last stall on the way, "" when none
    bool left;          ///< it ends at a rank that left early
  };
  Chain follow(int failed) const;
  struct Named {
    int peer;
    std::string detail;
  };
  std::map<int, Named> stalled_on_;  ///< rank -> the peer it saw no progress from
  std::map<int, int> closed_by_;     ///< rank -> the peer whose link closed
  std::set<int> left_;
};

}  // namespace ddl::launcher
