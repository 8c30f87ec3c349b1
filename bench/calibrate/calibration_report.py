#!/usr/bin/env python3
"""bench/calibrate/calibration_report.py: the JSON document of calibrate.sh (python3 stdlib only).

Reads what calibrate.sh left in OUT (layouts.txt; per layout config.yaml, plan.json, metrics.<rep>.jsonl,
uptime.txt, skipped.txt / excluded.txt) and prints, per layout, predicted vs measured step time and peak
memory per rank with their relative errors and the spread over repeats; then the order of the layouts
by step time (predicted vs measured: Spearman rank correlation, exact match, discordant pairs) and the
summary statistics against the issue's thresholds.

Measured step time: median of `time.step_s` over every step after the first --warmup of every repeat
(the first steps allocate arenas and fault pages in). Spread: the per-repeat medians (min, max) and
(max - min) / median. With --statistic best the comparison uses the fastest repeat's median instead:
on a machine shared with other work, other processes only ever slow a run down, so the fastest
repeat is the closest to the quiet machine the planner describes (both numbers are always listed,
with the 1-minute load average before each run; a run that started with a load above the core
count is flagged).

Measured memory: the largest rank's params + grads + optimizer state + activation peak (metrics
"memory.per_rank[].model_state_and_activations_bytes", where the activation peak includes scratch) plus
the pipeline's message buffers (pipeline.peak_transfer_bytes); predicted: the planner's total less its
reserve (the reserve is a fraction of device memory for the runtime and fragmentation, not something
the runtime measures). rss_peak is reported too but not compared: it also holds the MPI library, the
mapped token shards and allocator slack.
"""
import argparse
import glob
import json
import os
import statistics
import sys


def median(values):
    return statistics.median(values) if values else None


def read_metrics(path):
    records = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                record = json.loads(line)
                records[record["step"]] = record  # a repeated step: the later line wins
    return [records[k] for k in sorted(records)]


def measured_memory(record):
    per_rank = record.get("memory", {}).get("per_rank", [])
    if not per_rank:
        return None
    transfer = max(record.get("pipeline", {}).get("peak_transfer_bytes", [0]) or [0])
    peak = max(per_rank, key=lambda r: r["model_state_and_activations_bytes"])
    return {
        "bytes": peak["model_state_and_activations_bytes"] + transfer,
        "params_bytes": peak["params_bytes"],
        "grads_bytes": peak["grads_bytes"],
        "optimizer_bytes": peak["optimizer_bytes"],
        "activations_peak_bytes": peak["activations_peak_bytes"],
        "pipeline_transfer_bytes": transfer,
        "rss_peak_bytes": max(r["rss_peak_bytes"] for r in per_rank),
    }


def ep_rank_imbalance(record, ep):
    """Busiest EP rank's routed rows over the mean, averaged over MoE layers (experts are split over EP
    ranks in contiguous blocks). The planner assumes balanced routing; this says how far the run was."""
    layers = record.get("moe", {}).get("layers", [])
    ratios = []
    for layer in layers:
        load = layer.get("tokens_per_expert", [])
        if not load or ep <= 1 or len(load) % ep:
            continue
        per = len(load) // ep
        ranks = [sum(load[r * per:(r + 1) * per]) for r in range(ep)]
        mean = sum(ranks) / ep
        if mean > 0:
            ratios.append(max(ranks) / mean)
    return statistics.mean(ratios) if ratios else None


def comm_exposed(records):
    groups = {}
    for r in records:
        for g, v in r.get("time", {}).get("comm", {}).items():
            groups.setdefault(g, []).append(v.get("exposed_s", 0.0))
    return {g: median(v) for g, v in groups.items()}


def ranks_of(values):
    """Ranks 1..n with ties given their average rank (for Spearman)."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a, b):
    if len(a) < 2:
        return None
    ra, rb = ranks_of(a), ranks_of(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else None


def relative_error(predicted, measured):
    return (predicted - measured) / measured


def error_stats(errors):
    magnitudes = [abs(e) for e in errors]
    return {"max_abs_relative_error": max(magnitudes), "median_abs_relative_error": median(magnitudes),
            "mean_relative_error": statistics.mean(errors)} if errors else {}


def read_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.strip() for line in f if line.strip()]


def load_of(uptime_line):
    """The 1-minute load average of an `uptime` line (None if absent)."""
    try:
        return float(uptime_line.split("load average:")[1].split(",")[0])
    except (IndexError, ValueError):
        return None


def layout_entry(out, name, base, ranks, parallel, warmup, statistic, cores):
    d = os.path.join(out, "layouts", name)
    entry = {"name": name, "config": base, "ranks": ranks, "parallel": parallel or "single",
             "config_file": os.path.join(d, "config.yaml")}
    skipped = read_lines(os.path.join(d, "skipped.txt"))
    excluded = read_lines(os.path.join(d, "excluded.txt"))
    metrics_files = sorted(glob.glob(os.path.join(d, "metrics.*.jsonl")))
    if skipped:
        entry["reason"] = skipped[0]
        return "skipped", entry
    if excluded and not metrics_files:
        entry["reason"] = excluded[0]
        return "excluded", entry
    with open(os.path.join(d, "plan.json")) as f:
        plan = json.load(f)
    memory = plan["memory"]
    entry["predicted"] = {
        "step_s": plan["time"]["step_seconds"],
        "memory_bytes": memory["total_bytes"] - memory["reserve_bytes"],
        "time": plan["time"],
        "memory": memory,
        "layout": plan["layout"]["string"],
    }
    all_steps, per_repeat, last = [], [], None
    for path in metrics_files:
        records = read_metrics(path)
        timed = [r["time"]["step_s"] for r in records if r["step"] > warmup and "time" in r]
        if timed:
            all_steps += timed
            per_repeat.append(median(timed))
        if records:
            last = records
    if not all_steps:
        entry["reason"] = "no measured steps (see train.*.log)"
        return "skipped", entry
    pooled = median(all_steps)
    step = pooled if statistic == "median" else min(per_repeat)
    loads = [load_of(line) for line in read_lines(os.path.join(d, "uptime.txt"))]
    entry["measured"] = {
        "step_s": step,
        "statistic": statistic,
        "median_step_s": pooled,
        "best_repeat_step_s": min(per_repeat),
        "steps_measured": len(all_steps),
        "repeat_medians_s": per_repeat,
        "spread": (max(per_repeat) - min(per_repeat)) / pooled,
        "load_before_runs": loads,
        "loaded": any(load is not None and load > cores for load in loads),
        "memory": measured_memory(last[-1]),
        "comm_exposed_s": comm_exposed([r for r in last if r["step"] > warmup]),
    }
    ep = plan["layout"].get("ep", 1)
    if ep > 1:
        entry["measured"]["ep_rank_routing_imbalance"] = imbalance_from_runs(metrics_files, ep, warmup)
    imbalance = read_lines(os.path.join(d, "imbalance.txt"))
    entry["predicted"]["expert_imbalance"] = imbalance[0] if imbalance else "not passed (balanced routing assumed)"
    entry["step_time_relative_error"] = relative_error(entry["predicted"]["step_s"], step)
    mem = entry["measured"]["memory"]
    if mem:
        entry["memory_relative_error"] = relative_error(entry["predicted"]["memory_bytes"], mem["bytes"])
    if excluded:
        entry["reason"] = excluded[0]
        return "oversubscribed", entry
    return "compared", entry


def imbalance_from_runs(paths, ep, warmup):
    """Mean over the measured steps of ep_rank_imbalance: what `moe4d plan --expert-imbalance` takes."""
    values = []
    for path in paths:
        for record in read_metrics(path):
            if record["step"] > warmup:
                value = ep_rank_imbalance(record, ep)
                if value is not None:
                    values.append(value)
    return statistics.mean(values) if values else None


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "imbalance":
        # calibration_report.py imbalance EP WARMUP METRICS...: prints the routing imbalance of the
        # busiest of EP expert-parallel ranks (1 when the metrics have no MoE layers).
        value = imbalance_from_runs(sys.argv[4:], int(sys.argv[2]), int(sys.argv[3]))
        print(f"{value if value is not None else 1.0:.4f}")
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--warmup", type=int, required=True)
    ap.add_argument("--cores", type=int, required=True)
    ap.add_argument("--statistic", choices=("median", "best"), default="median")
    args = ap.parse_args()

    groups = {"compared": [], "skipped": [], "excluded": [], "oversubscribed": []}
    for line in read_lines(os.path.join(args.out, "layouts.txt")):
        name, base, ranks, parallel = line.split("|")
        kind, entry = layout_entry(args.out, name, base, int(ranks), parallel, args.warmup, args.statistic,
                                   args.cores)
        groups[kind].append(entry)

    compared = groups["compared"]
    time_errors = [e["step_time_relative_error"] for e in compared]
    memory_errors = [e["memory_relative_error"] for e in compared if "memory_relative_error" in e]
    predicted = [e["predicted"]["step_s"] for e in compared]
    measured = [e["measured"]["step_s"] for e in compared]
    by_predicted = [e["name"] for e in sorted(compared, key=lambda e: e["predicted"]["step_s"])]
    by_measured = [e["name"] for e in sorted(compared, key=lambda e: e["measured"]["step_s"])]
    discordant = [[a["name"], b["name"]] for i, a in enumerate(compared) for b in compared[i + 1:]
                  if (a["predicted"]["step_s"] - b["predicted"]["step_s"]) *
                  (a["measured"]["step_s"] - b["measured"]["step_s"]) < 0]
    # Pairs whose measured gap is inside the repeat spread cannot be ordered by the measurement itself.
    unresolved = [pair for pair in discordant if any(
        abs(a["measured"]["step_s"] - b["measured"]["step_s"]) <
        max(a["measured"]["spread"], b["measured"]["spread"]) * min(a["measured"]["step_s"], b["measured"]["step_s"])
        for a in compared if a["name"] == pair[0] for b in compared if b["name"] == pair[1])]
    t = error_stats(time_errors)
    m = error_stats(memory_errors)
    summary = {
        "layouts_compared": len(compared),
        "step_time": t,
        "memory": m,
        "order": {"spearman": spearman(predicted, measured), "exact_match": by_predicted == by_measured,
                  "predicted_fastest_first": by_predicted, "measured_fastest_first": by_measured,
                  "discordant_pairs": discordant, "discordant_within_measured_spread": unresolved},
        "statistic": args.statistic,
        "median_repeat_spread": median([e["measured"]["spread"] for e in compared]),
        "layouts_measured_under_load": [e["name"] for e in compared if e["measured"]["loaded"]],
        "thresholds": {
            "at_least_8_layouts": len(compared) >= 8,
            "step_time_all_within_15pct": bool(t) and t["max_abs_relative_error"] <= 0.15,
            "step_time_median_within_10pct": bool(t) and t["median_abs_relative_error"] <= 0.10,
            "same_order": by_predicted == by_measured,
            "memory_all_within_10pct": bool(m) and m["max_abs_relative_error"] <= 0.10,
        },
    }
    bench = {}
    details = os.path.join(args.out, "bench.json")
    if os.path.exists(details):
        with open(details) as f:
            b = json.load(f)
        bench = {"fp32_peak_gflops": b["gemm"]["fp32"].get("peak_gflops"),
                 "bf16": b["gemm"]["bf16"].get("implementation") or b["gemm"]["bf16"].get("reason"),
                 "memory_triad_gbps": b["memory_bandwidth"]["triad_gbps"],
                 "collectives": [{k: c[k] for k in ("collective", "ranks", "regimes",
                                                     "fit_median_relative_error")} for c in b["collectives"]],
                 "seconds": b.get("seconds"), "load": read_lines(os.path.join(args.out, "bench.uptime"))}
    doc = {"cluster_file": args.cluster, "cores": args.cores, "warmup_steps_excluded": args.warmup,
           "repeats": max((len(e["measured"]["repeat_medians_s"]) for e in compared), default=0),
           "bench": bench, "summary": summary}
    doc.update(groups)
    json.dump(doc, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
