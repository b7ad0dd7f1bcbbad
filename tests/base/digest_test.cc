// base/digest: SHA-256 and HMAC-SHA256 against the published test vectors (FIPS 180-4 examples,
// RFC 4231), and nonces that differ.

#include "base/digest.h"

#include <gtest/gtest.h>

namespace ddl::base {
namespace {

TEST(Digest, Sha256MatchesTheStandardsExamples) {
  EXPECT_EQ(hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Digest, HmacSha256MatchesRfc4231) {
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // A key longer than a block is hashed first.
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'),
                            "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(Digest, RandomBytesHaveTheSizeAskedAndDiffer) {
  const std::string a = random_bytes(16), b = random_bytes(16);
  EXPECT_EQ(a.size(), 16u);
  EXPECT_NE(a, b);
  EXPECT_EQ(hex(std::string("\x00\xff\x10", 3)), "00ff10");
}

}  // namespace
}  // namespace ddl::base
