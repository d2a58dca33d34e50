#!/usr/bin/env python3
"""What the cores ran together, from a scheduler trace.

    perf sched record -a -o sched.data -- sleep 6     # while a load runs
    perf sched timehist -i sched.data | scripts/sched-shares.py [--step-us 50]

Reads `perf sched timehist` lines (time, [cpu], task, wait, delay, run
time: each ends a stretch of `task` on `cpu`), samples every `--step-us`
microseconds which task every core was running, and prints, best first,
the share of the trace's time each combination of tasks took, one task
per core (`idle` for an idle core). Thread names are grouped by the
prefix before their `[tid/pid]`, so the server's threads read as
`mosaic-embed-ah`, `mosaic-graph`, `tokio-rt-worker` and so on (tokio's
blocking pool, which runs request handlers, shares the workers' name);
`:-1` is perf's name for a thread that exited before it was named (the
embedder's short-lived helper threads in a server trace).

With `--gaps PREFIX` it also prints the stretches in which no core ran a
task whose name starts with PREFIX (`mosaic-embed` or `:-1` for the
embedding: give it twice for both), those longer than `--gap-ms`
counted, with their median and their share of the time.
"""

import argparse
import bisect
import collections
import re
import sys

LINE = re.compile(r"\s*([\d.]+)\s+\[(\d+)\]\s+(.+?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step-us", type=float, default=50.0)
    parser.add_argument("--most", type=int, default=25)
    parser.add_argument("--gaps", action="append", default=[],
                        help="task name prefix whose absence from every core is reported")
    parser.add_argument("--gap-ms", type=float, default=2.0)
    args = parser.parse_args()
    stretches = collections.defaultdict(list)
    for line in sys.stdin:
        m = LINE.match(line)
        if not m:
            continue
        end, cpu, task, run_ms = float(m.group(1)), int(m.group(2)), m.group(3), float(m.group(6))
        name = re.sub(r"\[-?\d+(/-?\d+)?\]", "", task).strip()
        stretches[cpu].append((end - run_ms / 1000.0, end, "idle" if name.startswith("<idle>") else name))
    if not stretches:
        sys.exit("no `perf sched timehist` lines on stdin")
    for runs in stretches.values():
        runs.sort()
    starts = {cpu: [a for a, _, _ in runs] for cpu, runs in stretches.items()}

    def running(cpu, t):
        i = bisect.bisect_right(starts[cpu], t) - 1
        if i < 0:
            return "idle"
        a, b, name = stretches[cpu][i]
        return name if a <= t < b else "idle"

    cpus = sorted(stretches)
    t = max(runs[0][0] for runs in stretches.values())
    last = min(runs[-1][1] for runs in stretches.values())
    step = args.step_us / 1e6
    counts, total = collections.Counter(), 0
    gaps, gap = [], 0
    while t < last:
        combination = tuple(sorted(running(cpu, t) for cpu in cpus))
        counts[combination] += 1
        total += 1
        t += step
        if args.gaps:
            if any(task.startswith(p) for task in combination for p in args.gaps):
                if gap:
                    gaps.append(gap * step)
                gap = 0
            else:
                gap += 1
    if gap:
        # A stretch still open when the trace ends counts too.
        gaps.append(gap * step)
    if not total:
        sys.exit("the trace covers no time on every core")
    print(f"{len(cpus)} cores, {total * step:.3f} s sampled every {args.step_us:g} us")
    for combination, n in counts.most_common(args.most):
        print(f"{100.0 * n / total:6.2f}%  " + " + ".join(combination))
    if args.gaps:
        long = sorted(g for g in gaps if g * 1000.0 > args.gap_ms)
        median = long[len(long) // 2] * 1000.0 if long else 0.0
        print(f"none of {', '.join(args.gaps)} running: {len(long)} stretches over {args.gap_ms:g} ms, "
              f"median {median:.2f} ms, {100.0 * sum(long) / (total * step):.1f}% of the time "
              f"({100.0 * sum(gaps) / (total * step):.1f}% in all stretches)")


if __name__ == "__main__":
    main()
