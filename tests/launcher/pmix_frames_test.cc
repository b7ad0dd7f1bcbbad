#include <gtest/gtest.h>

#include "launcher/ssh/protocol.h"

namespace ddl::launcher::ssh {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int c : b)
    s.push_back(static_cast<char>(c));
  return s;
}

TEST(PmixFramesTest, FenceFrameBytesAndRoundTrip) {
  const FenceFrame f{"*#0", {1, 3}, 5, std::string("a\0b", 3)};
  const std::string e = encode(f);
  EXPECT_EQ(e, bytes({0, 0, 0, 3, '*', '#', '0', 0, 0, 0, 2, 0, 0,   0, 1,
                      0, 0, 0, 3, 0,   0,   0,   5, 0, 0, 0, 3, 'a', 0, 'b'}));
  EXPECT_EQ(decode_fence(e), f);
  EXPECT_EQ(decode_fence(encode(FenceFrame{})), FenceFrame{});
}

TEST(PmixFramesTest, OtherFramesRoundTrip) {
  const FenceResultFrame r{"0,2#4", -24, "data", "why"};
  EXPECT_EQ(decode_fence_result(encode(r)), r);
  const AbortFrame a{7, "rank 3 gives up"};
  EXPECT_EQ(decode_abort(encode(a)), a);
  EXPECT_EQ(encode(AbortFrame{-1, ""}), bytes({0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}));
  const ModexRequest q{2, 5};
  EXPECT_EQ(decode_modex_request(encode(q)), q);
  const ModexResponse p{1, -46, std::string(70000, 'x')};
  EXPECT_EQ(decode_modex_response(encode(p)), p);
}

TEST(PmixFramesTest, TheNewTypesPassTheFrameReader) {
  FrameReader reader;
  const std::string stream =
      encode_frame(FrameType::kFence, 1, encode(FenceFrame{"*#0", {}, 0, "d"})) +
      encode_frame(FrameType::kFenceResult, 0, encode(FenceResultFrame{})) +
      encode_frame(FrameType::kAbort, 3, encode(AbortFrame{7, "m"})) +
      encode_frame(FrameType::kModexRequest, 9, encode(ModexRequest{0, 4})) +
      encode_frame(FrameType::kModexResponse, 9, encode(ModexResponse{0, 0, "v"}));
  reader.feed(stream);
  const FrameType want[] = {FrameType::kFence, FrameType::kFenceResult, FrameType::kAbort,
                            FrameType::kModexRequest, FrameType::kModexResponse};
  for (FrameType t : want) {
    auto f = reader.next();
    ASSERT_TRUE(f);
    EXPECT_EQ(f->type, t);
  }
  EXPECT_FALSE(reader.next());
}

TEST(PmixFramesTest, MalformedPayloadsSayWhichFrame) {
  auto error = [](auto&& decode, const std::string& payload) {
    try {
      decode(payload);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(decode_fence, encode(FenceFrame{"k", {1}, 0, ""}).substr(0, 16)),
            "malformed fence frame: truncated");
  EXPECT_EQ(error(decode_fence, bytes({0, 0, 0, 0, 0x7f, 0, 0, 0})),
            "malformed fence frame: a count of 2130706432 exceeds the data");
  EXPECT_EQ(error(decode_fence, encode(FenceFrame{"k", {-1}, 0, ""})),
            "malformed fence frame: a negative index");
  EXPECT_EQ(error(decode_abort, encode(AbortFrame{1, "m"}) + "x"),
            "malformed abort frame: trailing bytes");
  EXPECT_EQ(error(decode_modex_request, bytes({0, 0, 0, 1})),
            "malformed modex request frame: truncated");
  EXPECT_EQ(error(decode_modex_response, bytes({0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})),
            "malformed modex response frame: a negative index");
  EXPECT_EQ(error(decode_fence_result, std::string()), "malformed fence result frame: truncated");
}

}  // namespace
}  // namespace ddl::launcher::ssh
