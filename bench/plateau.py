#!/usr/bin/env python3
"""bench/plateau.py - what a plateau rule would have made of tuning jobs that ran
their whole budget.

    bench/plateau.py [--patience P,...] [--names JOBS.txt] TIRD.log...
    bench/plateau.py [--patience P,...] [--names JOBS.txt] --records [--batch B] RECORDS.txt...

Reads tird's per-round log lines ("job J: round R, D/T trials, best B us")
of jobs run without an early stop (patience off), and for each patience P
(rounds in a row that measured nothing faster than the best by 0.1 %, the
rule of tuner/search/evolve.c) finds the round at which the rule would have
ended each job: the best it had then against the best of the whole budget,
and the trials it would have spent.  A job's rounds up to that point are the
same with or without the rule (the rule only stops), so this is what the
rule does to the same searches.  With --records the inputs are the records
instead, one line each in the order they were stored ("JOB ROWID CREATED
STATUS LATENCY_US": `SELECT job_id, rowid, created, status, latency_us FROM
records ORDER BY rowid` of a fresh database), each job's rounds its
records B at a time (a job's batch; 16 by default, tird's default_batch),
every job taken as asking for all it stored.  JOBS.txt (lines "ID NAME DTYPE", one file per
log, in the same order) names the jobs; without it they are the log's job ids.

Prints one line per job (the round each P stops at, and best(P) / best(all),
1.000 when the rule changed nothing), then per P: the geomean of best(P) /
best(all), the worst job, how many jobs lost over 1 % and 5 %, and the share
of the trials it saved.
"""
import argparse
import math
import re
import sys

ROUND = re.compile(r"job (\d+): round (\d+), (\d+)/(\d+) trials, best ([0-9.]+) us")


def read_log(path):
    """{job: [(trials_done, best_us), ...]} in round order."""
    jobs = {}
    with open(path, errors="replace") as f:
        for line in f:
            m = ROUND.search(line)
            if m:
                jobs.setdefault(int(m.group(1)), []).append(
                    (int(m.group(3)), float(m.group(5)), int(m.group(4))))
    return jobs


def read_records(path, batch):
    """The same from records stored in order: rounds of `batch` records."""
    seen = {}
    with open(path, errors="replace") as f:
        for line in f:
            x = line.split()
            if len(x) >= 5 and x[0].isdigit():
                seen.setdefault(int(x[0]), []).append(
                    float(x[4]) if x[3] == "ok" and float(x[4]) > 0 else math.inf)
    jobs = {}
    for job, lat in seen.items():
        rounds, best = [], math.inf
        for i in range(0, len(lat), batch):
            best = min([best] + lat[i:i + batch])
            rounds.append((min(i + batch, len(lat)), best if best < math.inf else 0.0, len(lat)))
        jobs[job] = rounds
    return jobs


def stop_at(rounds, patience):
    """The index of the round the rule ends the search after (the last one when it never does)."""
    flat = 0
    before = 0.0
    done_before = 0
    for i, (done, best, _) in enumerate(rounds):
        if done > done_before:         # a round that measured nothing counts apart
            better = best > 0 and (before == 0 or best < before * 0.999)
            flat = 0 if better else flat + 1
        before, done_before = best, done
        if patience and flat >= patience:
            return i
    return len(rounds) - 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--patience", default="4,6,8,12,16")
    ap.add_argument("--names", action="append", default=[])
    ap.add_argument("--records", action="store_true")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("logs", nargs="+")
    a = ap.parse_args()
    ps = [int(x) for x in a.patience.split(",")]
    rows = []
    for k, path in enumerate(a.logs):
        names = {}
        if k < len(a.names):
            for line in open(a.names[k]):
                f = line.split()
                if len(f) >= 3:
                    names[int(f[0])] = f[1] + " " + f[2]
        jobs = read_records(path, a.batch) if a.records else read_log(path)
        for job, rounds in sorted(jobs.items()):
            done, best, total = rounds[-1]
            if done < total:
                print(f"# {path} job {job}: {done} of {total} trials, left out", file=sys.stderr)
                continue
            label = names.get(job, f"job{job}")
            rows.append((f"{label} ({path.rsplit('/', 1)[-1]})", rounds))
    if not rows:
        sys.exit("plateau.py: no job ran its whole budget in these logs")
    print("%-40s %7s %9s  " % ("job", "rounds", "best_us") +
          "  ".join("P=%-2d rnd ratio" % p for p in ps))
    agg = {p: [] for p in ps}
    for label, rounds in rows:
        full = rounds[-1][1]
        cells = []
        for p in ps:
            i = stop_at(rounds, p)
            ratio = rounds[i][1] / full
            agg[p].append((ratio, rounds[i][0] / rounds[-1][0], label))
            cells.append("%7d %6.3f" % (i + 1, ratio))
        print("%-40s %7d %9.3f  " % (label[:40], len(rounds), full) + "  ".join(cells))
    print()
    print("%-4s %8s %8s %6s %6s %13s  %s" % ("P", "geomean", "worst", ">1%", ">5%", "trials_saved", "worst job"))
    for p in ps:
        r = agg[p]
        g = math.exp(sum(math.log(x[0]) for x in r) / len(r))
        w = max(r)
        saved = 1 - sum(x[1] for x in r) / len(r)
        print("%-4d %8.3f %8.3f %6d %6d %12.1f%%  %s" % (
            p, g, w[0], sum(x[0] > 1.01 for x in r), sum(x[0] > 1.05 for x in r),
            100 * saved, w[2]))


if __name__ == "__main__":
    main()
