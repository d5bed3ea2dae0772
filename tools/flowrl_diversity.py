#!/usr/bin/env python3
"""The FlowRL diversity table from validation dumps of the "multiples" task.

Each dump is a trainer.validation_data_dir file ({step}.jsonl: one line per
sample with "input", "output", "gts" = {"k", "lo", "hi"}, "score"), written
with val_kwargs.n = N samples per prompt (consecutive lines). Per prompt:

  valid answers  multiples of k in [lo, hi] (recomputed here from gts)
  target p*(y)   r(y) / sum r, r(y) = 0.5 + 0.5 (y - lo) / (hi - lo)
  empirical q(y) counts of the valid answers among the N samples, plus
                 alpha pseudo-counts on every valid answer (--alpha,
                 default 0: no smoothing), normalised over valid answers
  KL(q || p*)    sum_y q(y) log(q(y) / p*(y)) in nats (finite: p* > 0 on
                 every valid answer); prompts with no valid sample are
                 left out of the KL mean and counted as "no valid"

A response is an answer only if, whitespace-stripped, it is a canonical
positive integer (the "multiples" scorer's rule). Columns: mean reward (the
dump's scores), valid rate, distinct correct answers per prompt, KL averaged
over prompts, and the same for the target itself (the ideal row).

  flowrl_diversity.py --n 32 GRPO=out/grpo/40.jsonl FlowRL=out/flowrl/40.jsonl
"""
import argparse
import json
import math
import re
import sys

ANSWER = re.compile(r"[1-9][0-9]{0,14}")


def target(gts):
    k, lo, hi = int(gts["k"]), int(gts["lo"]), int(gts["hi"])
    ys = [y for y in range(lo, hi + 1) if k > 0 and y % k == 0]
    if not ys:
        raise ValueError(f"no valid answer for {gts}")
    r = {y: 1.0 if hi == lo else 0.5 + 0.5 * (y - lo) / (hi - lo) for y in ys}
    total = sum(r.values())
    return {y: v / total for y, v in r.items()}, r


def kl(q, p):
    return sum(qy * math.log(qy / p[y]) for y, qy in q.items() if qy > 0)


def prompts(lines, n):
    """Consecutive groups of n lines with the same input."""
    if len(lines) % n:
        raise ValueError(f"{len(lines)} lines are not a multiple of n={n}")
    for i in range(0, len(lines), n):
        group = lines[i:i + n]
        if any(g["input"] != group[0]["input"] for g in group):
            raise ValueError(f"lines {i}..{i + n - 1} mix prompts (wrong --n?)")
        yield group


def summarize(lines, n, alpha):
    rewards, valid, distinct, kls, no_valid = [], 0, [], [], 0
    ideal_reward, ideal_distinct = [], []
    for group in prompts(lines, n):
        p, r = target(group[0]["gts"])
        counts = {y: 0.0 for y in p}
        for g in group:
            rewards.append(float(g["score"]))
            s = g["output"].strip()
            if ANSWER.fullmatch(s) and int(s) in counts:
                counts[int(s)] += 1
                valid += 1
        distinct.append(sum(c > 0 for c in counts.values()))
        ideal_reward.append(sum(p[y] * r[y] for y in p))
        ideal_distinct.append(len(p))
        if sum(counts.values()) == 0:
            no_valid += 1
            continue
        total = sum(counts.values()) + alpha * len(counts)
        kls.append(kl({y: (c + alpha) / total for y, c in counts.items()}, p))
    num = len(distinct)
    return {
        "prompts": num,
        "mean_reward": sum(rewards) / len(rewards),
        "valid_rate": valid / len(rewards),
        "distinct_correct": sum(distinct) / num,
        "kl": sum(kls) / len(kls) if kls else float("nan"),
        "no_valid": no_valid,
        "target_reward": sum(ideal_reward) / num,
        "target_distinct": sum(ideal_distinct) / num,
    }


def table(rows, n, alpha):
    out = [
        f"| run | mean reward | valid | distinct correct / prompt | "
        f"KL(q ‖ p*) | prompts (no valid) |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in rows:
        out.append(
            f"| {name} | {s['mean_reward']:.3f} | {s['valid_rate']:.3f} | "
            f"{s['distinct_correct']:.2f} | {s['kl']:.3f} | "
            f"{s['prompts']} ({s['no_valid']}) |")
    if rows:
        s = rows[0][1]
        out.append(f"| target p* | {s['target_reward']:.3f} | 1.000 | "
                   f"{s['target_distinct']:.2f} | 0 | {s['prompts']} |")
    out.append(f"\nN = {n} samples per prompt; smoothing alpha = {alpha:g} "
               "pseudo-counts per valid answer.")
    return "\n".join(out)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, required=True,
                    help="samples per prompt (val_kwargs.n)")
    ap.add_argument("--alpha", type=float, default=0.0,
                    help="pseudo-counts per valid answer (default 0)")
    ap.add_argument("--json", action="store_true",
                    help="print the numbers as JSON instead of a table")
    ap.add_argument("runs", nargs="+", metavar="NAME=DUMP")
    args = ap.parse_args(argv)
    rows = []
    for run in args.runs:
        name, sep, path = run.rpartition("=")  # names may hold "=" (β=0.46)
        if not sep:
            ap.error(f"{run}: expected NAME=DUMP")
        try:
            with open(path) as f:
                lines = [json.loads(l) for l in f if l.strip()]
            rows.append((name, summarize(lines, args.n, args.alpha)))
        except (OSError, ValueError, KeyError, TypeError) as e:
            sys.exit(f"flowrl_diversity: {path}: {e}")
    if args.json:
        print(json.dumps({name: s for name, s in rows}, indent=1))
    else:
        print(table(rows, args.n, args.alpha))


if __name__ == "__main__":
    main(sys.argv[1:])
