#!/usr/bin/env python3
"""Summarizes Google Benchmark JSON output (--benchmark_out=FILE --benchmark_out_format=json,
run with --benchmark_repetitions=N) as one markdown row per benchmark: the median real time, the
spread (min-max over the repetitions), the coefficient of variation, and whether the row is
stable (cv <= 5 %). An optional baseline regex adds each row's ratio to the baseline's median.
--time cpu summarizes the CPU time instead (on a machine shared with other work, where the wall
time of a 1-thread benchmark includes the time other processes held its core).

  bench/tools/summarize.py OUT.json [--baseline REGEX] [--filter REGEX] [--time real|cpu]
"""
import argparse
import json
import re
import statistics
import sys

UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json_file")
    parser.add_argument("--baseline", help="regex of the baseline benchmark's name")
    parser.add_argument("--filter", default=".", help="regex of the benchmarks to show")
    parser.add_argument("--time", choices=("real", "cpu"), default="real",
                        help="which time to summarize (default: real)")
    args = parser.parse_args()
    with open(args.json_file, encoding="utf-8") as f:
        data = json.load(f)
    runs: dict[str, list[float]] = {}
    order: list[str] = []
    for b in data.get("benchmarks", []):
        if b.get("run_type") != "iteration" or b.get("error_occurred"):
            continue
        name = b["run_name"]
        ns = b[f"{args.time}_time"] * UNIT_NS[b.get("time_unit", "ns")]
        if name not in runs:
            runs[name] = []
            order.append(name)
        runs[name].append(ns)
    if not runs:
        print("no iteration rows: run with --benchmark_repetitions=N and without "
              "--benchmark_report_aggregates_only", file=sys.stderr)
        return 1
    baseline = None
    if args.baseline:
        matches = [n for n in order if re.search(args.baseline, n)]
        if matches:
            baseline = statistics.median(runs[matches[0]])
    print("| benchmark | median ns | min–max ns | cv | stable | ÷ baseline |")
    print("| --- | ---: | ---: | ---: | :---: | ---: |")
    for name in order:
        if not re.search(args.filter, name):
            continue
        values = runs[name]
        med = statistics.median(values)
        cv = statistics.pstdev(values) / statistics.mean(values) * 100 if len(values) > 1 else 0.0
        ratio = f"{med / baseline:.2f}×" if baseline else ""
        stable = "yes" if cv <= 5.0 else "no"
        print(f"| `{name}` | {med:,.3g} | {min(values):,.3g}–{max(values):,.3g} | {cv:.1f} % | {stable} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
