// report/color_scale.h — the colours of moe4d's pictures: a categorical palette for series and two
// continuous scales for heatmaps.
//
// Sequential (viridis) for magnitudes that start at zero; diverging (blue - white - red) for values
// that have a meaningful centre, such as expert load / mean load where 1.0 is perfect balance. Both
// are readable by colour-blind viewers and in greyscale. Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace moe4d {

enum class ColorScale { kSequential, kDiverging };

// "#4e79a7", ...: ten distinct colours (Tableau 10), repeating after the tenth.
std::string palette_color(size_t index);

// The colour at position t in [0, 1] of `scale` (t is clamped). For kDiverging 0.5 is white.
std::string scale_color(ColorScale scale, double t);

// The scale's anchor colours as (offset in [0, 1], colour), for a gradient legend bar.
std::vector<std::pair<double, std::string>> scale_stops(ColorScale scale);

}  // namespace moe4d
