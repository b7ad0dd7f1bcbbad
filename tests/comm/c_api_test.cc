// The C API's group handles and argument checks in a job of one rank (DDL_ALLOW_SINGLE=1):
// the world group, a group of one, destroyed, NULL and earlier sessions' handles refused with
// their exact texts, messages to a bad peer, calls before ddl_init(), ddl_alloc/ddl_free, and
// the reductions a type does not take.

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "ddl/ddl.h"
#include "ddl/ddl.hpp"

namespace {

class CApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"DDL_RANK", "OMPI_COMM_WORLD_RANK", "JSM_NAMESPACE_RANK", "SLURM_PROCID",
                          "PMI_RANK", "PMIX_NAMESPACE"}) {
      if (std::getenv(v) != nullptr) GTEST_SKIP() << v << " is set";
    }
    setenv("DDL_ALLOW_SINGLE", "1", 1);
  }
  void TearDown() override {
    if (ddl_initialized()) ddl_finalize();
    unsetenv("DDL_ALLOW_SINGLE");
  }
};

const std::string kNotLive =
    ": not a live group (NULL, destroyed, or made before ddl_finalize()); a rank that "
    "ddl_group_create() left out gets NULL and must not call the group's collectives";

TEST_F(CApiTest, BeforeInitEveryGroupCallSaysSo) {
  EXPECT_EQ(ddl_group_world(), nullptr);
  EXPECT_EQ(ddl_group_barrier(nullptr), DDL_ERR_STATE);
  EXPECT_STREQ(ddl_last_error(), "ddl_group_barrier: call ddl_init() first");
  int x = 0;
  EXPECT_EQ(ddl_send(&x, 1, DDL_INT32, 0, 0), DDL_ERR_STATE);
  EXPECT_STREQ(ddl_last_error(), "ddl_send: call ddl_init() first");
  EXPECT_EQ(ddl_recv_any(&x, 1, DDL_INT32, 0, nullptr), DDL_ERR_STATE);
  EXPECT_STREQ(ddl_last_error(), "ddl_recv_any: call ddl_init() first");
  ddl_group_t g = nullptr;
  EXPECT_EQ(ddl_group_create(&x, 1, &g), DDL_ERR_STATE);
  EXPECT_EQ(ddl_group_rank(nullptr), -1);
}

TEST_F(CApiTest, TheWorldAndAGroupOfOne) {
  ASSERT_EQ(ddl_init(), DDL_SUCCESS) << ddl_last_error();
  ddl_group_t world = ddl_group_world();
  ASSERT_NE(world, nullptr);
  EXPECT_EQ(ddl_group_size(world), 1);
  EXPECT_EQ(ddl_group_global_rank(world, 0), 0);
  EXPECT_EQ(ddl_group_global_rank(world, 1), -1);
  const int me = 0;
  ddl_group_t g = nullptr;
  ASSERT_EQ(ddl_group_create(&me, 1, &g), DDL_SUCCESS) << ddl_last_error();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(ddl_group_rank(g), 0);
  float in[3] = {1, 2, 3}, out[3] = {};
  EXPECT_EQ(ddl_group_allreduce(g, in, out, 3, DDL_FLOAT32, DDL_AVG), DDL_SUCCESS);
  EXPECT_EQ(out[2], 3);
  EXPECT_EQ(ddl_group_alltoall(g, in, out, 3, DDL_FLOAT32), DDL_SUCCESS);
  EXPECT_EQ(ddl_alltoall(in, out, 0, DDL_FLOAT32), DDL_SUCCESS);
  EXPECT_EQ(ddl_group_bcast(g, in, 3, DDL_FLOAT32, 1), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(), "broadcast: root 1 is not a rank of the group (0..0)");
  EXPECT_EQ(ddl_group_send(g, in, 3, DDL_FLOAT32, 0, 0), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(), "send: peer 0 is this rank; messages go to other ranks");
  EXPECT_EQ(ddl_recv(in, 3, DDL_FLOAT32, 3, 0), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(), "recv: peer 3 is not a rank (0..0)");
  int source = 7;
  EXPECT_EQ(ddl_group_recv_any(g, in, 3, DDL_FLOAT32, 0, &source), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "recv_any: this rank is alone in its group; there is no other rank to receive "
               "from");
  EXPECT_EQ(source, 7);
  EXPECT_EQ(ddl_group_set_timeout(g, 0.5), DDL_SUCCESS) << ddl_last_error();
  EXPECT_EQ(ddl_group_set_timeout(g, 0), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "ddl_group_set_timeout: 0 is not a timeout (seconds, more than 0)");
  EXPECT_EQ(ddl_group_set_timeout(world, 1), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "ddl_group_set_timeout: the world group keeps DDL_TIMEOUT; make a group of every "
               "rank with ddl_group_create() for a timeout of its own");
  EXPECT_EQ(ddl_group_destroy(g), DDL_SUCCESS);
  EXPECT_EQ(ddl_group_set_timeout(g, 1), DDL_ERR_ARGUMENT);
  EXPECT_EQ(ddl_last_error(), "ddl_group_set_timeout" + kNotLive);
  EXPECT_EQ(ddl_group_barrier(g), DDL_ERR_ARGUMENT);
  EXPECT_EQ(ddl_last_error(), "ddl_group_barrier" + kNotLive);
  EXPECT_EQ(ddl_group_destroy(g), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "ddl_group_destroy: not a live group (destroyed twice, or made before "
               "ddl_finalize())");
  EXPECT_EQ(ddl_group_destroy(world), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(), "ddl_group_destroy: the world group is ddl_finalize()'s");
  EXPECT_EQ(ddl_group_allgather(nullptr, in, out, 1, DDL_FLOAT32), DDL_ERR_ARGUMENT);
  EXPECT_EQ(ddl_last_error(), "ddl_group_allgather" + kNotLive);
}

TEST_F(CApiTest, BadListsAndAnEarlierSessionsGroup) {
  ASSERT_EQ(ddl_init(), DDL_SUCCESS) << ddl_last_error();
  const int others[] = {3};
  ddl_group_t g = reinterpret_cast<ddl_group_t>(1);
  EXPECT_EQ(ddl_group_create(others, 1, &g), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(), "group_create: 3 is not a rank (0..0)");
  EXPECT_EQ(ddl_group_create(others, 0, &g), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "ddl_group_create: needs at least one rank and a place for the group");
  const int me = 0;
  ASSERT_EQ(ddl_group_create(&me, 1, &g), DDL_SUCCESS);
  ASSERT_EQ(ddl_finalize(), DDL_SUCCESS);
  ASSERT_EQ(ddl_init(), DDL_SUCCESS);
  EXPECT_EQ(ddl_group_barrier(g), DDL_ERR_ARGUMENT);
  EXPECT_EQ(ddl_last_error(), "ddl_group_barrier" + kNotLive);
}

TEST_F(CApiTest, SharedBuffersWithoutInitAndTheirRefusals) {
  EXPECT_EQ(ddl_alloc(0), nullptr);
  EXPECT_STREQ(ddl_last_error(), "ddl_alloc: 0 bytes (ask for at least 1)");
  EXPECT_EQ(ddl_alloc(~size_t{0}), nullptr);
  EXPECT_EQ(std::string(ddl_last_error()).rfind("ddl_alloc: 18446744073709551615 bytes (", 0), 0u)
      << ddl_last_error();
  void* p = ddl_alloc(4096 * 3 + 1);
  ASSERT_NE(p, nullptr) << ddl_last_error();
  static_cast<char*>(p)[4096 * 3] = 7;
  EXPECT_EQ(ddl_free(p), DDL_SUCCESS);
  char text[32];
  std::snprintf(text, sizeof text, "%p", p);
  EXPECT_EQ(ddl_free(p), DDL_ERR_ARGUMENT);
  EXPECT_EQ(ddl_last_error(), std::string("ddl_free: ") + text +
                                  " is not a buffer from ddl_alloc (or it was freed already)");
  EXPECT_EQ(ddl_free(nullptr), DDL_SUCCESS);
  // In a job (of one) an allreduce on it works in place, and C++'s SharedBuffer frees it.
  ASSERT_EQ(ddl_init(), DDL_SUCCESS) << ddl_last_error();
  ddl::SharedBuffer<float> b(1000);
  b.data()[999] = 2.5f;
  ASSERT_EQ(ddl_allreduce(b.data(), b.data(), b.size(), DDL_FLOAT32, DDL_SUM), DDL_SUCCESS);
  EXPECT_EQ(b.span()[999], 2.5f);
  try {
    ddl::SharedBuffer<double> none(0);
    ADD_FAILURE() << "SharedBuffer(0) did not throw";
  } catch (const ddl::Error& e) {
    EXPECT_EQ(e.status(), DDL_ERR_ARGUMENT);
    EXPECT_STREQ(e.what(), "ddl_alloc: 0 bytes (ask for at least 1)");
  }
  try {
    ddl::SharedBuffer<double> huge(SIZE_MAX / 4);
    ADD_FAILURE() << "SharedBuffer(SIZE_MAX / 4) did not throw";
  } catch (const ddl::Error& e) {
    EXPECT_EQ(std::string(e.what()), "ddl::SharedBuffer: " + std::to_string(SIZE_MAX / 4) +
                                         " elements are more bytes than a size_t holds");
  }
}

TEST_F(CApiTest, ReductionsTheTypeDoesNotTakeAreRefusedWithTheirTexts) {
  ASSERT_EQ(ddl_init(), DDL_SUCCESS) << ddl_last_error();
  float f[2] = {1, 2};
  EXPECT_EQ(ddl_allreduce(f, f, 2, DDL_FLOAT32, DDL_BAND), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "allreduce: reduce op band is bitwise: it takes integer and bool types, not "
               "float32");
  bool b[3] = {true, false, true};
  void* buffers[] = {b};
  const size_t counts[] = {3};
  EXPECT_EQ(ddl_allreduce_n(buffers, counts, 1, DDL_BOOL, DDL_AVG), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "allreduce_n: reduce op avg does not take bool (on bool, sum and max are a "
               "logical or, prod and min a logical and)");
  double d[1] = {1};
  EXPECT_EQ(ddl_group_reduce_scatter(ddl_group_world(), d, d, 1, DDL_FLOAT64, DDL_BXOR),
            DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "reduce_scatter: reduce op bxor is bitwise: it takes integer and bool types, not "
               "float64");
  const int me = 0;
  ddl_group_t g = nullptr;  // a group's calls check the same
  ASSERT_EQ(ddl_group_create(&me, 1, &g), DDL_SUCCESS) << ddl_last_error();
  EXPECT_EQ(ddl_group_allreduce(g, b, b, 3, DDL_BOOL, DDL_AVG), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "allreduce: reduce op avg does not take bool (on bool, sum and max are a logical "
               "or, prod and min a logical and)");
  EXPECT_EQ(ddl_group_allreduce_n(g, buffers, counts, 1, DDL_FLOAT16, DDL_BOR), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "allreduce_n: reduce op bor is bitwise: it takes integer and bool types, not "
               "float16");
  EXPECT_EQ(ddl_group_reduce_scatter(g, f, f, 2, DDL_BFLOAT16, DDL_BAND), DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(),
               "reduce_scatter: reduce op band is bitwise: it takes integer and bool types, not "
               "bfloat16");
  EXPECT_EQ(ddl_group_destroy(g), DDL_SUCCESS);
  EXPECT_EQ(ddl_allreduce(f, f, 2, static_cast<ddl_datatype_t>(DDL_BOOL + 1), DDL_SUM),
            DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(), "ddl_allreduce: unknown data type");
  EXPECT_EQ(ddl_allreduce(f, f, 2, DDL_INT8, static_cast<ddl_op_t>(DDL_BXOR + 1)),
            DDL_ERR_ARGUMENT);
  EXPECT_STREQ(ddl_last_error(), "ddl_allreduce: unknown reduction");
  // What the types do take, in a job of one (the C++ layer's element types included).
  int16_t s[2] = {-3, 7};
  EXPECT_EQ(ddl_allreduce(s, s, 2, DDL_INT16, DDL_BXOR), DDL_SUCCESS) << ddl_last_error();
  EXPECT_EQ(ddl_allreduce(b, b, 3, DDL_BOOL, DDL_PROD), DDL_SUCCESS) << ddl_last_error();
  EXPECT_EQ(b[2], true);
  static_assert(ddl::datatype_of<int8_t>() == DDL_INT8 && ddl::datatype_of<bool>() == DDL_BOOL &&
                ddl::datatype_of<int16_t>() == DDL_INT16 &&
                ddl::datatype_of<uint16_t>() == DDL_UINT16);
}

}  // namespace
