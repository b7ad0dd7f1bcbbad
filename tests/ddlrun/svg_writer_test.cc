// The SVG writer: escaping of every text and attribute, numbers, boxes, and the document.
#include "ddlrun/show/svg_writer.h"

#include <gtest/gtest.h>

namespace ddl::ddlrun::svg {
namespace {

TEST(SvgWriterTest, EscapesMarkupAndQuotes) {
  EXPECT_EQ(xml_escape("a&b<c>\"d\"'e'"), "a&amp;b&lt;c&gt;&quot;d&quot;&apos;e&apos;");
  EXPECT_EQ(xml_escape("node01"), "node01");
  EXPECT_EQ(xml_escape(""), "");
}

TEST(SvgWriterTest, ControlCharactersXmlForbidsBecomeVisibleText) {
  EXPECT_EQ(xml_escape(std::string("a\x1b[31mb\x7f", 8)), "a\\x1b[31mb\\x7f");
  EXPECT_EQ(xml_escape(std::string("nul\0x", 5)), "nul\\x00x");
  EXPECT_EQ(xml_escape("tab\tnl\ncr\r"), "tab\tnl\ncr\r");
  EXPECT_EQ(xml_escape("\xc3\xa9t\xc3\xa9"), "\xc3\xa9t\xc3\xa9");  // UTF-8 kept
}

TEST(SvgWriterTest, CoordinatesHaveAtMostOneDecimal) {
  EXPECT_EQ(coordinate(12), "12");
  EXPECT_EQ(coordinate(12.25), "12.3");
  EXPECT_EQ(coordinate(-0.01), "0");
  EXPECT_EQ(coordinate(-3.5), "-3.5");
}

TEST(SvgWriterTest, BoxesContainAndOverlap) {
  const Box outer{0, 0, 100, 50};
  EXPECT_TRUE(outer.contains({10, 10, 90, 40}));
  EXPECT_FALSE(outer.contains({10, 10, 91, 40}));
  EXPECT_TRUE(outer.overlaps({99, 49, 10, 10}));
  EXPECT_FALSE(outer.overlaps({100, 0, 10, 10}));  // touching is not overlapping
  EXPECT_EQ(outer.center_x(), 50);
  EXPECT_EQ(outer.bottom(), 50);
}

TEST(SvgWriterTest, DocumentEscapesTextTitlesAndAttributes) {
  Writer w(200, 100.5, "text { fill: red; }\n");
  w.define("<marker id=\"m\"/>");
  w.begin_group("g", "host <a&b>");
  w.rect({1, 2, 3, 4}, "rank", {{"fill", "#fff"}}, "rank 0 on \"x\"");
  w.text(5, 6, "1 < 2 & 'q'", "h1");
  w.path("M0,0 h5", "ring d0", {{"marker-end", "url(#m)"}});
  w.end_group();
  EXPECT_EQ(w.finish(),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"200\" height=\"100.5\" "
            "viewBox=\"0 0 200 100.5\">\n"
            "<style>\ntext { fill: red; }\n</style>\n"
            "<defs>\n<marker id=\"m\"/>\n</defs>\n"
            "<g class=\"g\"><title>host &lt;a&amp;b&gt;</title>\n"
            "<rect class=\"rank\" x=\"1\" y=\"2\" width=\"3\" height=\"4\" fill=\"#fff\">"
            "<title>rank 0 on &quot;x&quot;</title></rect>\n"
            "<text class=\"h1\" x=\"5\" y=\"6\">1 &lt; 2 &amp; &apos;q&apos;</text>\n"
            "<path class=\"ring d0\" d=\"M0,0 h5\" marker-end=\"url(#m)\"/>\n"
            "</g>\n"
            "</svg>\n");
}

}  // namespace
}  // namespace ddl::ddlrun::svg
