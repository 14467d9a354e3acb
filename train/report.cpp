// CSV quoting and hand-written SVG charts (see report.hpp).
#include "train/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <utility>

namespace lcm::train {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

std::string format_number(double v) {
  if (std::isnan(v)) return "";
  char buf[64];
  for (int prec = 6; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

std::vector<double> axis_ticks(double& lo, double& hi, bool integer_steps) {
  if (!(hi > lo)) {
    double d = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  double raw = (hi - lo) / 5;
  double mag = std::pow(10, std::floor(std::log10(raw)));
  double f = raw / mag;
  double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
  if (integer_steps && step < 1) step = 1;  // epochs: no tick at 1.5
  lo = std::floor(lo / step) * step;
  hi = std::ceil(hi / step) * step;
  std::vector<double> t;
  for (double v = lo; v <= hi + step * 1e-9; v += step)
    t.push_back(std::fabs(v) < step * 1e-9 ? 0 : v);
  return t;
}

double text_width_px(const std::string& text, double font_px) {
  size_t code_points = 0;
  for (unsigned char ch : text)
    if ((ch & 0xC0) != 0x80) ++code_points;  // UTF-8: count lead bytes, not continuation bytes
  return 0.62 * font_px * double(code_points);
}

std::string fixed_or_na(int width, int decimals, double v) {
  char buf[64];
  if (std::isnan(v))
    std::snprintf(buf, sizeof buf, "%*s", width, "n/a");
  else
    std::snprintf(buf, sizeof buf, "%*.*f", width, decimals, v);
  return buf;
}

int distinguishing_digits(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  char a[64], b[64];
  for (int digits = 6; digits < 17; ++digits) {
    bool distinct = true;
    for (size_t i = 1; i < values.size() && distinct; ++i) {
      std::snprintf(a, sizeof a, "%.*g", digits, values[i - 1]);
      std::snprintf(b, sizeof b, "%.*g", digits, values[i]);
      distinct = std::string(a) != b;
    }
    if (distinct) return digits;
  }
  return 17;
}

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '<')
      o += "&lt;";
    else if (ch == '>')
      o += "&gt;";
    else if (ch == '&')
      o += "&amp;";
    else if (ch == '"')
      o += "&quot;";
    else
      o += ch;
  }
  return o;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) >= 1e5 || std::fabs(v) < 1e-3))
    std::snprintf(buf, sizeof buf, "%.1e", v);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// Layout in px: height, left/top/bottom margins; the plot area is kPlotW wide and the right
// margin (legend) at least kMinR, wider when a legend label needs it (legend_margin).
constexpr double H = 500, L = 80, T = 50, B = 60, kPlotW = 540, kMinR = 180;
// a legend row: a 30 px line from W - R + 15, then its label from W - R + 52
constexpr double kLegendText = 52, kLegendPad = 12;

/// The title's first line (16 px) and, after a '\n', a subtitle line (12 px).
std::pair<std::string, std::string> title_lines(const std::string& title) {
  const size_t nl = title.find('\n');
  if (nl == std::string::npos) return {title, ""};
  return {title.substr(0, nl), title.substr(nl + 1)};
}

/// The document width that fits the title lines with 20 px on each side.
double title_width(const std::string& title) {
  const auto [main, sub] = title_lines(title);
  return std::max(text_width_px(main, 16), text_width_px(sub, 12)) + 40;
}

std::string header(const std::string& title, double W) {
  const auto [main, sub] = title_lines(title);
  std::ostringstream s;
  s << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << W / 2 << "\" y=\"25\" text-anchor=\"middle\" font-size=\"16\">" << esc(main)
    << "</text>\n";
  if (!sub.empty())
    s << "<text x=\"" << W / 2 << "\" y=\"42\" text-anchor=\"middle\">" << esc(sub) << "</text>\n";
  return s.str();
}

std::string axes(const std::string& xl, const std::string& yl, double W, double R) {
  std::ostringstream s;
  s << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\""
    << H - T - B << "\" fill=\"none\" stroke=\"black\"/>\n"
    << "<text x=\"" << L + (W - L - R) / 2 << "\" y=\"" << H - 15 << "\" text-anchor=\"middle\">"
    << esc(xl) << "</text>\n"
    << "<text transform=\"translate(20," << T + (H - T - B) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << esc(yl) << "</text>\n";
  return s.str();
}

}  // namespace

double legend_margin(const std::vector<PlotSeries>& series) {
  double widest = 0;
  for (const auto& se : series) widest = std::max(widest, text_width_px(se.name, 12));
  return std::max(kMinR, kLegendText + widest + kLegendPad);
}

std::string svg_line_plot(const std::string& title, const std::string& x_label,
                          const std::string& y_label, const std::vector<PlotSeries>& series,
                          bool integer_x) {
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  for (auto& se : series)
    for (size_t i = 0; i < se.x.size() && i < se.y.size(); ++i) {
      if (!std::isfinite(se.x[i]) || !std::isfinite(se.y[i])) continue;
      x0 = std::min(x0, se.x[i]), x1 = std::max(x1, se.x[i]);
      y0 = std::min(y0, se.y[i]), y1 = std::max(y1, se.y[i]);
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (y0 > 0) y0 = 0;  // losses: start the y axis at 0
  auto xt = axis_ticks(x0, x1, integer_x);
  auto yt = axis_ticks(y0, y1, false);
  // the right margin fits the longest legend label, and the width the title
  double R = legend_margin(series), W = L + kPlotW + R;
  if (title_width(title) > W) R += title_width(title) - W, W = title_width(title);
  auto px = [&](double v) { return L + (v - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double v) { return H - B - (v - y0) / (y1 - y0) * (H - T - B); };
  std::ostringstream s;
  s << header(title, W) << axes(x_label, y_label, W, R);
  for (double v : xt)
    s << "<line x1=\"" << num(px(v)) << "\" y1=\"" << H - B << "\" x2=\"" << num(px(v))
      << "\" y2=\"" << H - B + 5 << "\" stroke=\"black\"/><text x=\"" << num(px(v)) << "\" y=\""
      << H - B + 18 << "\" text-anchor=\"middle\">" << tick_label(v) << "</text>\n";
  for (double v : yt)
    s << "<line x1=\"" << L - 5 << "\" y1=\"" << num(py(v)) << "\" x2=\"" << W - R << "\" y2=\""
      << num(py(v)) << "\" stroke=\"#ddd\"/><text x=\"" << L - 8 << "\" y=\"" << num(py(v) + 4)
      << "\" text-anchor=\"end\">" << tick_label(v) << "</text>\n";
  int row = 0;
  for (auto& se : series) {
    std::ostringstream pts, marks;
    for (size_t i = 0; i < se.x.size() && i < se.y.size(); ++i) {
      if (!std::isfinite(se.x[i]) || !std::isfinite(se.y[i])) continue;
      pts << num(px(se.x[i])) << "," << num(py(se.y[i])) << " ";
      marks << "<circle cx=\"" << num(px(se.x[i])) << "\" cy=\"" << num(py(se.y[i]))
            << "\" r=\"2.5\" fill=\"" << se.color << "\"/>";
    }
    s << "<polyline fill=\"none\" stroke=\"" << se.color << "\" stroke-width=\"2\" points=\""
      << pts.str() << "\"/>\n"
      << marks.str() << "\n";
    double ly = T + 20 + 22 * row++;
    s << "<line x1=\"" << W - R + 15 << "\" y1=\"" << ly << "\" x2=\"" << W - R + 45 << "\" y2=\""
      << ly << "\" stroke=\"" << se.color << "\" stroke-width=\"2\"/><text x=\""
      << W - R + kLegendText << "\" y=\"" << ly + 4 << "\">" << esc(se.name) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

std::string svg_scatter_loglog(const std::string& title, const std::string& x_label,
                               const std::string& y_label, const std::vector<double>& x,
                               const std::vector<double>& y) {
  const size_t n = std::min(x.size(), y.size());
  double R = kMinR, W = L + kPlotW + R;  // its legend: "N points", "y = x", "K clamped"
  if (title_width(title) > W) R += title_width(title) - W, W = title_width(title);
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  size_t clamped = 0;
  for (size_t i = 0; i < n; ++i)
    for (double v : {x[i], y[i]})
      if (std::isfinite(v) && v > 0) lo = std::min(lo, v), hi = std::max(hi, v);
  if (!std::isfinite(lo)) lo = 0.1, hi = 10;
  double d0 = std::floor(std::log10(lo)), d1 = std::ceil(std::log10(hi));
  if (d1 <= d0) d1 = d0 + 1;
  auto px = [&](double v) { return L + (std::log10(v) - d0) / (d1 - d0) * (W - L - R); };
  auto py = [&](double v) { return H - B - (std::log10(v) - d0) / (d1 - d0) * (H - T - B); };
  const double floor_v = std::pow(10.0, d0);
  std::ostringstream s;
  s << header(title, W) << axes(x_label, y_label, W, R);
  for (double d = d0; d <= d1; d += 1) {
    double v = std::pow(10.0, d);
    s << "<line x1=\"" << num(px(v)) << "\" y1=\"" << T << "\" x2=\"" << num(px(v)) << "\" y2=\""
      << H - B + 5 << "\" stroke=\"#ddd\"/><text x=\"" << num(px(v)) << "\" y=\"" << H - B + 18
      << "\" text-anchor=\"middle\">" << tick_label(v) << "</text>\n";
    s << "<line x1=\"" << L - 5 << "\" y1=\"" << num(py(v)) << "\" x2=\"" << W - R << "\" y2=\""
      << num(py(v)) << "\" stroke=\"#ddd\"/><text x=\"" << L - 8 << "\" y=\"" << num(py(v) + 4)
      << "\" text-anchor=\"end\">" << tick_label(v) << "</text>\n";
  }
  s << "<line x1=\"" << num(px(floor_v)) << "\" y1=\"" << num(py(floor_v)) << "\" x2=\""
    << num(px(std::pow(10.0, d1))) << "\" y2=\"" << num(py(std::pow(10.0, d1)))
    << "\" stroke=\"#d62728\" stroke-dasharray=\"6,4\"/>\n";
  for (size_t i = 0; i < n; ++i) {
    double a = x[i], b = y[i];
    if (!(std::isfinite(a) && a > 0) || !(std::isfinite(b) && b > 0)) {
      ++clamped;
      if (!(std::isfinite(a) && a > 0)) a = floor_v;
      if (!(std::isfinite(b) && b > 0)) b = floor_v;
    }
    s << "<circle cx=\"" << num(px(a)) << "\" cy=\"" << num(py(b))
      << "\" r=\"2\" fill=\"#1f77b4\" fill-opacity=\"0.5\"/>\n";
  }
  s << "<text x=\"" << W - R + 15 << "\" y=\"" << T + 20 << "\">" << n << " points</text>\n";
  s << "<text x=\"" << W - R + 15 << "\" y=\"" << T + 40 << "\" fill=\"#d62728\">y = x</text>\n";
  if (clamped)
    s << "<text x=\"" << W - R + 15 << "\" y=\"" << T + 60 << "\">" << clamped
      << " clamped (&lt;= 0)</text>\n";
  s << "</svg>\n";
  return s.str();
}

}  // namespace lcm::train
