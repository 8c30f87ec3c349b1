// report/color_scale.cc — palette and continuous colour scales (piecewise-linear in RGB).
#include "report/color_scale.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace moe4d {

namespace {

struct Rgb {
  int r, g, b;
};

// Viridis at six evenly spaced points.
constexpr std::array<Rgb, 6> kViridis = {{{0x44, 0x01, 0x54},
                                          {0x41, 0x44, 0x87},
                                          {0x2a, 0x78, 0x8e},
                                          {0x22, 0xa8, 0x84},
                                          {0x7a, 0xd1, 0x51},
                                          {0xfd, 0xe7, 0x25}}};
// ColorBrewer RdBu, reversed so that low is blue and high is red, white in the middle.
constexpr std::array<Rgb, 7> kBlueWhiteRed = {{{0x21, 0x66, 0xac},
                                               {0x67, 0xa9, 0xcf},
                                               {0xd1, 0xe5, 0xf0},
                                               {0xf7, 0xf7, 0xf7},
                                               {0xfd, 0xdb, 0xc7},
                                               {0xef, 0x8a, 0x62},
                                               {0xb2, 0x18, 0x2b}}};

std::string hex(const Rgb& c) { return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b); }

template <size_t N>
std::string interpolate(const std::array<Rgb, N>& anchors, double t) {
  t = std::clamp(std::isfinite(t) ? t : 0.0, 0.0, 1.0);
  const double pos = t * (N - 1);
  const size_t i = std::min(static_cast<size_t>(pos), N - 2);
  const double f = pos - i;
  const Rgb& a = anchors[i];
  const Rgb& b = anchors[i + 1];
  auto mix = [f](int x, int y) { return static_cast<int>(std::lround(x + (y - x) * f)); };
  return hex({mix(a.r, b.r), mix(a.g, b.g), mix(a.b, b.b)});
}

template <size_t N>
std::vector<std::pair<double, std::string>> stops_of(const std::array<Rgb, N>& anchors) {
  std::vector<std::pair<double, std::string>> stops;
  for (size_t i = 0; i < N; ++i) stops.emplace_back(double(i) / (N - 1), hex(anchors[i]));
  return stops;
}

}  // namespace

std::string palette_color(size_t index) {
  static constexpr const char* kTableau10[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                               "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  return kTableau10[index % 10];
}

std::string scale_color(ColorScale scale, double t) {
  return scale == ColorScale::kSequential ? interpolate(kViridis, t) : interpolate(kBlueWhiteRed, t);
}

std::vector<std::pair<double, std::string>> scale_stops(ColorScale scale) {
  return scale == ColorScale::kSequential ? stops_of(kViridis) : stops_of(kBlueWhiteRed);
}

}  // namespace moe4d
