// expert_placement/expert_placement.cc — greedy replica counts, LPT packing and a local search over
// replica slots, in integer arithmetic so that every rank decides identically (see the header).
#include "expert_placement/expert_placement.h"

#include <algorithm>
#include <functional>
#include <numeric>

#include <fmt/format.h>

#include "core/check.h"

namespace moe4d {
namespace {

// Per-copy loads are load * kScale / copies, truncated: exact for up to 16 copies, and integers,
// so no decision depends on floating-point rounding or summation order.
constexpr int64_t kScale = 720720;             // lcm(1..16)
constexpr int64_t kMaxLoad = int64_t(1) << 42;  // keeps load * kScale * slots below 2^63

void check_shape(int experts, int ep, int redundant) {
  MOE4D_CHECK_MSG(experts > 0 && ep > 0 && experts % ep == 0, "experts {} over ep {}", experts, ep);
  MOE4D_CHECK_MSG(redundant >= 0 && redundant % ep == 0 && redundant <= experts * (ep - 1),
                  "redundant slots {} for {} experts over ep {}", redundant, experts, ep);
}

// The working state of one plan: which replicas each rank holds and every rank's load.
struct Packing {
  int experts, ep, home, free_slots;
  std::vector<int64_t> load;            // [E] scaled observed load
  std::vector<int> copies;              // [E]
  std::vector<std::vector<int>> held;   // [ep][free_slots] replica experts, -1 empty
  std::vector<std::vector<int>> holds;  // [ep][E] copies of e on rank r (home included)

  int64_t per_copy(int e) const { return load[e] / copies[e]; }
  int64_t per_copy_with(int e, int c) const { return load[e] / c; }

  std::vector<int64_t> rank_loads() const {
    std::vector<int64_t> out(ep, 0);
    for (int r = 0; r < ep; ++r)
      for (int e = 0; e < experts; ++e) out[r] += holds[r][e] * per_copy(e);
    return out;
  }
};

// Rank loads sorted descending, compared lexicographically: lower the busiest rank first, then the
// next busiest (a plain max leaves plateaus the local search cannot cross).
struct Score {
  std::vector<int64_t> sorted;
  bool operator<(const Score& o) const { return sorted < o.sorted; }
};

Score score_of(const std::vector<int64_t>& loads) {
  Score s{loads};
  std::sort(s.sorted.begin(), s.sorted.end(), std::greater<>());
  return s;
}

// Rank loads if one copy of `from` on rank `r` became a copy of `to` (from == -1: an empty slot).
std::vector<int64_t> loads_after_reassign(const Packing& p, const std::vector<int64_t>& loads, int r, int from,
                                          int to) {
  std::vector<int64_t> out = loads;
  for (int q = 0; q < p.ep; ++q) {
    if (from >= 0 && p.holds[q][from] > 0) {
      const int64_t after = p.per_copy_with(from, p.copies[from] - 1);
      out[q] += (p.holds[q][from] - (q == r ? 1 : 0)) * after - p.holds[q][from] * p.per_copy(from);
    }
    if (p.holds[q][to] > 0 || q == r) {
      const int64_t after = p.per_copy_with(to, p.copies[to] + 1);
      out[q] += (p.holds[q][to] + (q == r ? 1 : 0)) * after - p.holds[q][to] * p.per_copy(to);
    }
  }
  return out;
}

void reassign(Packing& p, int r, int slot, int to) {
  const int from = p.held[r][slot];
  if (from >= 0) {
    --p.copies[from];
    --p.holds[r][from];
  }
  ++p.copies[to];
  ++p.holds[r][to];
  p.held[r][slot] = to;
}

// Step 3: first-improvement local search over single-slot reassignments and two-slot swaps.
void improve(Packing& p) {
  std::vector<int64_t> loads = p.rank_loads();
  Score best = score_of(loads);
  const int max_passes = 4 * std::max(1, p.free_slots * p.ep);
  for (int pass = 0; pass < max_passes; ++pass) {
    bool improved = false;
    for (int r = 0; r < p.ep && !improved; ++r)
      for (int s = 0; s < p.free_slots && !improved; ++s) {
        const int from = p.held[r][s];
        for (int to = 0; to < p.experts && !improved; ++to) {
          if (to == from || p.holds[r][to] > 0 || p.copies[to] >= p.ep) continue;
          const std::vector<int64_t> next = loads_after_reassign(p, loads, r, from, to);
          if (const Score sc = score_of(next); sc < best) {
            reassign(p, r, s, to);
            loads = next;
            best = sc;
            improved = true;
          }
        }
      }
    // Swaps move load between two ranks without changing any copy count.
    for (int a = 0; a < p.ep && !improved; ++a)
      for (int b = a + 1; b < p.ep && !improved; ++b)
        for (int sa = 0; sa < p.free_slots && !improved; ++sa)
          for (int sb = 0; sb < p.free_slots && !improved; ++sb) {
            const int ea = p.held[a][sa], eb = p.held[b][sb];
            if (ea == eb || ea < 0 || eb < 0 || p.holds[a][eb] > 0 || p.holds[b][ea] > 0) continue;
            std::vector<int64_t> next = loads;
            const int64_t delta = p.per_copy(eb) - p.per_copy(ea);
            next[a] += delta;
            next[b] -= delta;
            if (const Score sc = score_of(next); sc < best) {
              p.held[a][sa] = eb;
              p.held[b][sb] = ea;
              --p.holds[a][ea], ++p.holds[a][eb], --p.holds[b][eb], ++p.holds[b][ea];
              loads = next;
              best = sc;
              improved = true;
            }
          }
    if (!improved) break;
  }
}

// Steps 1 and 2: greedy counts, then LPT packing of the replicas.
void pack_lpt(Packing& p, const std::vector<int64_t>& load, int redundant) {
  const int experts = p.experts, ep = p.ep;
  // 1. Counts: the next copy goes to the largest load per copy (load_a / c_a > load_b / c_b is
  //    compared as load_a * c_b > load_b * c_a, exactly).
  std::vector<int> want(experts, 1);
  for (int i = 0; i < redundant; ++i) {
    int pick = -1;
    for (int e = 0; e < experts; ++e) {
      if (want[e] >= ep) continue;
      if (pick < 0 || load[e] * want[pick] > load[pick] * want[e]) pick = e;
    }
    ++want[pick];
  }
  // 2. LPT: replicas by per-copy load (final counts), heaviest first, onto the least loaded rank with
  //    a free slot not holding the expert; a rank holding it only if no other has room.
  std::vector<int> items;
  for (int e = 0; e < experts; ++e)
    for (int c = 1; c < want[e]; ++c) items.push_back(e);
  std::stable_sort(items.begin(), items.end(),
                   [&](int a, int b) { return p.load[a] / want[a] > p.load[b] / want[b]; });
  std::vector<int64_t> rank_load(ep, 0);
  for (int e = 0; e < experts; ++e) rank_load[e / p.home] += p.load[e] / want[e];
  std::vector<int> used(ep, 0);
  for (int e : items) {
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; ++pass)
      for (int r = 0; r < ep; ++r) {
        if (used[r] >= p.free_slots || (pass == 0 && p.holds[r][e] > 0)) continue;
        if (best < 0 || rank_load[r] < rank_load[best]) best = r;
      }
    MOE4D_CHECK(best >= 0);
    p.held[best][used[best]++] = e;
    ++p.holds[best][e];
    ++p.copies[e];
    rank_load[best] += p.load[e] / want[e];
  }

}

// Second construction: R times, one more copy of an expert of the busiest rank, onto the rank and
// for the expert where the resulting loads score best.
void relieve_bottleneck(Packing& p, int redundant) {
  std::vector<int> used(p.ep, 0);
  for (int i = 0; i < redundant; ++i) {
    const std::vector<int64_t> loads = p.rank_loads();
    const int b = int(std::max_element(loads.begin(), loads.end()) - loads.begin());
    int best_e = -1, best_r = -1;
    Score best;
    for (int pass = 0; pass < 2 && best_e < 0; ++pass)  // pass 1: any expert (the busiest rank may be full)
      for (int e = 0; e < p.experts; ++e) {
        if ((pass == 0 && p.holds[b][e] == 0) || p.copies[e] >= p.ep) continue;
        for (int r = 0; r < p.ep; ++r) {
          if (used[r] >= p.free_slots || p.holds[r][e] > 0) continue;
          const Score sc = score_of(loads_after_reassign(p, loads, r, -1, e));
          if (best_e < 0 || sc < best) best = sc, best_e = e, best_r = r;
        }
      }
    if (best_e < 0) {  // every free slot is on ranks holding every expert with room: duplicate
      for (int r = 0; r < p.ep && best_r < 0; ++r)
        if (used[r] < p.free_slots) best_r = r;
      best_e = 0;
      for (int e = 1; e < p.experts; ++e)
        if (p.copies[e] < p.copies[best_e]) best_e = e;
    }
    reassign(p, best_r, used[best_r]++, best_e);
  }
}

int64_t busiest(const ExpertPlacement& pl, const std::vector<int64_t>& scaled) {
  std::vector<int64_t> loads(pl.ep, 0);
  for (int slot = 0; slot < pl.slots(); ++slot) {
    const int e = pl.slot_expert[slot];
    loads[pl.rank_of_slot(slot)] += scaled[e] / pl.replicas[e];
  }
  return *std::max_element(loads.begin(), loads.end());
}

}  // namespace

std::vector<int> ExpertPlacement::slots_of(int expert) const {
  std::vector<int> out;
  for (int s = 0; s < slots(); ++s)
    if (slot_expert[s] == expert) out.push_back(s);
  return out;
}

std::string ExpertPlacement::describe() const {
  std::string out;
  for (int r = 0; r < ep; ++r) {
    out += fmt::format("{}r{}:[", r ? " " : "", r);
    for (int l = 0; l < slots_per_rank(); ++l)
      out += fmt::format("{}{}", l == 0 ? "" : (l == home_slots() ? " | " : " "), expert_at(r, l));
    out += "]";
  }
  return out;
}

ExpertPlacement expert_placement_initial(int experts, int ep, int redundant) {
  return expert_placement_plan(std::vector<int64_t>(experts, 1), experts, ep, redundant);
}

ExpertPlacement expert_placement_plan(const std::vector<int64_t>& load, int experts, int ep, int redundant,
                                      const ExpertPlacement* current) {
  check_shape(experts, ep, redundant);
  MOE4D_CHECK_EQ(load.size(), size_t(experts));
  Packing p{.experts = experts, .ep = ep, .home = experts / ep, .free_slots = redundant / ep};
  p.load.resize(experts);
  for (int e = 0; e < experts; ++e) {
    MOE4D_CHECK_MSG(load[e] >= 0 && load[e] < kMaxLoad, "expert {} load {}", e, load[e]);
    p.load[e] = load[e] * kScale;
  }
  p.copies.assign(experts, 1);
  p.held.assign(ep, std::vector<int>(p.free_slots, -1));
  p.holds.assign(ep, std::vector<int>(experts, 0));
  for (int e = 0; e < experts; ++e) p.holds[e / p.home][e] = 1;

  Packing lpt = p;
  pack_lpt(lpt, load, redundant);
  improve(lpt);
  relieve_bottleneck(p, redundant);
  improve(p);
  // The better of the two constructions after local search (ties: LPT).
  if (!(score_of(p.rank_loads()) < score_of(lpt.rank_loads()))) p = std::move(lpt);

  ExpertPlacement out{.experts = experts, .ep = ep, .redundant = redundant};
  out.replicas = p.copies;
  out.slot_expert.assign(out.slots(), -1);
  const bool comparable = current && current->experts == experts && current->ep == ep &&
                          current->redundant == redundant;
  for (int r = 0; r < ep; ++r) {
    for (int h = 0; h < p.home; ++h) out.slot_expert[size_t(r) * out.slots_per_rank() + h] = r * p.home + h;
    // Replica experts that the current placement already has on this rank keep their local slot.
    std::vector<int> pending = p.held[r];
    std::vector<int> local(p.free_slots, -1);
    if (comparable)
      for (int s = 0; s < p.free_slots; ++s) {
        auto it = std::find(pending.begin(), pending.end(), current->expert_at(r, p.home + s));
        if (it == pending.end()) continue;
        local[s] = *it;
        pending.erase(it);
      }
    std::sort(pending.begin(), pending.end());
    for (int s = 0, next = 0; s < p.free_slots; ++s)
      if (local[s] < 0) local[s] = pending[next++];
    for (int s = 0; s < p.free_slots; ++s) out.slot_expert[size_t(r) * out.slots_per_rank() + p.home + s] = local[s];
  }
  // Hysteresis: keep the current placement unless the new one is better by more than 1/32.
  if (comparable && busiest(*current, p.load) * 32 <= busiest(out, p.load) * 33) return *current;
  return out;
}

std::vector<double> expert_placement_rank_load(const ExpertPlacement& placement, const std::vector<int64_t>& load) {
  std::vector<double> out(placement.ep, 0.0);
  for (int slot = 0; slot < placement.slots(); ++slot) {
    const int e = placement.slot_expert[slot];
    out[placement.rank_of_slot(slot)] += double(load[e]) / placement.replicas[e];
  }
  return out;
}

std::vector<double> expert_home_rank_load(int experts, int ep, const std::vector<int64_t>& load) {
  std::vector<double> out(ep, 0.0);
  for (int e = 0; e < experts; ++e) out[e / (experts / ep)] += double(load[e]);
  return out;
}

int expert_placement_changed_slots(const ExpertPlacement& before, const ExpertPlacement& after) {
  MOE4D_CHECK_EQ(before.slot_expert.size(), after.slot_expert.size());
  int changed = 0;
  for (size_t s = 0; s < after.slot_expert.size(); ++s) changed += before.slot_expert[s] != after.slot_expert[s];
  return changed;
}

}  // namespace moe4d
