// Whom to blame (blame.h).

#include "launcher/blame.h"

#include <cstdlib>

namespace ddl::launcher {

namespace {

/// The peer P of "rank P (host): " ending just before `at` in `text`, or -1.
int peer_before(std::string_view text, size_t at) {
  if (at < 4 || text[at - 1] != ')') return -1;
  const size_t open = text.rfind(" (", at);
  if (open == std::string_view::npos) return -1;
  size_t digits = open;
  while (digits > 0 && text[digits - 1] >= '0' && text[digits - 1] <= '9')
    --digits;
  if (digits == open || digits < 5 || text.substr(digits - 5, 5) != "rank ") return -1;
  return std::atoi(std::string(text.substr(digits, open - digits)).c_str());
}

}  // namespace

void Blame::line(int rank, std::string_view text) {
  if (rank < 0) return;
  constexpr std::string_view kStall = "): no progress for ";
  if (size_t at = text.find(kStall); at != std::string_view::npos) {
    const int peer = peer_before(text, at + 1);
    if (peer < 0 || peer == rank) return;
    const size_t from = at + 3;
    const size_t end = text.find(" s", from);
    stalled_on_[rank] = {
        peer, std::string(text.substr(
                  from, end == std::string_view::npos ? std::string_view::npos : end + 2 - from))};
    return;
  }
  for (std::string_view closed :
       {"): the peer closed the link", "): the process has exited",
        "): it left the collective",  // libddl's shared-memory collectives
        "): the connection was closed by the peer", "): the connection was reset by the peer"}) {
    if (size_t at = text.find(closed); at != std::string_view::npos) {
      const int peer = peer_before(text, at + 1);
      if (peer >= 0 && peer != rank) closed_by_[rank] = peer;
      return;
    }
  }
}

Blame::Chain Blame::follow(int failed) const {
  // From the failed rank, follow the peer each rank's error names (a stall or a closed link;
  // a rank that left early ends the chain) to the rank that names no one.
  std::set<int> seen{failed};
  Chain chain{failed, {}, false};
  for (;;) {
    if (chain.end != failed && left_.count(chain.end) != 0) {
      chain.left = true;
      return chain;
    }
    int next;
    if (auto s = stalled_on_.find(chain.end); s != stalled_on_.end()) {
      next = s->second.peer;
      chain.stall = s->second.detail;
    } else if (auto c = closed_by_.find(chain.end); c != closed_by_.end()) {
      next = c->second;
    } else {
      return chain;
    }
    if (!seen.insert(next).second) return {-1, {}, false};
    chain.end = next;
  }
}

Culprit Blame::culprit(int failed) const {
  const Chain chain = follow(failed);
  if (chain.left) return {Culprit::Kind::kLeft, chain.end, {}};
  // A chain blames a stall only if it passes one.
  if (chain.end < 0 || chain.end == failed || chain.stall.empty()) return {};
  return {Culprit::Kind::kStalled, chain.end, chain.stall};
}

int Blame::end_of_chain(int failed) const {
  return follow(failed).end;
}

}  // namespace ddl::launcher
