// gnuplot writer: temp data files, a script piped to gnuplot, its stderr kept
// for the error message.
#include "reports/plot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "options/output_files.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "plot";

// A gnuplot string literal (single quotes, doubled to escape).
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A temporary directory removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "posenc-plot-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) {
      ThrowError(kOp, "temp directory", FormatValue(pattern), "cannot be created");
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

bool GnuplotOnPath() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (!dir.empty() && access((std::filesystem::path(dir) / "gnuplot").c_str(), X_OK) == 0) return true;
  }
  return false;
}

// Pipes `script` to gnuplot; throws with gnuplot's own message on failure.
void RunGnuplot(const std::string& script, const std::string& png_path, const TempDir& dir, OutputFiles* together) {
  if (!GnuplotOnPath()) {
    ThrowError(kOp, "gnuplot", "missing",
               "not found on PATH; install it (Debian: gnuplot-nox, see scripts/install-deps)");
  }
  const std::filesystem::path parent = std::filesystem::absolute(png_path).parent_path();
  if (std::error_code ec; !std::filesystem::is_directory(parent, ec)) {
    ThrowError(kOp, "--out", FormatValue(png_path), "its directory does not exist");
  }
  const std::string log = dir.File("gnuplot.log");
  const std::string command = "gnuplot 2> " + Quote(log);
  FILE* pipe = popen(command.c_str(), "w");
  if (pipe == nullptr) ThrowError(kOp, "gnuplot", "popen", "cannot be started");
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int status = pclose(pipe);
  std::ifstream log_file(log);
  std::stringstream messages;
  messages << log_file.rdbuf();
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    ThrowError(
        kOp, "gnuplot", FormatValue(png_path),
        "failed (exit status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + "): " + messages.str());
  }
  // gnuplot drew into the temporary directory; the PNG replaces `png_path`
  // whole or not at all (a full disk keeps the old picture).
  const std::string drawn = dir.File("plot.png");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(drawn, ec) || std::filesystem::file_size(drawn, ec) == 0) {
    ThrowError(kOp, "--out", FormatValue(png_path), "was not drawn by gnuplot: " + messages.str());
  }
  // gnuplot exits 0 even when it could not write the whole PNG (a full
  // disk); a complete PNG ends with its IEND chunk.
  std::ifstream png(drawn, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(png)), {});
  static constexpr char kIend[] = "\0\0\0\0IEND\xAE\x42\x60\x82";
  if (bytes.size() < 12 || bytes.compare(bytes.size() - 12, 12, kIend, 12) != 0) {
    ThrowError(kOp, "--out", FormatValue(png_path),
               "was not drawn whole by gnuplot: the PNG is cut short (no IEND chunk; is the disk full?)");
  }
  if (together != nullptr) {
    together->Write(png_path, bytes);
    return;
  }
  OutputFiles output(kOp);
  output.Write(png_path, bytes);
  output.Commit();
}

// Line colours in order: distinct on white and for the common colour
// blindnesses (no yellow, which gnuplot's default cycle has).
std::string Palette() {
  static const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                  "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  std::ostringstream s;
  for (int i = 0; i < 10; ++i) s << "set linetype " << i + 1 << " lc rgb '" << kColors[i] << "'\n";
  s << "set linetype cycle 10\n";
  return s.str();
}

std::string Terminal(int width, int height, int font_size, const std::string& drawn_path) {
  std::ostringstream s;
  s << "set terminal pngcairo size " << width << "," << height << " enhanced font 'DejaVu Sans," << font_size << "'\n"
    << "set output " << Quote(drawn_path) << "\n"
    << Palette();
  return s.str();
}

// The start of a page of `panels` panels in a grid of at most `columns`
// columns, each panel_width x panel_height pixels, under `title`.
std::string Multiplot(int panels, int columns, int panel_width, int panel_height, int font_size,
                      const std::string& title, const std::string& drawn_path) {
  const int cols = std::min(columns, panels);
  const int rows = (panels + cols - 1) / cols;
  std::ostringstream s;
  s << Terminal(panel_width * cols, panel_height * rows + 40, font_size, drawn_path) << "set multiplot layout " << rows
    << "," << cols << " title " << Quote(title) << " noenhanced font 'DejaVu Sans," << font_size + 3 << "'\n";
  return s.str();
}

// The commands (and data files in `dir`) that draw one line plot; `index`
// keeps the data files of several panels apart.
std::string LinePlotPanel(const LinePlot& plot, const TempDir& dir, int index) {
  std::ostringstream script;
  script << "set title " << Quote(plot.title) << " noenhanced\n"
         << "set xlabel " << Quote(plot.x_label) << " noenhanced\n"
         << "set ylabel " << Quote(plot.y_label) << " noenhanced\n"
         << "set grid\nset autoscale xfix\n";
  if (plot.key_position == "off") {
    script << "unset key\n";
  } else {
    script << "set key " << plot.key_position << " box opaque noenhanced\n";
  }
  if (plot.log_x) script << "set logscale x\nset format x '10^{%L}'\n";
  if (plot.log_y) script << "set logscale y\nset format y '10^{%L}'\n";
  if (plot.y_min != 0.0 || plot.y_max != 0.0) script << "set yrange [" << plot.y_min << ":" << plot.y_max << "]\n";
  if (plot.x_min != 0.0 || plot.x_max != 0.0) script << "set xrange [" << plot.x_min << ":" << plot.x_max << "]\n";
  bool any_y2 = false;
  for (const auto& s : plot.series) any_y2 = any_y2 || s.right_axis;
  if (any_y2) {
    script << "set y2label " << Quote(plot.y2_label) << " noenhanced\nset y2tics\nset ytics nomirror\n";
    if (plot.log_y2) script << "set logscale y2\n";
  }
  script << "plot ";
  bool first = true;
  for (std::size_t i = 0; i < plot.series.size(); ++i) {
    const PlotSeries& s = plot.series[i];
    const std::string file = dir.File("panel" + std::to_string(index) + "_series" + std::to_string(i) + ".dat");
    std::ofstream data(file);
    data.precision(17);
    for (std::size_t j = 0; j < s.x.size() && j < s.y.size(); ++j) {
      // Log axes cannot show zeros; leave the point out rather than fail.
      if ((plot.log_y && !s.right_axis) || (plot.log_y2 && s.right_axis)) {
        if (!(s.y[j] > 0.0)) continue;
      }
      if (plot.log_x && !(s.x[j] > 0.0)) continue;
      data << s.x[j] << ' ' << s.y[j] << '\n';
    }
    data.close();
    if (!data) ThrowError(kOp, "data file", FormatValue(file), "cannot be written");
    script << (first ? "" : ", ") << Quote(file) << " using 1:2" << (s.right_axis ? " axes x1y2" : "") << " with "
           << s.style << " title " << Quote(s.title);
    first = false;
  }
  static const char* kReferenceColors[] = {"black", "#d62728", "#9467bd", "#8c564b", "#7f7f7f"};
  for (std::size_t i = 0; i < plot.reference_lines.size(); ++i) {
    const auto& [value, label] = plot.reference_lines[i];
    script << (first ? "" : ", ") << value << " with lines dt " << 2 + i % 3 << " lw 2 lc rgb '"
           << kReferenceColors[i % std::size(kReferenceColors)] << "' title " << Quote(label);
    first = false;
  }
  script << "\n";
  return script.str();
}

}  // namespace

void DrawLinePlot(const LinePlot& plot, const std::string& png_path, OutputFiles* together) {
  TempDir dir;
  RunGnuplot(Terminal(1000, 640, 11, dir.File("plot.png")) + LinePlotPanel(plot, dir, 0), png_path, dir, together);
}

void DrawLinePlotGrid(const std::vector<LinePlot>& plots, const std::string& title, int columns, int panel_width,
                      int panel_height, const std::string& png_path, OutputFiles* together) {
  Require(!plots.empty() && plots.size() <= 16, kOp, "line plots", plots.size(), "must be in [1, 16]");
  Require(columns > 0, kOp, "columns", columns, "must be > 0");
  Require(panel_width >= 200 && panel_height >= 150, kOp, "panel size",
          std::to_string(panel_width) + "x" + std::to_string(panel_height), "must be at least 200x150");
  const int n = static_cast<int>(plots.size());
  TempDir dir;
  std::ostringstream script;
  script << Multiplot(n, columns, panel_width, panel_height, 11, title, dir.File("plot.png"));
  for (int i = 0; i < n; ++i) {
    // Each panel starts from gnuplot's defaults (log axes, y2 ...), keeping
    // the terminal, the output and the palette.
    if (i > 0) script << "reset\n";
    script << LinePlotPanel(plots[static_cast<std::size_t>(i)], dir, i);
  }
  script << "unset multiplot\n";
  RunGnuplot(script.str(), png_path, dir, together);
}

namespace {

// One heat map panel: its data file in `dir` and the commands that draw it.
std::string HeatmapPanel(const Heatmap& map, const TempDir& dir, int index) {
  Require(map.rows > 0 && map.cols > 0 && static_cast<std::int64_t>(map.values.size()) == map.rows * map.cols, kOp,
          "heatmap values", map.values.size(), "must hold rows * cols entries");
  const std::string file = dir.File("matrix" + std::to_string(index) + ".dat");
  {
    std::ofstream data(file);
    data.precision(9);
    for (std::int64_t r = 0; r < map.rows; ++r) {
      for (std::int64_t c = 0; c < map.cols; ++c) {
        data << map.values[static_cast<std::size_t>(r * map.cols + c)] << (c + 1 < map.cols ? ' ' : '\n');
      }
    }
    if (!data) ThrowError(kOp, "data file", FormatValue(file), "cannot be written");
  }
  std::ostringstream script;
  script << "set title " << Quote(map.title) << " noenhanced\n"
         << "set xlabel " << Quote(map.x_label) << " noenhanced\n"
         << "set ylabel " << Quote(map.y_label) << " noenhanced\n"
         << "set cblabel " << Quote(map.value_label) << " noenhanced\n"
         << "set xrange [-0.5:" << map.cols - 0.5 << "]\n"
         << "set yrange [" << map.rows - 0.5 << ":-0.5]\n"  // row 0 on top, as a matrix
         << (map.square_cells ? "set size ratio -1\n" : "") << "set tics out\nunset key\n";
  const auto tics = [&](const char* axis, const std::vector<std::string>& labels, std::int64_t count) {
    if (labels.empty()) {
      script << "set " << axis << " autofreq\n";
      return;
    }
    Require(static_cast<std::int64_t>(labels.size()) == count, kOp, std::string("heatmap ") + axis, labels.size(),
            "must label every row or column");
    script << "set " << axis << " (";
    for (std::size_t i = 0; i < labels.size(); ++i) script << (i ? ", " : "") << Quote(labels[i]) << " " << i;
    script << ")\n";
  };
  tics("xtics", map.col_labels, map.cols);
  tics("ytics", map.row_labels, map.rows);
  double lo = map.range_min, hi = map.range_max;
  if (map.diverging) {
    double extent = std::max(std::abs(lo), std::abs(hi));
    if (lo == 0.0 && hi == 0.0) {
      for (double v : map.values) extent = std::max(extent, std::abs(v));
    }
    if (extent == 0.0) extent = 1.0;
    script << "set palette defined (-1 '#2166ac', 0 'white', 1 '#b2182b')\n"
           << "set cbrange [" << -extent << ":" << extent << "]\n";
  } else {
    script << "set palette " << (map.palette.empty() ? std::string("rgbformulae 7,5,15") : map.palette) << "\n";
    if (lo != 0.0 || hi != 0.0) {
      script << "set cbrange [" << lo << ":" << hi << "]\n";
    } else {
      script << "set autoscale cbfix\n";
    }
  }
  if (map.rows >= 2 && map.cols >= 2) {
    script << "plot " << Quote(file) << " matrix with image\n";
  } else {  // gnuplot draws no image under 2 x 2: one filled box a cell
    script << "plot " << Quote(file) << " matrix using 1:2:(0.5):(0.5):3 with boxxyerror fs solid lc palette\n";
  }
  return script.str();
}

}  // namespace

void DrawHeatmap(const Heatmap& map, const std::string& png_path, OutputFiles* together) {
  TempDir dir;
  std::ostringstream script;
  script << Terminal(900, 800, 11, dir.File("plot.png")) << HeatmapPanel(map, dir, 0);
  RunGnuplot(script.str(), png_path, dir, together);
}

void DrawHeatmapGrid(const std::vector<Heatmap>& maps, const std::string& title, int columns,
                     const std::string& png_path, int panel_width, int panel_height, OutputFiles* together) {
  Require(!maps.empty(), kOp, "heat maps", maps.size(), "must be > 0");
  Require(maps.size() <= 64, kOp, "heat maps", maps.size(), "must be <= 64 on one page");
  Require(columns > 0, kOp, "columns", columns, "must be > 0");
  const int n = static_cast<int>(maps.size());
  TempDir dir;
  std::ostringstream script;
  script << Multiplot(n, columns, panel_width, panel_height, 9, title, dir.File("plot.png"));
  for (int i = 0; i < n; ++i) script << HeatmapPanel(maps[static_cast<std::size_t>(i)], dir, i);
  script << "unset multiplot\n";
  RunGnuplot(script.str(), png_path, dir, together);
}

}  // namespace posenc::cli
