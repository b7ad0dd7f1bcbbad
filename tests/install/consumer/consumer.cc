// The C++ layer from outside the ddlrun tree: the same allreduce as consumer.c, through
// ddl::Session; failures arrive as ddl::Error.
#include <cstdio>
#include <ddl/ddl.hpp>
#include <span>
#include <vector>

int main() {
  try {
    ddl::Session session;
    std::vector<float> x(4);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>((session.rank() + 1) * static_cast<int>(i + 1));
    session.allreduce(std::span(x), DDL_SUM);
    std::printf("rank %d of %d: %g %g %g %g\n", session.rank(), session.size(), x[0], x[1], x[2],
                x[3]);
  } catch (const ddl::Error& e) {
    std::fprintf(stderr, "consumer: %s (%s)\n", e.what(), ddl_error_string(e.status()));
    return 1;
  }
  return 0;
}
