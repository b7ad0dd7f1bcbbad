#include "ddlrun/show/svg_writer.h"

#include <cmath>
#include <cstdio>

#include "base/check.h"

namespace ddl::ddlrun::svg {

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if ((u < 0x20 && c != '\t' && c != '\n' && c != '\r') || u == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", u);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out;
}

std::string coordinate(double value) {
  const double rounded = std::round(value * 10) / 10;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", rounded == 0 ? 0.0 : rounded);
  std::string s = buf;
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}

bool Box::contains(const Box& inner) const {
  return inner.x >= x && inner.y >= y && inner.right() <= right() && inner.bottom() <= bottom();
}

bool Box::overlaps(const Box& other) const {
  return x < other.right() && other.x < right() && y < other.bottom() && other.y < bottom();
}

Writer::Writer(double width, double height, std::string_view style)
    : width_(width), height_(height), style_(style) {}

void Writer::element(std::string_view name, std::string_view css_class,
                     const Attributes& attributes, std::string_view title) {
  body_ += "<";
  body_ += name;
  if (!css_class.empty()) body_ += " class=\"" + xml_escape(css_class) + "\"";
  for (const auto& [key, value] : attributes)
    body_ += " " + key + "=\"" + xml_escape(value) + "\"";
  if (title.empty()) {
    body_ += "/>\n";
    return;
  }
  body_ += "><title>" + xml_escape(title) + "</title></";
  body_ += name;
  body_ += ">\n";
}

void Writer::rect(const Box& box, std::string_view css_class, const Attributes& attributes,
                  std::string_view title) {
  Attributes all = {{"x", coordinate(box.x)},
                    {"y", coordinate(box.y)},
                    {"width", coordinate(box.w)},
                    {"height", coordinate(box.h)}};
  all.insert(all.end(), attributes.begin(), attributes.end());
  element("rect", css_class, all, title);
}

void Writer::text(double x, double y, std::string_view content, std::string_view css_class) {
  body_ += "<text class=\"" + xml_escape(css_class) + "\" x=\"" + coordinate(x) + "\" y=\"" +
           coordinate(y) + "\">" + xml_escape(content) + "</text>\n";
}

void Writer::path(std::string_view d, std::string_view css_class, const Attributes& attributes,
                  std::string_view title) {
  Attributes all = {{"d", std::string(d)}};
  all.insert(all.end(), attributes.begin(), attributes.end());
  element("path", css_class, all, title);
}

void Writer::begin_group(std::string_view css_class, std::string_view title) {
  body_ += "<g class=\"" + xml_escape(css_class) + "\">";
  if (!title.empty()) body_ += "<title>" + xml_escape(title) + "</title>";
  body_ += "\n";
  ++open_groups_;
}

void Writer::end_group() {
  DDL_CHECK(open_groups_ > 0, "end_group() without begin_group()");
  body_ += "</g>\n";
  --open_groups_;
}

void Writer::define(std::string_view markup) {
  defs_ += markup;
  defs_ += "\n";
}

std::string Writer::finish() const {
  DDL_CHECK(open_groups_ == 0, "an SVG group was left open");
  const std::string w = coordinate(width_), h = coordinate(height_);
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         w + "\" height=\"" + h + "\" viewBox=\"0 0 " + w + " " + h + "\">\n<style>\n" + style_ +
         "</style>\n<defs>\n" + defs_ + "</defs>\n" + body_ + "</svg>\n";
}

}  // namespace ddl::ddlrun::svg
