#!/usr/bin/env python3
"""bench/costmodel_sweep.py — held-out ranking of the cost model's features
under other XGBoost settings, from a table `bench/costmodel_eval --records
FILE... --dump TSV` wrote.

    bench/costmodel_sweep.py [--max-rows N...] TSV
    bench/costmodel_sweep.py --margins TSV
    bench/costmodel_sweep.py --groupnorm TSV
    bench/costmodel_sweep.py --transfer TSV
    bench/costmodel_sweep.py --workloads TSV
    bench/costmodel_sweep.py --by-shape K TSV
    bench/costmodel_sweep.py --train-also TSV2 [any of the above]

For each setting, every workload of the table is ranked by a booster trained
on the other workloads' rows (labels: GFLOP/s over the workload's best, one
ranking group per workload, as costmodel/xgb.c trains), and the mean pairwise
accuracy over the held-out workloads is printed.  The first line is tird's
own setting.  With --max-rows, tird's setting again with each training
limited to N rows the way costmodel/xgb.c's train_rows limits its trainings
to CM_MAX_TRAIN_ROWS (here no workload is the current one: every workload
gets a fair share, an evenly spaced subset of its rows).  With --margins,
tird's setting only, scored on the pairs whose throughputs differ by more
than 2, 5, 10 and 25% as well (how much of the error is pairs within
measurement noise), then each held-out workload's accuracy, worst first.
With --groupnorm, tird's setting on the features as they are and with each
feature's percentile rank within its workload's rows added (the search only
ranks candidates of one workload, so a model could see every feature
relative to the others scored with it): held out by workload, and within (a
workload's even rows in the training, its odd rows ranked).
With --transfer, a new workload as the shared model sees it while tuning it:
each workload's first m rows (16, 32, 64: the first batches, in the order
they were measured) join the other workloads' rows, and the rest of its rows
are ranked — with every ranking group weighted alike, with the current
workload's group weighted up to a quarter or all of the others' weight,
with each group weighted by the mean group size over its own ("equal"), and
by a model of the m rows alone (cold, depth 3 as tird's first trainings).
With --workloads, tird's setting trained on 3, 7, 13 and all other
workloads (two random draws of the others per held-out workload, seeded):
how the held-out ranking grows with the number of workloads the shared
model has seen.
With --by-shape K, for a table of the same shapes in K dtypes, in the same
order each time (make-seed.sh --dtypes, its exports joined: the CUDA seed),
each workload held out by workload and by shape (no dtype of its shape in
the training).
With --train-also TSV2 (a second table, say of the seed's extra
workloads, costmodel/seed/extra-workloads.json), the held-out tables
(settings, --margins, --workloads) train on TSV2's rows as well but score
only TSV's workloads.
Needs Debian's python3-xgboost (the same libxgboost 1.7 as tird) and numpy;
run it with /usr/bin/python3.
"""
import sys
import numpy as np
import xgboost as xgb


def load(path):
    with open(path) as f:
        names = f.readline().rstrip('\n').split('\t')[2:]
        w, g, x = [], [], []
        for line in f:
            p = line.rstrip('\n').split('\t')
            w.append(p[0])
            g.append(float(p[1]))
            x.append([float(v) for v in p[2:]])
    return names, np.array(w), np.array(g), np.array(x, dtype=np.float32)


def pairwise(g, p, margin=0.0):
    """The share of pairs of unequal throughputs g that scores p order alike;
    with margin > 0, only of the pairs whose throughputs differ by more than
    that fraction (nan if there are none)."""
    hi, lo = np.maximum(g[:, None], g[None, :]), np.minimum(g[:, None], g[None, :])
    m = (hi > lo * (1 + margin)) & np.triu(np.ones((len(g), len(g)), dtype=bool), 1)
    tot = m.sum()
    ok = ((p[:, None] > p[None, :]) == (g[:, None] > g[None, :]))[m].sum()
    return ok / tot if tot else (np.nan if margin > 0 else 1.0)


def labels(w, g):
    lab = np.zeros_like(g)
    for k in np.unique(w):
        i = w == k
        lab[i] = g[i] / g[i].max() if g[i].max() > 0 else 0
    return lab


def train(x, lab, w, params, rounds):
    order = np.argsort(w, kind='stable')
    x, lab, w = x[order], lab[order], w[order]
    d = xgb.DMatrix(x, label=lab)
    d.set_group([int((w == k).sum()) for k in dict.fromkeys(w)])
    return xgb.train(params, d, rounds)


def limit(w, max_rows):
    """Indices of at most max_rows rows: train_rows's fair shares (water-filling,
    smallest workloads first), an evenly spaced subset of each larger one."""
    if max_rows is None or len(w) <= max_rows:
        return np.arange(len(w))
    keys, counts = np.unique(w, return_counts=True)
    quota, budget, left = {}, max_rows, len(keys)
    for k, c in sorted(zip(keys, counts), key=lambda kc: kc[1]):
        share = budget // left
        quota[k] = min(c, share)
        budget -= quota[k]
        left -= 1
    keep = []
    seen = dict.fromkeys(keys, 0)
    cnt = dict(zip(keys, counts))
    for i, k in enumerate(w):
        j, c, q = seen[k], cnt[k], quota[k]
        seen[k] += 1
        if q > 0 and (j + 1) * q // c != j * q // c:
            keep.append(i)
    return np.array(keep)


def group_ranks(w, x):
    """Each feature's percentile rank (0..1) among the rows of its workload,
    equal values sharing their mean rank.  (Ranks by a stable sort instead
    gave equal values their row order, which is the order of measurement —
    later rows of a search are better — so a feature constant within a
    workload leaked its search progress: held-out 0.615 -> 0.662 on this
    VM's CPU records from the rank of `flops` alone.)"""
    y = np.zeros_like(x)
    for k in np.unique(w):
        i = np.flatnonzero(w == k)
        for f in range(x.shape[1]):
            v = x[i, f]
            s = np.sort(v)
            lo, hi = np.searchsorted(s, v, 'left'), np.searchsorted(s, v, 'right')
            y[i, f] = (lo + hi - 1) / 2 / max(1, len(i) - 1)
    return y


def within(w, g, x, params, rounds):
    """Trained on the other workloads and a workload's even rows, ranking its
    odd rows; the mean over workloads."""
    lab = labels(w, g)
    acc = []
    for k in np.unique(w):
        idx = np.flatnonzero(w == k)
        tr = np.concatenate([np.flatnonzero(w != k), idx[::2]])
        b = train(x[tr], lab[tr], w[tr], params, rounds)
        acc.append(pairwise(g[idx[1::2]], b.predict(xgb.DMatrix(x[idx[1::2]]))))
    return float(np.mean(acc))


def transfer(w, g, x, params, rounds):
    """The --transfer table (see the top)."""
    lab = labels(w, g)
    schemes = [('groups alike', None), ('current x 1/4 of the others', 0.25),
               ('current x all the others', 1.0), ('each group equal', 'equal')]
    print('%-30s %8s %8s %8s' % ('weights', 'm=16', 'm=32', 'm=64'))
    res = {}
    for k in np.unique(w):
        kk = np.flatnonzero(w == k)
        if len(kk) < 100:
            continue
        for m in (16, 32, 64):
            seen, rest = kk[:m], kk[m:]
            if g[seen].max() <= 0:
                continue
            tr = np.concatenate([np.flatnonzero(w != k), seen])
            tr = tr[np.argsort(w[tr], kind='stable')]
            keys = list(dict.fromkeys(w[tr]))
            sizes = np.array([int((w[tr] == q).sum()) for q in keys], dtype=np.float64)
            l = lab[tr].copy()
            cur = w[tr] == k           # the search knows the best so far only
            l[cur] = g[tr][cur] / g[tr][cur].max()
            ci = keys.index(k)
            for name, f in schemes:
                gw = np.ones(len(keys))
                if f == 'equal':
                    gw = sizes.mean() / sizes
                elif f is not None:
                    gw[ci] = max(1.0, f * (sizes.sum() - sizes[ci]) / sizes[ci])
                d = xgb.DMatrix(x[tr], label=l)
                d.set_group(sizes.astype(int).tolist())
                d.set_weight(gw.astype(np.float32))
                b = xgb.train(params, d, rounds)
                res.setdefault((name, m), []).append(
                    pairwise(g[rest], b.predict(xgb.DMatrix(x[rest]))))
            d = xgb.DMatrix(x[seen], label=g[seen] / g[seen].max())
            d.set_group([m])
            b = xgb.train({**params, **FEW}, d, 60)
            res.setdefault(('cold: the m rows alone', m), []).append(
                pairwise(g[rest], b.predict(xgb.DMatrix(x[rest]))))
    for name in [n for n, _ in schemes] + ['cold: the m rows alone']:
        print('%-30s %s' % (name, ' '.join('%8.3f' % np.mean(res[(name, m)])
                                           for m in (16, 32, 64))), flush=True)


def by_workloads(w, g, x, params, rounds):
    """The --workloads table (see the top)."""
    rng = np.random.RandomState(1)
    keys, lab = np.unique(w), labels(w, g)
    print('%-22s %s' % ('trained on', 'held-out pairwise (mean)'))
    sizes = [m for m in (3, 7, 13, 28, 56) if m < len(keys) - 1] + [len(keys) - 1]
    for m in sizes:
        acc = []
        for k in scored(w):
            for rep in range(2 if m < len(keys) - 1 else 1):
                pick = rng.choice([q for q in keys if q != k], m, replace=False)
                tr, te = np.isin(w, pick), w == k
                b = train(x[tr], lab[tr], w[tr], params, rounds)
                acc.append(pairwise(g[te], b.predict(xgb.DMatrix(x[te]))))
        print('%-22s %.3f' % ('%d other workloads' % m, np.mean(acc)), flush=True)


def by_shape(w, g, x, params, rounds, k):
    """The --by-shape table: the i-th workload of the table (in order of first
    row) is shape i mod (workloads / k)."""
    order = list(dict.fromkeys(w))
    nshape = len(order) // k
    shape = {q: i % nshape for i, q in enumerate(order)}
    sw = np.array([shape[q] for q in w])
    lab = labels(w, g)
    acc_w, acc_s = [], []
    print('%-24s %12s %9s' % ('workload', 'by workload', 'by shape'))
    for q in order:
        te = w == q
        for acc, tr in ((acc_w, np.flatnonzero(w != q)), (acc_s, np.flatnonzero(sw != shape[q]))):
            b = train(x[tr], lab[tr], w[tr], params, rounds)
            acc.append(pairwise(g[te], b.predict(xgb.DMatrix(x[te]))))
        print('%-24s %12.3f %9.3f' % (q, acc_w[-1], acc_s[-1]), flush=True)
    for d in range(k):
        part = slice(d * nshape, (d + 1) * nshape)
        print('%-24s %12.3f %9.3f' % ('mean, dtype %d of %d' % (d + 1, k),
                                      np.mean(acc_w[part]), np.mean(acc_s[part])))
    print('%-24s %12.3f %9.3f' % ('mean', np.mean(acc_w), np.mean(acc_s)))


# the workloads scored: every one, or (--train-also) those of the first table
SCORED = None


def scored(w):
    return np.unique(w if SCORED is None else w[SCORED])


def held_out(w, g, x, params, rounds, max_rows=None, margin=0.0, per_workload=None):
    lab = labels(w, g)
    acc = []
    for k in scored(w):
        tr = np.flatnonzero(w != k)
        tr = tr[limit(w[tr], max_rows)]
        te = w == k
        b = train(x[tr], lab[tr], w[tr], params, rounds)
        acc.append(pairwise(g[te], b.predict(xgb.DMatrix(x[te])), margin))
        if per_workload is not None:
            per_workload.append((acc[-1], k, int(te.sum())))
    return float(np.nanmean(acc))


TIRD = {'objective': 'rank:pairwise', 'eta': 0.1, 'max_depth': 8, 'min_child_weight': 5,
        'max_bin': 64, 'nthread': 2, 'verbosity': 0, 'seed': 0, 'tree_method': 'hist'}
# tird's first trainings (fewer than CM_SMALL_ROWS rows), as the cold arm of --transfer
FEW = {'eta': 0.2, 'max_depth': 3, 'min_child_weight': 1}
SETTINGS = [
    ('tird: rank:pairwise, eta 0.1, depth 8, mcw 5, 64 bins, 200 rounds', {}, 200),
    ('tird until session 18: eta 0.2, depth 6, mcw 1, 256 bins, 60 rounds',
     {'eta': 0.2, 'max_depth': 6, 'min_child_weight': 1, 'max_bin': 256}, 60),
    ('256 bins', {'max_bin': 256}, 200),
    ('exact splits', {'tree_method': 'exact'}, 200),
    ('depth 6', {'max_depth': 6}, 200),
    ('depth 10', {'max_depth': 10}, 200),
    ('eta 0.2, 100 rounds', {'eta': 0.2}, 100),
    ('300 rounds', {}, 300),
    ('min_child_weight 1', {'min_child_weight': 1}, 200),
    ('min_child_weight 10', {'min_child_weight': 10}, 200),
    ('subsample 0.8, colsample 0.6', {'subsample': 0.8, 'colsample_bytree': 0.6}, 200),
    ('rank:ndcg', {'objective': 'rank:ndcg'}, 200),
    ('reg:squarederror', {'objective': 'reg:squarederror'}, 200),
    ('reg:logistic', {'objective': 'reg:logistic'}, 200),
]

if __name__ == '__main__':
    args = sys.argv[1:]
    if len(args) > 2 and args[0] == '--train-also':
        also = load(args[1])
        args = args[2:]
        _load = load

        def load(path):
            names, w, g, x = _load(path)
            if names != also[0]:
                sys.exit('--train-also: %s and %s have other features' % (path, sys.argv[2]))
            SCORED = np.concatenate([np.ones(len(w), bool), np.zeros(len(also[1]), bool)])
            globals()['SCORED'] = SCORED
            return (names, np.concatenate([w, also[1]]), np.concatenate([g, also[2]]),
                    np.vstack([x, also[3]]))
    if len(args) == 2 and args[0] == '--margins':
        names, w, g, x = load(args[1])
        tag, extra, rounds = SETTINGS[0]
        print('# %s: %d rows, %d workloads; %s' % (args[1], len(w), len(np.unique(w)), tag))
        each = []
        for m in (0.0, 0.02, 0.05, 0.10, 0.25):
            r = held_out(w, g, x, {**TIRD, **extra}, rounds, margin=m,
                         per_workload=each if m == 0 else None)
            print('pairs differing by more than %2.0f%%: held-out pairwise %.3f' % (100 * m, r),
                  flush=True)
        for a, k, n in sorted(each):
            print('  %.3f  %-24s %d rows' % (a, k, n))
        sys.exit(0)
    if len(args) == 2 and args[0] == '--groupnorm':
        names, w, g, x = load(args[1])
        tag, extra, rounds = SETTINGS[0]
        print('# %s: %d rows, %d workloads; %s' % (args[1], len(w), len(np.unique(w)), tag))
        print('%-46s %9s %9s' % ('features', 'held-out', 'within'))
        xr = np.hstack([x, group_ranks(w, x)])
        for name, f in (('as they are', x), ('and their ranks within the workload', xr)):
            print('%-46s %9.3f %9.3f' % (name, held_out(w, g, f, {**TIRD, **extra}, rounds),
                                         within(w, g, f, {**TIRD, **extra}, rounds)), flush=True)
        sys.exit(0)
    if len(args) == 2 and args[0] == '--transfer':
        names, w, g, x = load(args[1])
        tag, extra, rounds = SETTINGS[0]
        print('# %s: %d rows, %d workloads; %s; the rest of each workload ranked' %
              (args[1], len(w), len(np.unique(w)), tag))
        transfer(w, g, x, {**TIRD, **extra}, rounds)
        sys.exit(0)
    if len(args) == 2 and args[0] == '--workloads':
        names, w, g, x = load(args[1])
        tag, extra, rounds = SETTINGS[0]
        print('# %s: %d rows, %d workloads; %s' % (args[1], len(w), len(np.unique(w)), tag))
        by_workloads(w, g, x, {**TIRD, **extra}, rounds)
        sys.exit(0)
    if len(args) == 3 and args[0] == '--by-shape':
        names, w, g, x = load(args[2])
        tag, extra, rounds = SETTINGS[0]
        print('# %s: %d rows, %d workloads; %s' % (args[2], len(w), len(np.unique(w)), tag))
        by_shape(w, g, x, {**TIRD, **extra}, rounds, int(args[1]))
        sys.exit(0)
    limits = []
    while len(args) > 2 and args[0] == '--max-rows':
        limits.append(int(args[1]))
        args = args[2:]
    if len(args) != 1:
        sys.exit('usage: bench/costmodel_sweep.py [--max-rows N...] TSV')
    names, w, g, x = load(args[0])
    print('# %s: %d rows, %d workloads, %d features' % (args[0], len(w), len(np.unique(w)),
                                                        len(names)))
    print('%-50s %s' % ('setting', 'held-out pairwise (mean)'))
    settings = SETTINGS if not limits else SETTINGS[:1]
    for tag, extra, rounds in settings:
        print('%-50s %.3f' % (tag, held_out(w, g, x, {**TIRD, **extra}, rounds)), flush=True)
    for n in limits:
        tag, extra, rounds = SETTINGS[0]
        print('%-50s %.3f' % ('tird, trainings limited to %d rows' % n,
                              held_out(w, g, x, {**TIRD, **extra}, rounds, n)), flush=True)
