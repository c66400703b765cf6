/*
 * dash.js — tird's dashboard, drawn in the browser from tird's JSON API.
 *
 * One page document (index.html) serves every page; the path says which:
 *   /, /ui/jobs            the jobs, polled while the page is open
 *   /ui/job?id=N           one job and its tuning curve (every record of
 *                          its workload and target as a dot)
 *   /ui/cache              the stored bests per op, a roofline per target
 *   /ui/workload?key=K     a workload's best kernels: source, program, trace
 *   /ui/workers            the workers and the cost models
 *   /ui/graph[?key=K]      a graph workload's fusion plan as boxes
 * Everything shown comes from the routes of docs/http-api.md; no figure is
 * computed here that tird does not give, except sums and ratios of its
 * figures (best so far, % of the roof).  Text from tird is always set as
 * text (never as HTML).  Every table cell that shows a figure carries the
 * exact value in data-v, every plot its point count in data-points, and the
 * page sets body[data-ready] once drawn: tests/dashboard.sh reads them.
 *
 * With protect_reads, a 401 shows the token form; the token is kept in
 * sessionStorage (this tab) and sent as Authorization: Bearer.  A link may
 * carry it as #token=T (the fragment never reaches a server); it is taken
 * out of the address at once.
 */
'use strict';

const main = document.getElementById('main');
const TOKEN_KEY = 'tird-token';

function takeToken() {
	const m = /^#token=(.+)$/.exec(location.hash);
	if (m) {
		sessionStorage.setItem(TOKEN_KEY, decodeURIComponent(m[1]));
		history.replaceState(null, '', location.pathname + location.search);
	}
	return !!m;
}
takeToken();
/* a #token= link opened on a page already shown: draw it again with it */
window.addEventListener('hashchange', () => {
	if (takeToken())
		location.reload();
});

class Unauthorized extends Error {}

async function api(path, body) {
	const headers = {};
	const token = sessionStorage.getItem(TOKEN_KEY);
	if (token)
		headers.Authorization = 'Bearer ' + token;
	const opts = { headers };
	if (body !== undefined) {
		opts.method = 'POST';
		headers['Content-Type'] = 'application/json';
		opts.body = JSON.stringify(body);
	}
	const r = await fetch(path, opts);
	if (r.status === 401)
		throw new Unauthorized(token ? 'the token was refused' : 'this tird needs a token');
	const j = await r.json();
	if (!r.ok)
		throw new Error(path + ': ' + r.status + ' ' + (j.error ? j.error.code + ': ' +
							   j.error.message : ''));
	return j;
}

/* ---- building the page ---------------------------------------------------------- */

function el(tag, attrs, ...kids) {
	const e = document.createElement(tag);
	for (const [k, v] of Object.entries(attrs || {}))
		if (v !== undefined && v !== null)
			e.setAttribute(k, v);
	for (const k of kids.flat())
		if (k !== undefined && k !== null)
			e.append(k instanceof Node ? k : String(k));
	return e;
}

const SVGNS = 'http://www.w3.org/2000/svg';
function sv(tag, attrs, ...kids) {
	const e = document.createElementNS(SVGNS, tag);
	for (const [k, v] of Object.entries(attrs || {}))
		e.setAttribute(k, v);
	for (const k of kids)
		e.append(k instanceof Node ? k : String(k));
	return e;
}

/* A figure as people read it: 4 significant digits. */
function fmt(x) {
	if (x === null || x === undefined || !isFinite(x))
		return '\u2014';
	return Number(Number(x).toPrecision(4)).toLocaleString('en-US', { maximumFractionDigits: 6 });
}

/* A number cell holding the exact value (data-v) and the rounded text. */
function num(key, x) {
	return el('td', { class: 'num', 'data-k': key, 'data-v': x === null || x === undefined ? '' : x },
		  fmt(x));
}

function when(t) {
	return t ? new Date(t * 1000).toISOString().replace('T', ' ').slice(0, 19) + 'Z' : '\u2014';
}

/* A workload's shape in a line: its keys but op ("M=64 N=64 K=64"). */
function shape(w) {
	if (!w)
		return '?';
	if (w.op === 'graph')
		return (w.nodes ? w.nodes.length : 0) + ' nodes';
	/* the canonical form has every key; leave out the op and the defaults
	 * that say nothing (float32, no epilogue) */
	return Object.entries(w).filter(([k, v]) => k !== 'op' && v !== 'float32' &&
					!(Array.isArray(v) && v.length === 0))
		.map(([k, v]) => k + '=' + (Array.isArray(v) ? '[' + v.join(',') + ']' : v)).join(' ');
}

function table(cls, head, rows) {
	return el('table', { class: cls, 'data-rows': rows.length },
		  el('thead', {}, el('tr', {}, head.map(h => el('th', {}, h)))),
		  el('tbody', {}, rows));
}

function show(...kids) {
	main.replaceChildren(...kids.flat().filter(k => k !== null && k !== undefined));
	document.getElementById('status').textContent = 'updated ' +
		new Date().toLocaleTimeString('en-GB', { hour12: false });
	document.body.dataset.ready = '1';
}

function param(name) {
	return new URLSearchParams(location.search).get(name);
}

/* ---- plots -------------------------------------------------------------------------- */

/* Axes on a w x h plot with margins m: x and y map values to pixels
 * (log10 where asked). */
function frame(w, h, xr, yr, xlog, ylog) {
	const m = { l: 64, r: 14, t: 12, b: 38 };
	const lin = v => v;
	const tx = xlog ? Math.log10 : lin, ty = ylog ? Math.log10 : lin;
	const x0 = tx(xr[0]), x1 = tx(xr[1]), y0 = ty(yr[0]), y1 = ty(yr[1]);
	return {
		w, h, m,
		x: v => m.l + (tx(v) - x0) / ((x1 - x0) || 1) * (w - m.l - m.r),
		y: v => h - m.b - (ty(v) - y0) / ((y1 - y0) || 1) * (h - m.t - m.b),
		xticks: ticks(xr, xlog), yticks: ticks(yr, ylog),
	};
}

function ticks(r, log) {
	const out = [];
	if (log) {
		for (let e = Math.floor(Math.log10(r[0])); e <= Math.ceil(Math.log10(r[1])); e++)
			if (10 ** e >= r[0] * 0.999 && 10 ** e <= r[1] * 1.001)
				out.push(10 ** e);
		if (out.length < 2)
			for (let i = 0; i <= 3; i++)
				out.push(r[0] * (r[1] / r[0]) ** (i / 3));
		return out;
	}
	const step = niceStep((r[1] - r[0]) / 5);
	for (let v = Math.ceil(r[0] / step) * step; v <= r[1] + 1e-9; v += step)
		out.push(v);
	return out;
}

function niceStep(s) {
	const p = 10 ** Math.floor(Math.log10(s || 1));
	return [1, 2, 5, 10].map(k => k * p).find(k => k >= s);
}

function axes(svg, fr, xlabel, ylabel) {
	const { w, h, m } = fr;
	for (const v of fr.xticks) {
		svg.append(sv('line', { class: 'grid', x1: fr.x(v), x2: fr.x(v), y1: m.t, y2: h - m.b }));
		svg.append(sv('text', { x: fr.x(v), y: h - m.b + 14, 'text-anchor': 'middle' }, fmt(v)));
	}
	for (const v of fr.yticks) {
		svg.append(sv('line', { class: 'grid', x1: m.l, x2: w - m.r, y1: fr.y(v), y2: fr.y(v) }));
		svg.append(sv('text', { x: m.l - 4, y: fr.y(v) + 4, 'text-anchor': 'end' }, fmt(v)));
	}
	svg.append(sv('line', { class: 'axis', x1: m.l, x2: w - m.r, y1: h - m.b, y2: h - m.b }));
	svg.append(sv('line', { class: 'axis', x1: m.l, x2: m.l, y1: m.t, y2: h - m.b }));
	svg.append(sv('text', { x: (m.l + w - m.r) / 2, y: h - 6, 'text-anchor': 'middle' }, xlabel));
	svg.append(sv('text', { x: 12, y: (m.t + h - m.b) / 2, 'text-anchor': 'middle',
				transform: `rotate(-90 12 ${(m.t + h - m.b) / 2})` }, ylabel));
}

/* The tuning curve of a job: every record of its (workload, target) in
 * the order stored, a dot each (this job's blue, others' grey, failed ones
 * a red cross along the top), and the best latency so far. */
function curve(records, jobId) {
	const W = 760, H = 300;
	const ok = records.filter(r => r.status === 'ok' && r.latency_us > 0);
	const lat = ok.map(r => r.latency_us);
	const lo = lat.length ? Math.min(...lat) : 1, hi = lat.length ? Math.max(...lat) : 10;
	const yr = [lo / 1.15, hi * 1.6];
	const fr = frame(W, H, [0, Math.max(records.length, 2) + 1], yr, false, true);
	const svg = sv('svg', { class: 'curve', width: W, height: H, 'data-points': records.length,
				'data-failed': records.length - ok.length });
	axes(svg, fr, 'trial (records of this workload and target, in the order stored)',
	     'latency (\u00b5s, log)');
	let best = Infinity, path = '';
	records.forEach((r, i) => {
		const x = fr.x(i + 1);
		const mine = r.job_id === jobId;
		const tip = `trial ${i + 1}: ${r.status}` + (r.latency_us ? ` ${fmt(r.latency_us)} \u00b5s` : '') +
			    (r.job_id ? ` (job ${r.job_id})` : ` (${r.origin})`) + (r.message ? ' \u2014 ' + r.message : '');
		if (r.status === 'ok' && r.latency_us > 0) {
			svg.append(sv('circle', { class: 'pt ' + (mine ? 'ok' : 'other'), cx: x,
						  cy: fr.y(r.latency_us), r: 3.2 }, sv('title', {}, tip)));
			if (r.latency_us < best) {
				best = r.latency_us;
				path += (path ? 'H' : 'M') + x + (path ? 'V' : ',') + fr.y(best);
			}
		} else {
			const y = fr.m.t + 6;
			svg.append(sv('path', { class: 'pt fail', d: `M${x - 3},${y - 3}l6,6m0,-6l-6,6` },
				      sv('title', {}, tip)));
		}
	});
	if (path)
		svg.append(sv('path', { class: 'best', d: path + 'H' + fr.x(records.length) }));
	return svg;
}

/* A roofline: min(peak, intensity x bandwidth), log-log, the target's bests
 * as dots. */
function roofline(t) {
	const W = 560, H = 340;
	const pts = t.points.filter(p => p.intensity > 0);
	const ai = pts.map(p => p.intensity), gf = pts.map(p => p.gflops);
	const xr = [Math.min(t.ridge / 100, ...ai.map(a => a / 2)), Math.max(t.ridge * 10, ...ai.map(a => a * 2))];
	const yr = [Math.min(t.peak_gflops / 1000, ...gf.map(g => g / 2)), t.peak_gflops * 2];
	const fr = frame(W, H, xr, yr, true, true);
	const svg = sv('svg', { class: 'roofline', width: W, height: H, 'data-target': t.target,
				'data-points': pts.length });
	axes(svg, fr, 'arithmetic intensity (flop/byte, log)', 'GFLOP/s (log)');
	svg.append(sv('path', { class: 'roof', d: `M${fr.x(xr[0])},${fr.y(xr[0] * t.peak_gbps)}` +
		`L${fr.x(t.ridge)},${fr.y(t.peak_gflops)}L${fr.x(xr[1])},${fr.y(t.peak_gflops)}` }));
	svg.append(sv('text', { x: fr.x(xr[1]) - 4, y: fr.y(t.peak_gflops) - 4, 'text-anchor': 'end' },
		      `${fmt(t.peak_gflops)} GFLOP/s, ${fmt(t.peak_gbps)} GB/s (nominal)`));
	for (const p of pts)
		svg.append(sv('circle', { class: 'pt ok', cx: fr.x(p.intensity), cy: fr.y(p.gflops), r: 4,
					  'data-key': p.workload_key },
			      sv('title', {}, `${p.op} ${p.workload_key.slice(0, 12)}: ${fmt(p.gflops)} GFLOP/s ` +
				 `at ${fmt(p.intensity)} flop/B`)));
	return svg;
}

/* ---- pages -------------------------------------------------------------------------- */

const ACTIVE = new Set(['queued', 'running']);
const jobDocs = new Map();     /* job id -> its document, refreshed while active */
const seen = new Map();        /* job id -> the states this page has shown it in */
const measuredBy = new Map();  /* job id -> the workers this page saw measuring it */
let updates = 0;

/* The jobs, drawn again whenever one changes: while a job is active the
 * page long-polls it (GET /v1/jobs/ID?wait=1&version=V, answered as soon as
 * it changes, else after a second), else it looks again every 3 s for new
 * jobs. */
async function pageJobs() {
	const [list, ws] = await Promise.all([api('/v1/jobs?limit=100'), api('/v1/workers')]);
	const byJob = new Map(ws.workers.filter(w => w.job_id).map(w => [w.job_id, w]));
	await Promise.all(list.jobs.map(async j => {
		const d = jobDocs.get(j.job_id);
		if (!d || ACTIVE.has(d.state) || d.state !== j.state)
			jobDocs.set(j.job_id, await api('/v1/jobs/' + j.job_id));
	}));
	const rows = list.jobs.map(j => {
		const d = jobDocs.get(j.job_id), w = byJob.get(j.job_id);
		const states = seen.get(j.job_id) || [];
		if (states[states.length - 1] !== d.state)
			states.push(d.state);
		seen.set(j.job_id, states);
		const by = measuredBy.get(j.job_id) || new Set();
		if (w)
			by.add(w.worker_id);
		measuredBy.set(j.job_id, by);
		const pct = d.trials ? Math.min(100, 100 * d.trials_done / d.trials) : 0;
		return el('tr', { 'data-job': j.job_id, 'data-seen': states.join(' '),
				  'data-measured-by': [...by].join(' ') },
			  el('td', {}, el('a', { href: '/ui/job?id=' + j.job_id }, j.job_id)),
			  el('td', { class: 'state-' + d.state, 'data-k': 'state', 'data-v': d.state }, d.state),
			  el('td', {}, el('a', { href: '/ui/workload?key=' + d.workload_key },
					  (d.workload ? d.workload.op : '?') + ' ' + shape(d.workload))),
			  el('td', {}, d.target),
			  el('td', {}, d.search.cost_model),
			  el('td', {}, el('span', { class: 'bar' }, el('i', { style: `width:${pct}%` }))),
			  num('trials_done', d.trials_done), num('trials', d.trials), num('errors', d.errors),
			  num('best_us', d.best_us), num('best_gflops', d.best_gflops),
			  el('td', { 'data-k': 'worker', 'data-v': w ? w.worker_id : '', title: w ? w.worker_id : '' },
			     w ? w.name : '\u2014'),
			  el('td', { title: d.message || '' }, when(d.created)));
	});
	updates++;
	show(el('h2', {}, 'Jobs'),
	     table('jobs', ['job', 'state', 'workload', 'target', 'model', 'progress', 'done',
			    'trials', 'errors', 'best \u00b5s', 'GFLOP/s', 'measured by', 'created'], rows),
	     el('p', { class: 'note', id: 'updates', 'data-updates': updates },
		'Live: drawn again as soon as an active job changes. A job\u2019s worker is the one ' +
		'measuring a batch of it now.'));
	const active = list.jobs.map(j => jobDocs.get(j.job_id)).find(d => ACTIVE.has(d.state));
	if (active) {
		try {
			/* at most 1 s, so that the worker of a batch shows while it measures */
			await api(`/v1/jobs/${active.job_id}?wait=1&version=${active.version}`);
		} catch (e) {
			await new Promise(ok => setTimeout(ok, 2000));
		}
		run(pageJobs);
	} else {
		setTimeout(() => run(pageJobs), 3000);
	}
}

async function pageJob() {
	const id = Number(param('id'));
	if (!id)
		throw new Error('this page needs ?id=JOB');
	const d = await api('/v1/jobs/' + id);
	const recs = await api('/v1/records?workload=' + d.workload_key + '&target=' +
			       encodeURIComponent(d.target));
	const rs = recs.records;
	const mine = rs.filter(r => r.job_id === id).length;
	show(el('h2', {}, `Job ${id}: ${d.workload.op} on ${d.target}`),
	     table('job', ['state', 'workload', 'model', 'seed', 'patience', 'trials done', 'trials', 'errors',
			   'best \u00b5s', 'best GFLOP/s', 'created', 'finished'],
		   [el('tr', {}, el('td', { class: 'state-' + d.state }, d.state),
		       el('td', {}, el('a', { href: '/ui/workload?key=' + d.workload_key }, shape(d.workload))),
		       el('td', {}, d.search.cost_model), el('td', {}, d.search.seed === null ? 'derived' : d.search.seed),
		       el('td', {}, d.search.patience === null ? "tird's" : d.search.patience === 0 ? 'none'
				    : d.search.patience + ' rounds'),
		       num('trials_done', d.trials_done), num('trials', d.trials), num('errors', d.errors),
		       num('best_us', d.best_us), num('best_gflops', d.best_gflops),
		       el('td', {}, when(d.created)), el('td', {}, when(d.finished)))]),
	     d.message ? el('p', { class: 'note' }, d.message) : null,
	     el('h3', {}, 'Tuning curve'),
	     curve(rs, id),
	     el('p', { class: 'note' }, `${rs.length} records of this workload on ${d.target}, ${mine} measured by ` +
		`this job (blue; grey: other jobs and imports; red crosses: failed), the line the best so far.`));
	if (ACTIVE.has(d.state)) {      /* live: again as soon as it changes */
		await api(`/v1/jobs/${id}?wait=10&version=${d.version}`);
		run(pageJob);
	}
}

async function pageCache() {
	const [best, roof] = await Promise.all([api('/v1/best'), api('/v1/roofline')]);
	const pt = new Map();
	for (const t of roof.targets)
		for (const p of t.points)
			pt.set(p.workload_key + ' ' + t.target, [p, t]);
	const ops = [...new Set(best.best.map(b => b.op))];
	const out = [el('h2', {}, 'The cache'),
		     el('p', { class: 'note' }, `${best.best.length} tuned workloads. GB/s counts each input read ` +
			'once and the output written once; the roof is min(peak, intensity \u00d7 bandwidth).')];
	for (const op of ops) {
		const rows = best.best.filter(b => b.op === op).map(b => {
			const [p, t] = pt.get(b.workload_key + ' ' + b.target) || [{}, null];
			const roofAt = t && p.intensity ? Math.min(t.peak_gflops, p.intensity * t.peak_gbps) : null;
			return el('tr', { 'data-key': b.workload_key, 'data-target': b.target },
				  el('td', {}, el('a', { href: '/ui/workload?key=' + b.workload_key },
						  b.workload_key.slice(0, 12))),
				  el('td', {}, shape(b.workload)), el('td', {}, b.target),
				  num('latency_us', b.latency_us), num('gflops', b.gflops), num('gbps', p.gbps),
				  num('intensity', p.intensity), num('trials', b.trials),
				  num('roof_pct', roofAt ? 100 * b.gflops / roofAt : null));
		});
		out.push(el('h3', {}, op),
			 table('cache', ['workload', 'shape', 'target', 'latency \u00b5s', 'GFLOP/s', 'GB/s',
					 'flop/byte', 'trials', '% of roof'], rows));
	}
	out.push(el('h2', {}, 'Rooflines'));
	for (const t of roof.targets)
		out.push(el('h3', {}, t.target), roofline(t), el('p', { class: 'note' }, t.basis));
	show(out);
}

async function pageWorkload() {
	const key = param('key');
	if (!key)
		throw new Error('this page needs ?key=WORKLOAD_KEY');
	const w = await api('/v1/workloads/' + encodeURIComponent(key) + '?include=tir,source');
	const out = [el('h2', {}, `${w.op} ${key.slice(0, 12)}`),
		     el('p', {}, shape(w.workload), ` \u2014 ${fmt(w.flops)} flop a call`),
		     w.op === 'graph' ? el('p', {}, el('a', { href: '/ui/graph?key=' + key }, 'its fusion plan')) : null,
		     table('bests', ['target', 'latency \u00b5s', 'GFLOP/s', 'trials', 'record'],
			   w.best.map(b => el('tr', { 'data-target': b.target }, el('td', {}, b.target),
					      num('latency_us', b.latency_us), num('gflops', b.gflops),
					      num('trials', b.trials), el('td', {}, b.record_id.slice(0, 12)))))];
	for (const b of w.best) {
		out.push(el('h3', {}, `${b.target}: the best kernel`));
		if (b.error)
			out.push(el('p', { class: 'error' }, b.error));
		out.push(el('pre', { class: 'source', 'data-target': b.target }, b.source || ''),
			 el('h3', {}, 'The program'), el('pre', { class: 'tir', 'data-target': b.target }, b.tir || ''),
			 el('h3', {}, 'The trace'),
			 el('pre', { class: 'trace', 'data-target': b.target }, JSON.stringify(b.trace, null, 1)));
	}
	show(out);
}

async function pageWorkers() {
	const [ws, ms] = await Promise.all([api('/v1/workers'), api('/v1/models')]);
	const now = Date.now() / 1000;
	show(el('h2', {}, 'Workers'),
	     table('workers', ['worker', 'name', 'target', 'state', 'address', 'token', 'registered',
			       'last seen', 'batch', 'job'],
		   ws.workers.map(w => el('tr', { 'data-worker': w.worker_id }, el('td', {}, w.worker_id),
			el('td', {}, w.name), el('td', {}, w.target + (w.emulated ? ' (' + w.emulator + ')' : '')),
			el('td', { 'data-k': 'state', 'data-v': w.state }, w.state), el('td', {}, w.address || ''),
			el('td', {}, w.token || ''), el('td', {}, when(w.registered)),
			el('td', {}, Math.max(0, Math.round(now - w.last_seen)) + ' s ago'), el('td', {}, w.batch_id || '\u2014'),
			el('td', {}, w.job_id ? el('a', { href: '/ui/job?id=' + w.job_id }, w.job_id) : '\u2014')))),
	     el('h2', {}, 'Cost models'),
	     table('models', ['target', 'state', 'rows', 'trained on', 'workloads', 'last trained',
			      'pairwise accuracy', 'of the newest batches', 'unsaved rows'],
		   ms.models.map(m => el('tr', { 'data-target': m.target }, el('td', {}, m.target),
			el('td', {}, m.state), num('rows', m.rows), num('trained_rows', m.trained_rows),
			num('workloads', m.workloads), el('td', {}, when(m.last_trained)),
			num('pairwise_accuracy', m.pairwise_accuracy),
			el('td', { class: 'num', 'data-k': 'recent_pairwise_accuracy',
				   'data-v': m.recent_pairwise_accuracy === null ? '' : m.recent_pairwise_accuracy },
			   fmt(m.recent_pairwise_accuracy) + (m.recent_batches ? ` (${m.recent_batches} batches)` : '')),
			num('unsaved_rows', m.unsaved_rows)))),
	     el('p', { class: 'note' }, 'Pairwise accuracy: of the pairs of candidates of one workload whose ' +
		'measured throughputs differ, the share the shared model ordered right before it learnt them.'));
	setTimeout(() => run(pageWorkers), 5000);
}

/* The fusion plan as boxes: one per kernel in execution order, its nodes
 * and bytes inside, an edge where a kernel reads what another makes. */
function planPicture(graph, plan) {
	const BW = 170, GAP = 40, PER = 4;
	const boxH = k => 40 + 14 * k.nodes.length;
	const rowH = Math.max(...plan.kernels.map(boxH)) + GAP;
	const W = PER * (BW + GAP) + GAP, H = Math.ceil(plan.kernels.length / PER) * rowH + GAP;
	const svg = sv('svg', { class: 'plan', width: W, height: H, 'data-kernels': plan.kernels.length });
	const at = plan.kernels.map((k, i) => ({ x: GAP + (i % PER) * (BW + GAP), y: GAP / 2 + Math.floor(i / PER) * rowH }));
	const maker = new Map();
	plan.kernels.forEach((k, i) => k.nodes.forEach(n => { if (!maker.has(n)) maker.set(n, i); }));
	const edges = new Set();
	for (const n of graph.nodes || []) {
		const to = maker.get(n.name);
		for (const a of n.args || [])
			if (maker.has(a) && maker.get(a) !== to)
				edges.add(maker.get(a) + ' ' + to);
	}
	svg.append(sv('defs', {}, sv('marker', { id: 'arrow', viewBox: '0 0 8 8', refX: 8, refY: 4,
						markerWidth: 7, markerHeight: 7, orient: 'auto' },
				     sv('path', { d: 'M0,0L8,4L0,8z', fill: '#999' }))));
	for (const e of edges) {      /* a kernel further on bends below the row */
		const [a, b] = e.split(' ').map(Number);
		const sag = b - a > 1 && at[a].y === at[b].y ? 18 * (b - a) : 0;
		const ya = at[a].y + 20 + (sag ? 14 : 0), yb = at[b].y + 20 + (sag ? 14 : 0);
		svg.append(sv('path', { class: 'edge', 'marker-end': 'url(#arrow)',
			d: `M${at[a].x + BW},${ya}C${at[a].x + BW + GAP + sag},${ya + sag * 2} ` +
			   `${at[b].x - GAP - sag},${yb + sag * 2} ${at[b].x},${yb}` }));
	}
	plan.kernels.forEach((k, i) => {
		const g = sv('g', { class: 'kernel', transform: `translate(${at[i].x},${at[i].y})`, 'data-name': k.name });
		g.append(sv('rect', { width: BW, height: boxH(k), rx: 4 }));
		g.append(sv('text', { x: 6, y: 15, 'font-weight': 600 }, k.name));
		k.nodes.forEach((n, j) => g.append(sv('text', { x: 10, y: 31 + 14 * j }, n)));
		g.append(sv('text', { x: 6, y: boxH(k) - 6, fill: '#666' },
			    `${fmt(k.read_bytes)} B in, ${fmt(k.write_bytes)} B out`));
		svg.append(g);
	});
	return svg;
}

async function pageGraph() {
	const key = param('key'), mode = param('mode') || 'inductor';
	const graphs = await api('/v1/best?op=graph');
	const list = el('ul', {}, graphs.best.map(b => el('li', {},
		el('a', { href: '/ui/graph?key=' + b.workload_key }, b.workload_key.slice(0, 12)),
		` ${shape(b.workload)} on ${b.target}: ${fmt(b.latency_us)} \u00b5s`)));
	const modes = el('select', { id: 'mode' }, ['inductor', 'tvm', 'eager'].map(m =>
		el('option', m === mode ? { selected: '' } : {}, m)));
	const text = el('textarea', { id: 'graph', placeholder: 'a graph workload document ({"op": "graph", ...})' });
	const out = el('div', { id: 'plan' });
	const draw = async doc => {
		const plan = await api('/v1/fuse', { workload: doc, mode: modes.value });
		out.replaceChildren(el('h3', {}, `${plan.kernels.length} kernels (${plan.mode}): ` +
					  `${fmt(plan.read_bytes)} B read, ${fmt(plan.write_bytes)} B written`),
				    planPicture(doc, plan),
				    plan.rejected.length ? table('rejected', ['nodes', 'why not fused'],
					plan.rejected.map(r => el('tr', {}, el('td', {}, r.nodes.join(', ')),
								  el('td', {}, r.reason)))) : '');
	};
	const button = el('button', { type: 'button' }, 'plan it');
	button.onclick = () => {
		let doc;
		try {
			doc = JSON.parse(text.value);
		} catch (e) {
			out.replaceChildren(el('p', { class: 'error' }, 'not JSON: ' + e.message));
			return;
		}
		draw(doc).catch(e => out.replaceChildren(el('p', { class: 'error' }, e.message)));
	};
	show(el('h2', {}, 'Graph workloads'),
	     graphs.best.length ? list : el('p', { class: 'note' }, 'No graph workload is tuned yet.'),
	     el('p', {}, 'mode ', modes, ' ', button), text, out);
	if (key) {
		document.body.dataset.ready = 'pending';
		const w = await api('/v1/workloads/' + encodeURIComponent(key));
		if (w.op !== 'graph')
			throw new Error(`workload ${key.slice(0, 12)} is a ${w.op}, not a graph`);
		text.value = JSON.stringify(w.workload, null, 1);
		await draw(w.workload);
		document.body.dataset.ready = '1';
	}
}

/* ---- the token form and dispatch ------------------------------------------------------ */

function showLogin(why) {
	const form = document.getElementById('login');
	form.hidden = false;
	main.replaceChildren();
	document.getElementById('login-error').textContent = why;
	document.body.dataset.ready = 'login';
	form.onsubmit = e => {
		e.preventDefault();
		sessionStorage.setItem(TOKEN_KEY, document.getElementById('token').value);
		location.reload();
	};
}

const PAGES = { '/': pageJobs, '/ui/jobs': pageJobs, '/ui/job': pageJob, '/ui/cache': pageCache,
		'/ui/workload': pageWorkload, '/ui/workers': pageWorkers, '/ui/graph': pageGraph };

async function run(page) {
	try {
		await page();
	} catch (e) {
		if (e instanceof Unauthorized)
			showLogin(e.message);
		else
			show(el('p', { class: 'error' }, e.message));
	}
}

document.body.dataset.page = location.pathname;
run(PAGES[location.pathname.replace(/\/$/, '') || '/'] || (() => {
	throw new Error('no dashboard page ' + location.pathname);
}));
