// parallel/rank_grid.cc — grid arithmetic: coordinates, groups and the placement map (see the header).
#include "parallel/rank_grid.h"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/check.h"
#include "core/error.h"

namespace moe4d {
namespace {

constexpr ParallelDim kAllDims[] = {ParallelDim::kTP, ParallelDim::kEP, ParallelDim::kDP, ParallelDim::kPP};
// describe() lists coordinates in this (conventional) order.
constexpr ParallelDim kCoordOrder[] = {ParallelDim::kDP, ParallelDim::kEP, ParallelDim::kTP, ParallelDim::kPP};

int index_of(ParallelDim dim) { return static_cast<int>(dim); }

std::vector<std::string> split_order(const std::string& order) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(order);
  while (std::getline(in, part, '-')) parts.push_back(part);
  return parts;
}

}  // namespace

const char* parallel_dim_name(ParallelDim dim) {
  switch (dim) {
    case ParallelDim::kTP: return "tp";
    case ParallelDim::kEP: return "ep";
    case ParallelDim::kDP: return "dp";
    case ParallelDim::kPP: return "pp";
  }
  return "?";
}

int GridCoord::get(ParallelDim dim) const {
  switch (dim) {
    case ParallelDim::kTP: return tp;
    case ParallelDim::kEP: return ep;
    case ParallelDim::kDP: return dp;
    case ParallelDim::kPP: return pp;
  }
  return 0;
}

void GridCoord::set(ParallelDim dim, int value) {
  switch (dim) {
    case ParallelDim::kTP: tp = value; break;
    case ParallelDim::kEP: ep = value; break;
    case ParallelDim::kDP: dp = value; break;
    case ParallelDim::kPP: pp = value; break;
  }
}

RankGrid::RankGrid(int dp, int ep, int tp, int pp, const std::string& order, std::vector<int> device_list, int cp)
    : order_{ParallelDim::kTP, ParallelDim::kEP, ParallelDim::kDP, ParallelDim::kPP},
      order_string_(order),
      device_list_(std::move(device_list)),
      cp_(cp) {
  sizes_[index_of(ParallelDim::kTP)] = tp;
  sizes_[index_of(ParallelDim::kEP)] = ep;
  sizes_[index_of(ParallelDim::kDP)] = dp;
  sizes_[index_of(ParallelDim::kPP)] = pp;
  for (ParallelDim dim : kAllDims)
    if (size(dim) < 1) fail("rank grid: {} size is {}; every parallel size must be >= 1", parallel_dim_name(dim), size(dim));

  if (cp < 1 || (dp * ep) % cp != 0)
    fail("rank grid: context parallel size {} must be >= 1 and divide dp {} x ep {} = {}", cp, dp, ep, dp * ep);

  std::vector<std::string> parts = split_order(order);
  bool valid = parts.size() == 4;
  bool seen[4] = {false, false, false, false};
  for (size_t i = 0; valid && i < parts.size(); ++i) {
    auto it = std::find_if(std::begin(kAllDims), std::end(kAllDims),
                           [&](ParallelDim d) { return parts[i] == parallel_dim_name(d); });
    valid = it != std::end(kAllDims) && !seen[index_of(*it)];
    if (valid) {
      seen[index_of(*it)] = true;
      order_[i] = *it;
    }
  }
  if (!valid)
    fail("rank grid: rank_order '{}' is not a permutation of tp, ep, dp, pp joined by '-' (e.g. 'tp-ep-dp-pp', fastest "
         "varying first)",
         order);

  world_size_ = dp * ep * tp * pp;
  if (device_list_.empty()) {
    device_list_.resize(world_size_);
    for (int i = 0; i < world_size_; ++i) device_list_[i] = i;
  } else if (static_cast<int>(device_list_.size()) != world_size_) {
    fail("rank grid: device_list has {} entries, but dp {} x ep {} x tp {} x pp {} = {} positions need one world rank "
         "each",
         device_list_.size(), dp, ep, tp, pp, world_size_);
  }
  position_of_.assign(world_size_, -1);
  for (int i = 0; i < world_size_; ++i) {
    int r = device_list_[i];
    if (r < 0 || r >= world_size_)
      fail("rank grid: device_list[{}] = {} is not a world rank; expected a permutation of 0..{}", i, r, world_size_ - 1);
    if (position_of_[r] >= 0)
      fail("rank grid: device_list names world rank {} twice (positions {} and {}); expected a permutation of 0..{}", r,
           position_of_[r], i, world_size_ - 1);
    position_of_[r] = i;
  }
}

int RankGrid::size(ParallelDim dim) const { return sizes_[index_of(dim)]; }

GridCoord RankGrid::coord(int rank) const {
  MOE4D_CHECK_MSG(rank >= 0 && rank < world_size_, "rank {} outside world of {}", rank, world_size_);
  int position = position_of_[rank];
  GridCoord c;
  for (ParallelDim dim : order_) {
    c.set(dim, position % size(dim));
    position /= size(dim);
  }
  return c;
}

int RankGrid::rank(const GridCoord& c) const {
  for (ParallelDim dim : kAllDims)
    MOE4D_CHECK_MSG(c.get(dim) >= 0 && c.get(dim) < size(dim), "{} coordinate {} outside [0, {})",
                    parallel_dim_name(dim), c.get(dim), size(dim));
  // Horner form, slowest dimension first.
  int position = 0;
  for (int i = 3; i >= 0; --i) position = position * size(order_[i]) + c.get(order_[i]);
  return device_list_[position];
}


std::vector<int> RankGrid::group(int rank, std::initializer_list<ParallelDim> dims) const {
  GridCoord base = coord(rank);
  int count = 1;
  bool used[4] = {false, false, false, false};
  for (ParallelDim dim : dims) {
    MOE4D_CHECK_MSG(!used[index_of(dim)], "dimension {} listed twice", parallel_dim_name(dim));
    used[index_of(dim)] = true;
    count *= size(dim);
  }
  std::vector<int> members;
  members.reserve(count);
  for (int i = 0; i < count; ++i) {
    GridCoord c = base;
    int rest = i;
    for (ParallelDim dim : dims) {
      c.set(dim, rest % size(dim));
      rest /= size(dim);
    }
    members.push_back(this->rank(c));
  }
  return members;
}

int RankGrid::group_rank(int rank, std::initializer_list<ParallelDim> dims) const {
  GridCoord c = coord(rank);
  int index = 0;
  int stride = 1;
  for (ParallelDim dim : dims) {
    index += c.get(dim) * stride;
    stride *= size(dim);
  }
  return index;
}

std::vector<std::vector<int>> RankGrid::groups(std::initializer_list<ParallelDim> dims) const {
  std::vector<std::vector<int>> result;
  for (int r = 0; r < world_size_; ++r) {
    std::vector<int> members = group(r, dims);
    if (*std::min_element(members.begin(), members.end()) == r) result.push_back(std::move(members));
  }
  return result;
}

int RankGrid::data_replica(int rank) const {
  const GridCoord c = coord(rank);
  return c.dp * size(ParallelDim::kEP) + c.ep;
}

std::vector<int> RankGrid::replicas(int rank, int first, int stride, int count) const {
  GridCoord c = coord(rank);
  std::vector<int> members;
  for (int i = 0; i < count; ++i) {
    const int replica = first + i * stride;
    c.dp = replica / size(ParallelDim::kEP);
    c.ep = replica % size(ParallelDim::kEP);
    members.push_back(this->rank(c));
  }
  return members;
}

std::vector<int> RankGrid::cp_group(int rank) const { return replicas(rank, dense_replica(rank) * cp_, 1, cp_); }

std::vector<int> RankGrid::dense_dp_group(int rank) const {
  return replicas(rank, cp_rank(rank), cp_, size(ParallelDim::kDP) * size(ParallelDim::kEP) / cp_);
}

std::vector<std::vector<int>> RankGrid::cp_groups() const {
  std::vector<std::vector<int>> result;
  for (int r = 0; r < world_size_; ++r) {
    std::vector<int> members = cp_group(r);
    if (*std::min_element(members.begin(), members.end()) == r) result.push_back(std::move(members));
  }
  return result;
}

bool RankGrid::spans_nodes(const std::vector<int>& group, int ranks_per_node) {
  if (group.empty() || ranks_per_node <= 0) return false;
  int node = node_of(group.front(), ranks_per_node);
  return std::any_of(group.begin(), group.end(), [&](int r) { return node_of(r, ranks_per_node) != node; });
}

std::string RankGrid::describe(int ranks_per_node) const {
  int per_node = ranks_per_node > 0 ? ranks_per_node : world_size_;
  std::string out = fmt::format("rank grid: dp {} x ep {} x tp {} x pp {} = {} ranks, order {}, {} ranks per node\n",
                                size(ParallelDim::kDP), size(ParallelDim::kEP), size(ParallelDim::kTP),
                                size(ParallelDim::kPP), world_size_, order_string_, per_node);
  int nodes = (world_size_ + per_node - 1) / per_node;
  for (int node = 0; node < nodes; ++node) {
    out += fmt::format("node {}:", node);
    for (int r = node * per_node; r < std::min(world_size_, (node + 1) * per_node); ++r) {
      GridCoord c = coord(r);
      out += fmt::format(" {}(dp={},ep={},tp={},pp={})", r, c.dp, c.ep, c.tp, c.pp);
    }
    out += "\n";
  }
  for (ParallelDim dim : kCoordOrder) {
    auto all = groups({dim});
    out += fmt::format("{} groups ({} of size {}):", parallel_dim_name(dim), all.size(), size(dim));
    bool any_span = false;
    for (const auto& g : all) {
      bool span = size(dim) > 1 && spans_nodes(g, per_node);
      any_span = any_span || span;
      out += fmt::format(" {{{}}}{}", fmt::join(g, ","), span ? "*" : "");
    }
    out += any_span ? "  (* spans nodes)\n" : "\n";
  }
  if (cp_ > 1) {  // the dense grid: tp x cp x DP_dense
    out += fmt::format("dense grid: tp {} x cp {} x dp_dense {}; cp groups:", size(ParallelDim::kTP), cp_,
                       size(ParallelDim::kDP) * size(ParallelDim::kEP) / cp_);
    for (const auto& g : cp_groups()) out += fmt::format(" {{{}}}", fmt::join(g, ","));
    out += "\n";
  }
  return out;
}

}  // namespace moe4d
