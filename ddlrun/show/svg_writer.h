#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ddl::ddlrun::svg {

/// `text` safe inside XML character data and attribute values: & < > " ' as entities, and the
/// control characters XML 1.0 forbids (all below 0x20 but tab, newline and return, and 0x7f)
/// as the visible text "\xNN", so that a host name from a user can never break the document.
std::string xml_escape(std::string_view text);

/// A number as SVG coordinates are written: at most one decimal, no trailing ".0".
std::string coordinate(double value);

/// An axis-aligned rectangle in SVG user units (y grows downwards).
struct Box {
  double x = 0;
  double y = 0;
  double w = 0;
  double h = 0;

  double right() const { return x + w; }
  double bottom() const { return y + h; }
  double center_x() const { return x + w / 2; }
  /// True when `inner` lies inside this box (edges may touch).
  bool contains(const Box& inner) const;
  /// True when the two boxes share interior area (touching edges do not count).
  bool overlaps(const Box& other) const;
};

/// Attributes of an element, in order; values are escaped when written.
using Attributes = std::vector<std::pair<std::string, std::string>>;

/// Writes one SVG document: a header with a stylesheet, then elements in painting order. Every
/// text and attribute value goes through xml_escape.
class Writer {
 public:
  /// Starts a document of `width` x `height` units with `style` (CSS) in its <style>.
  Writer(double width, double height, std::string_view style);

  /// <rect> of `box` with class `css_class` and extra `attributes`; `title`, when not empty,
  /// becomes its <title> (the tooltip viewers show, and what a test can search for).
  void rect(const Box& box, std::string_view css_class, const Attributes& attributes = {},
            std::string_view title = {});
  /// <text> at (x, y), the baseline's left end unless the class says otherwise.
  void text(double x, double y, std::string_view content, std::string_view css_class);
  /// <path d=...> with class `css_class`, extra `attributes` and an optional <title>.
  void path(std::string_view d, std::string_view css_class, const Attributes& attributes = {},
            std::string_view title = {});
  /// Opens a <g> with class `css_class`; `title` as for rect(). Each needs an end_group().
  void begin_group(std::string_view css_class, std::string_view title = {});
  void end_group();
  /// Adds raw markup to <defs> (markers); the caller escapes what it puts there.
  void define(std::string_view markup);

  /// The whole document.
  std::string finish() const;

 private:
  void element(std::string_view name, std::string_view css_class, const Attributes& attributes,
               std::string_view title);

  double width_;
  double height_;
  std::string style_;
  std::string defs_;
  std::string body_;
  int open_groups_ = 0;
};

}  // namespace ddl::ddlrun::svg
