#include "svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace chart {

void write_line_chart(const std::string& path, const std::string& title, const std::string& x_label,
                      const std::string& y_label, const std::vector<Series>& series) {
  const double W = 720, H = 420, left = 70, right = 20, top = 40, bottom = 50;
  double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
  for (const auto& s : series)
    for (auto [x, y] : s.points) x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  if (x0 > x1) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x0 > 0 && x0 < (x1 - x0)) x0 = 0;  // start the axis at 0 when the data starts near it
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad, y1 += pad;
  auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (W - left - right); };
  auto py = [&](double y) { return H - bottom - (y - y0) / (y1 - y0) * (H - top - bottom); };
  std::ostringstream o;
  char buf[128];
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << title << "</text>\n";
  for (int i = 0; i <= 5; ++i) {  // grid and tick labels
    double y = y0 + (y1 - y0) * i / 5, x = x0 + (x1 - x0) * i / 5;
    std::snprintf(buf, sizeof buf, "%.3g", y);
    o << "<line x1=\"" << left << "\" x2=\"" << W - right << "\" y1=\"" << py(y) << "\" y2=\"" << py(y) << "\" stroke=\"#ddd\"/>\n";
    o << "<text x=\"" << left - 6 << "\" y=\"" << py(y) + 4 << "\" text-anchor=\"end\">" << buf << "</text>\n";
    std::snprintf(buf, sizeof buf, "%.0f", x);
    o << "<text x=\"" << px(x) << "\" y=\"" << H - bottom + 18 << "\" text-anchor=\"middle\">" << buf << "</text>\n";
  }
  o << "<line x1=\"" << left << "\" x2=\"" << left << "\" y1=\"" << top << "\" y2=\"" << H - bottom << "\" stroke=\"black\"/>\n";
  o << "<line x1=\"" << left << "\" x2=\"" << W - right << "\" y1=\"" << H - bottom << "\" y2=\"" << H - bottom << "\" stroke=\"black\"/>\n";
  o << "<text x=\"" << (left + W - right) / 2 << "\" y=\"" << H - 12 << "\" text-anchor=\"middle\">" << x_label << "</text>\n";
  o << "<text transform=\"translate(16," << (top + H - bottom) / 2 << ") rotate(-90)\" text-anchor=\"middle\">" << y_label << "</text>\n";
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    o << "<polyline fill=\"none\" stroke=\"" << s.color << "\" stroke-width=\"1.5\" points=\"";
    for (auto [x, y] : s.points) o << px(x) << "," << py(y) << " ";
    o << "\"/>\n";
    double ly = top + 14 + 16.0 * k;
    o << "<line x1=\"" << W - right - 240 << "\" x2=\"" << W - right - 220 << "\" y1=\"" << ly << "\" y2=\"" << ly << "\" stroke=\"" << s.color << "\" stroke-width=\"2\"/>\n";
    o << "<text x=\"" << W - right - 215 << "\" y=\"" << ly + 4 << "\">" << s.label << "</text>\n";
  }
  o << "</svg>\n";
  std::ofstream out(path);
  out << o.str();
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace chart
