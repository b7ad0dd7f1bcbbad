// The C++ layer (ddl.hpp) in a real job: a Group of the even ranks made by every rank, its
// collectives and messages (from any source too), and the job's alltoall and messages through
// Session, rank 0 receiving every other rank's from any source. Prints
// "rank R of N ok" (run_check.sh) or the first failure.
#include <cstdio>
#include <ddl/ddl.hpp>
#include <numeric>
#include <vector>

namespace {

int fail(int rank, const char* what) {
  std::fprintf(stderr, "rank %d: %s\n", rank, what);
  return 1;
}

}  // namespace

int main() {
  try {
    ddl::Session session;
    const int rank = session.rank(), size = session.size();
    std::vector<int> evens;
    for (int r = 0; r < size; r += 2)
      evens.push_back(r);
    ddl::Group group(evens);
    if (static_cast<bool>(group) != (rank % 2 == 0)) return fail(rank, "membership");
    if (group) {
      std::vector<double> x(3, rank);
      group.allreduce(std::span(x), DDL_MAX);
      if (x[2] != evens.back()) return fail(rank, "group allreduce");
      const std::vector<int32_t> all = group.allgather(std::span<const int32_t>(&rank, 1));
      if (all.back() != evens.back()) return fail(rank, "group allgather");
      if (group.size() > 1) {
        std::vector<int64_t> m(2, rank);
        if (group.rank() == 0) group.send(std::span<const int64_t>(m), 1, 4);
        if (group.rank() == 1) group.recv(std::span(m), 0, 4);
        if (group.rank() == 1 && m[1] != 0) return fail(rank, "group message");
      }
    }
    std::vector<int32_t> blocks(static_cast<size_t>(size));
    std::iota(blocks.begin(), blocks.end(), rank * size);
    const std::vector<int32_t> got = session.alltoall(std::span<const int32_t>(blocks));
    for (int j = 0; j < size; ++j)
      if (got[j] != j * size + rank) return fail(rank, "alltoall");
    int32_t token = rank;
    if (rank == 0 && size > 1) session.send(std::span<const int32_t>(&token, 1), size - 1);
    if (rank == size - 1 && size > 1) session.recv(std::span(&token, 1), 0);
    if (rank == size - 1 && size > 1 && token != 0) return fail(rank, "message");
    if (rank > 0) session.send(std::span<const int32_t>(&rank, 1), 0, 9);
    std::vector<int> seen(static_cast<size_t>(size), 0);
    for (int k = 1; rank == 0 && k < size; ++k) {
      const int from = session.recv_any(std::span(&token, 1), 9);
      if (from != token || seen[static_cast<size_t>(from)]++ != 0) return fail(rank, "recv_any");
    }
    session.barrier();
    std::printf("rank %d of %d ok\n", rank, size);
    return 0;
  } catch (const ddl::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
