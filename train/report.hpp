// Output helpers shared by the tools: CSV quoting, number formatting for CSV/JSON, and
// hand-written SVG charts (loss curves; predicted-vs-measured log-log scatter) that open in any
// browser.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
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

/// Writes `"key": v` with a RapidJSON writer `w`: an integer (json_int), a double as it is
/// (json_double; RapidJSON writes a non-finite one as an error), or an array of them
/// (json_array).
template <class JsonWriter>
void json_int(JsonWriter& w, const char* key, int64_t v) {
  w.Key(key);
  w.Int64(v);
}
template <class JsonWriter>
void json_double(JsonWriter& w, const char* key, double v) {
  w.Key(key);
  w.Double(v);
}
template <class JsonWriter, class T>
void json_array(JsonWriter& w, const char* key, const std::vector<T>& v) {
  w.Key(key);
  w.StartArray();
  for (const T& x : v) {
    if constexpr (std::is_floating_point_v<T>)
      w.Double(double(x));
    else
      w.Int64(int64_t(x));
  }
  w.EndArray();
}

/// Shortest round-tripping text of a double ("%.17g" trimmed), "" for NaN (empty CSV cell).
std::string format_number(double v);

/// `v` as printf "%*.*f" (`width`, `decimals`) for a table, or "n/a" right-aligned in `width`
/// when it is NaN (an undefined metric; printf would show "-nan" or "nan").
std::string fixed_or_na(int width, int decimals, double v);

/// The fewest significant digits, from 6 to 17, with which printf "%.Ng" prints the distinct
/// values of `values` as distinct texts (17 always does), so that a table shows no false ties.
/// 6 for fewer than 2 distinct values.
int distinguishing_digits(std::vector<double> values);

/// One line of a line plot: points (x[i], y[i]); NaN / inf points are skipped.
struct PlotSeries {
  std::string name;
  std::string color;  // CSS colour, e.g. "#1f77b4"
  std::vector<double> x, y;
};

/// About 6 "nice" tick values (steps of 1, 2, 5 × 10^k) covering [lo, hi], which are widened to
/// the first and last tick (an empty range [v, v] first to v ± 10 %, or ± 1 at 0). With
/// `integer_steps` (an axis of epochs) the step is at least 1, so a run of 2 epochs gets ticks
/// 1, 2 and no 1.5.
std::vector<double> axis_ticks(double& lo, double& hi, bool integer_steps);

/// Estimated width (px) of `text` in a sans-serif font of `font_px`: 0.62 em per character
/// (UTF-8 code points), above the average of Latin text in DejaVu Sans / Helvetica / Arial, so
/// that a box sized by it holds the text.
double text_width_px(const std::string& text, double font_px);

/// The right margin (px) of svg_line_plot for `series`: at least 180, wide enough for the
/// longest legend label (12 px text that starts 52 px into the margin, 12 px spare).
double legend_margin(const std::vector<PlotSeries>& series);

/// A complete SVG document, 500 px high and 620 px + legend_margin(series) wide (wider when the
/// title needs it): title (its part after a '\n' is a smaller subtitle), axes with ~6 "nice"
/// ticks each (axis_ticks; whole-number x ticks with `integer_x`) and labels, one polyline
/// (+ point markers) per series, and a legend. Empty series are allowed (an empty chart with
/// its axes).
std::string svg_line_plot(const std::string& title, const std::string& x_label,
                          const std::string& y_label, const std::vector<PlotSeries>& series,
                          bool integer_x = false);

/// A complete SVG document (800×500, wider when the title needs it): log10-log10 scatter of
/// (x[i], y[i]) with decade ticks, the y = x diagonal, title and axis labels. Points with x ≤ 0 or
/// y ≤ 0 (or not finite) are clamped to the lower edge of the axis range (so that none is silently
/// lost) and counted in the subtitle.
std::string svg_scatter_loglog(const std::string& title, const std::string& x_label,
                               const std::string& y_label, const std::vector<double>& x,
                               const std::vector<double>& y);

}  // namespace lcm::train
