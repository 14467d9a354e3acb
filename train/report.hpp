// Output helpers shared by the tools: CSV quoting, number formatting for CSV/JSON, and
// hand-written SVG charts (loss curves; predicted-vs-measured log-log scatter) that open in any
// browser.
#pragma once
#include <cmath>
#include <string>
#include <vector>

namespace lcm::train {

/// A CSV field (RFC 4180): quoted when it contains a comma, quote, CR or LF; quotes doubled.
std::string csv_field(const std::string& s);

/// Writes `"key": v` with a RapidJSON writer `w` (Writer or PrettyWriter), v as null when it is
/// not finite (JSON has no NaN or infinity).
template <class JsonWriter>
void json_number_or_null(JsonWriter& w, const char* key, double v) {
  w.Key(key);
  if (std::isfinite(v))
    w.Double(v);
  else
    w.Null();
}

/// Shortest round-tripping text of a double ("%.17g" trimmed), "" for NaN (empty CSV cell).
std::string format_number(double v);

/// One line of a line plot: points (x[i], y[i]); NaN / inf points are skipped.
struct PlotSeries {
  std::string name;
  std::string color;  // CSS colour, e.g. "#1f77b4"
  std::vector<double> x, y;
};

/// A complete SVG document (800×500): title, axes with ~6 "nice" ticks each and labels, one
/// polyline (+ point markers) per series, and a legend. Empty series are allowed (an empty
/// chart with its axes).
std::string svg_line_plot(const std::string& title, const std::string& x_label,
                          const std::string& y_label, const std::vector<PlotSeries>& series);

/// A complete SVG document: log10-log10 scatter of (x[i], y[i]) with decade ticks, the y = x
/// diagonal, title and axis labels. Points with x ≤ 0 or y ≤ 0 (or not finite) are clamped to
/// the lower edge of the axis range (so that none is silently lost) and counted in the subtitle.
std::string svg_scatter_loglog(const std::string& title, const std::string& x_label,
                               const std::string& y_label, const std::vector<double>& x,
                               const std::vector<double>& y);

}  // namespace lcm::train
