// The training curves as a PNG (docs/training.md, "Run folder"): loss and accuracy against step
// from a metrics.csv (tessera/metrics.h), two panels, drawn by gnuplot (Debian: gnuplot-nox)
// with its pngcairo terminal, or png where the build lacks cairo. The script is kept beside the
// picture (PNG_PATH.gp) so that it can be rerun or edited by hand.
#pragma once

#include <string>

namespace tessera::runlog {

// The gnuplot program on PATH ("gnuplot", else "gnuplot-nox"), or "" when there is none.
std::string find_gnuplot();

// Writes PNG_PATH.gp and runs gnuplot on it. Throws std::runtime_error when gnuplot is missing
// (naming the package) or fails (with its exit status and everything it printed), or when it
// leaves no PNG behind.
void plot_training_curves(const std::string& metrics_csv, const std::string& png_path);

}  // namespace tessera::runlog
