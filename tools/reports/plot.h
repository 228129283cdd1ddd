// A small gnuplot writer for the analysis pictures: data go to a temporary
// file, the script is piped to `gnuplot` (pngcairo terminal). Every picture
// has a title, labelled axes with units and a legend (a colour box for heat
// maps). posenc::Error when gnuplot is missing or fails.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options/output_files.h"

namespace posenc::cli {

struct PlotSeries {
  std::string title;  // legend entry
  std::vector<double> x, y;
  bool right_axis = false;           // plotted against the y2 axis
  std::string style = "lines lw 2";  // a gnuplot `with` clause
};

struct LinePlot {
  std::string title, x_label, y_label, y2_label;
  bool log_x = false, log_y = false, log_y2 = false;
  // A fixed y range (an accuracy's 0..100, so that panels compare); both
  // 0: from the data.
  double y_min = 0.0, y_max = 0.0;
  // A fixed x range (room around points that sit at the first and last x);
  // both 0: from the data, fixed to its ends.
  double x_min = 0.0, x_max = 0.0;
  // gnuplot `set key` placement: "inside top right", "outside right" ...;
  // "off" draws no legend (a panel that shares another panel's colours).
  std::string key_position = "inside top right";
  std::vector<PlotSeries> series;
  // Horizontal reference lines: value and label (drawn dashed, in the legend).
  std::vector<std::pair<double, std::string>> reference_lines;
};

struct Heatmap {
  std::string title, x_label, y_label, value_label;
  std::int64_t rows = 0, cols = 0;  // values [rows, cols] row-major; row = y
  std::vector<double> values;
  bool diverging = false;  // a blue-white-red palette centred on 0
  // Colour range; both 0: from the values.
  double range_min = 0.0, range_max = 0.0;
  bool square_cells = true;  // false: the panel's shape, whatever rows/cols
  std::string palette;       // gnuplot `set palette` arguments when not diverging; empty: a default
  // Labels of the columns and rows (empty: their indices).
  std::vector<std::string> col_labels, row_labels;
};

// Each writes `png_path` or throws posenc::Error naming the path. With
// `together`, the PNG joins that set of outputs (replaced when the caller
// commits it, with its other files); without, it replaces `png_path` at once.
// Either way an existing file is replaced whole or not at all.
void DrawLinePlot(const LinePlot& plot, const std::string& png_path, OutputFiles* together = nullptr);
// Several line plots on one page (gnuplot multiplot), `columns` per row,
// each panel panel_width x panel_height pixels.
void DrawLinePlotGrid(const std::vector<LinePlot>& plots, const std::string& title, int columns, int panel_width,
                      int panel_height, const std::string& png_path, OutputFiles* together = nullptr);
void DrawHeatmap(const Heatmap& map, const std::string& png_path, OutputFiles* together = nullptr);
// Several heat maps on one page (gnuplot multiplot), `columns` per row.
void DrawHeatmapGrid(const std::vector<Heatmap>& maps, const std::string& title, int columns,
                     const std::string& png_path, int panel_width = 420, int panel_height = 380,
                     OutputFiles* together = nullptr);

}  // namespace posenc::cli
