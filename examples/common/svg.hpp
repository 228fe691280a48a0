// A small line chart as SVG (the examples' training curves).
#pragma once

#include <string>
#include <vector>

namespace chart {

struct Series {
  std::string label;
  std::string color;
  std::vector<std::pair<double, double>> points;  // (x, y)
};

// Writes an SVG line chart with axes, ticks, a legend and a title; throws on I/O failure.
void write_line_chart(const std::string& path, const std::string& title, const std::string& x_label,
                      const std::string& y_label, const std::vector<Series>& series);

}  // namespace chart
