// The Scratchformer explorer's page logic: plain JavaScript, no framework, no build step, nothing
// fetched but the explorer's own JSON API (docs/explorer.md). Loaded by index.html after
// i18n.js (which gives t(), applyI18n(), setLanguage()).
//
// Two modes share every view:
//   live   (`scratchformer serve`): getData() calls the HTTP API; curves are polled every 2 s.
//   report (`scratchformer report`): window.SF_REPORT_DATA holds the data; getData() reads it,
//          and the controls that need a live model (class "live-only") are hidden.
//
// Layout of this file: helpers (DOM, numbers, colours) -> getData() -> charts (SVG line chart,
// canvas heatmap) -> one block per page (runs, translate, attention, step, training, lessons)
// -> start-up. Every view is a function of `state`, so switching the language re-renders it.
'use strict';

const POLL_MS = 2000;              // metrics.tsv / layer_norms.tsv polling period
const RUNS_REFRESH_TICKS = 5;      // the runs list is refreshed every 5 polls
const METRICS = ['loss', 'nll', 'ppl', 'lr', 'bleu', 'tokens_per_s', 'grad_norm', 'accuracy'];
const LOG_METRICS = new Set(['ppl']);
const KINDS = ['train', 'valid', 'test'];
const PALETTE = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf', '#8c564b', '#e377c2'];
const REPORT = typeof window.SF_REPORT_DATA === 'object' && window.SF_REPORT_DATA !== null;

const state = {
  info: null,
  runs: [],                  // /api/runs .runs
  shown: new Set(),          // runs whose curves are drawn
  configRun: null,           // run whose config is shown
  metrics: {},               // run -> {columns, rows}
  norms: {},                 // run -> {columns, rows}
  model: null,               // {run, checkpoint} for translate / attention / step
  translate: null,           // last /api/translate answer
  attention: null,           // last /api/attention answer
  attribution: null,         // last /api/attribution answer
  at: {stack: 0, layer: 0, head: 0},
  step: null,                // {A: answer, B: answer}
  stepSide: 'A',
  collapsed: new Set(),      // module paths folded in the step tree
  openRow: null,             // module row index whose details are open
  snapshots: null, snapshotsRun: null,
  ot: {index: 0, stack: 0, layer: 0, head: -1},
  demos: null, demo: null,     // /api/demos .demos; {name, report, step} of the open demo
  tab: 'runs', shownTabs: new Set(), pollTick: 0, polling: false,
};

// ---- DOM and number helpers ----------------------------------------------------------------

const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));
const SVG_NS = 'http://www.w3.org/2000/svg';

// el('div', {class: 'x', text: 'hi', onclick: f, 'data-k': 1}, [children])
function el(tag, attrs = {}, children = []) {
  const e = document.createElement(tag);
  setAttrs(e, attrs);
  for (const c of children) if (c !== null && c !== undefined) e.append(c);
  return e;
}

function svgEl(tag, attrs = {}, parent = null) {
  const e = document.createElementNS(SVG_NS, tag);
  setAttrs(e, attrs);
  if (parent) parent.appendChild(e);
  return e;
}

function setAttrs(e, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : v);
  }
}

function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }

function fmt(v, digits = 4) {
  if (v === null || v === undefined || v === '') return '–';
  if (typeof v !== 'number') return String(v);
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (Number.isInteger(v) && a < 1e12) return String(v);  // counts and bytes in full
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return String(Number(v.toPrecision(digits)));
}

function pct(p) { return (p * 100).toFixed(p >= 0.1 ? 1 : 2) + '%'; }

function isNum(v) { return typeof v === 'number' && Number.isFinite(v); }

function intValue(id) { return parseInt($(id).value, 10); }
function numValue(id) { return parseFloat($(id).value); }

// Colour scales: sequential white -> dark blue (weights in [0, 1]); diverging blue-white-red.
function mix(a, b, f) { return a.map((x, i) => Math.round(x + (b[i] - x) * f)); }
function scaleColor(stops, f) {
  f = Math.min(1, Math.max(0, f));
  const n = stops.length - 1, i = Math.min(n - 1, Math.floor(f * n));
  const c = mix(stops[i], stops[i + 1], f * n - i);
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}
const BLUES = [[255, 255, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
const DIVERGING = [[33, 102, 172], [146, 197, 222], [247, 247, 247], [244, 165, 130], [178, 24, 43]];
function blue(f) { return scaleColor(BLUES, f); }
function diverging(f) { return scaleColor(DIVERGING, f); }
function seriesColor(i, n) {
  if (n <= PALETTE.length) return PALETTE[i % PALETTE.length];
  return `hsl(${Math.round(240 - 240 * i / Math.max(1, n - 1))}, 70%, 45%)`;
}

// ---- errors --------------------------------------------------------------------------------

function showError(id, err) {
  const box = $(id);
  box.textContent = t('err.prefix') + ' ' + (err && err.message ? err.message : String(err));
  box.hidden = false;
}
function hideError(id) { const box = $(id); box.hidden = true; box.textContent = ''; }

window.addEventListener('unhandledrejection', (e) => { e.preventDefault(); showError('#global-error', e.reason); });
window.addEventListener('error', (e) => { showError('#global-error', e.error || e.message); });

// ---- data access: the one function both modes go through -----------------------------------

// getData(kind, params) -> Promise of the JSON answer of docs/explorer.md's API.
// kinds: info, runs, metrics {run, since}, layer_norms {run, since}, snapshots {run},
// translate {...body}, attention {...body}, step {...body}, demos, demo {name, text}.
function getData(kind, params = {}) {
  if (REPORT) return Promise.resolve().then(() => reportData(kind, params));
  const run = encodeURIComponent(params.run || '');
  const since = Number.isInteger(params.since) ? params.since : 0;
  switch (kind) {
    case 'info': return apiFetch('/api/info');
    case 'runs': return apiFetch('/api/runs');
    case 'metrics': return apiFetch(`/api/runs/${run}/metrics?since=${since}`);
    case 'layer_norms': return apiFetch(`/api/runs/${run}/layer_norms?since=${since}`);
    case 'snapshots': return apiFetch(`/api/runs/${run}/snapshots`);
    case 'demos': return apiFetch('/api/demos');
    case 'translate': case 'attention': case 'attribution': case 'step': case 'demo':
      return apiFetch('/api/' + kind, params);
    default: return Promise.reject(new Error('getData: unknown kind ' + kind));
  }
}

async function apiFetch(url, body) {
  const init = body === undefined ? {} :
    {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)};
  let res;
  try { res = await fetch(url, init); } catch (e) { throw new Error(t('err.network', {url})); }
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch (e) {
    throw new Error(t('err.not_json', {url, status: res.status}));
  }
  if (!res.ok || (json && typeof json.error === 'string')) {
    throw new Error(json && json.error ? json.error : t('err.http', {url, status: res.status}));
  }
  return json;
}

// The report file's data: SF_REPORT_DATA = {runs, metrics: {RUN: {columns, rows}},
// layer_norms: {RUN: {columns, rows}}, snapshots: {RUN: {snapshots}}, sentences: [{text,
// translate, attention}]} (docs/explorer.md, "Report data").
function reportData(kind, params) {
  const D = window.SF_REPORT_DATA;
  const table = (m) => {
    const rows = (m && m.rows) || [], since = params.since || 0;
    return {columns: (m && m.columns) || [], rows: rows.slice(since), total: rows.length};
  };
  switch (kind) {
    case 'info': return {version: D.version || '', report: true, default: null, limits: {}, archs: []};
    case 'runs': return {runs: D.runs || []};
    case 'metrics': return table((D.metrics || {})[params.run]);
    case 'layer_norms': return table((D.layer_norms || {})[params.run]);
    case 'snapshots': return (D.snapshots || {})[params.run] || {snapshots: []};
    case 'translate': case 'attention': case 'attribution': {
      const s = (D.sentences || []).find((x) => x.text === params.text);
      if (!s || !s[kind]) throw new Error(t('err.report_sentence'));
      if (s[kind].error) throw new Error(s[kind].error);
      return s[kind];
    }
    default: throw new Error(t('err.report_live'));
  }
}

// ---- charts: an SVG line chart ---------------------------------------------------------------

function niceStep(span, count) {
  const raw = span / Math.max(1, count), mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / mag;
  return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

function linearTicks(lo, hi, count = 5) {
  if (lo === hi) { lo -= Math.abs(lo) * 0.1 || 1; hi += Math.abs(hi) * 0.1 || 1; }
  const step = niceStep(hi - lo, count);
  const a = Math.floor(lo / step) * step, b = Math.ceil(hi / step) * step;
  const ticks = [];
  for (let v = a; v <= b + step / 2; v += step) ticks.push(Math.abs(v) < step * 1e-9 ? 0 : v);
  return {lo: a, hi: b, ticks};
}

function logTicks(lo, hi) {
  let a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
  if (a === b) { a -= 1; b += 1; }
  const ticks = [];
  const every = Math.max(1, Math.ceil((b - a) / 6));
  for (let e = a; e <= b; e += every) ticks.push(Math.pow(10, e));
  return {lo: Math.pow(10, a), hi: Math.pow(10, b), ticks, log: true};
}

// 1e-4 rather than 1.00e-4 for a power of ten on a log axis.
function tickText(v, log) {
  if (!log) return fmt(v, 3);
  const e = Math.round(Math.log10(v));
  return e >= -2 && e <= 4 ? String(Number(v.toPrecision(3))) : '1e' + e;
}

// opts: {key, title, series: [{label, color, points: [[x, y]], dash, markers}], logX, logY,
//        xLabel, yLabel, xLabels (categorical x: labels by index), marks: [{x, label}] (dashed
//        vertical lines), width, height}
function lineChart(opts) {
  const W = opts.width || 380, H = opts.height || 220, m = {l: 54, r: 14, t: 26, b: 34};
  const wrap = el('div', {class: 'chart', 'data-chart': opts.key || ''});
  const root = svgEl('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart-svg'});
  wrap.append(root);
  svgEl('text', {x: 4, y: 15, class: 'chart-title'}, root).textContent = opts.title || '';
  const ok = (p) => isNum(p[0]) && isNum(p[1]) && (!opts.logY || p[1] > 0) && (!opts.logX || p[0] > 0);
  const series = opts.series.map((s) => ({...s, points: s.points.filter(ok).sort((a, b) => a[0] - b[0])}));
  const all = series.flatMap((s) => s.points);
  if (all.length === 0) {
    svgEl('text', {x: W / 2, y: H / 2, class: 'chart-empty', 'text-anchor': 'middle'}, root).textContent = t('chart.no_data');
    return wrap;
  }
  const xs = all.map((p) => p[0]), ys = all.map((p) => p[1]);
  const X = opts.logX ? logTicks(Math.min(...xs), Math.max(...xs)) : linearTicks(Math.min(...xs), Math.max(...xs), 5);
  if (opts.xLabels) { X.lo = Math.min(...xs) - 0.5; X.hi = Math.max(...xs) + 0.5; }
  const Y = opts.logY ? logTicks(Math.min(...ys), Math.max(...ys)) : linearTicks(Math.min(...ys), Math.max(...ys), 4);
  const sx = opts.logX ? (x) => m.l + (Math.log10(x) - Math.log10(X.lo)) / (Math.log10(X.hi) - Math.log10(X.lo)) * (W - m.l - m.r)
    : (x) => m.l + (x - X.lo) / (X.hi - X.lo) * (W - m.l - m.r);
  const sy = opts.logY ? (y) => H - m.b - (Math.log10(y) - Math.log10(Y.lo)) / (Math.log10(Y.hi) - Math.log10(Y.lo)) * (H - m.t - m.b)
    : (y) => H - m.b - (y - Y.lo) / (Y.hi - Y.lo) * (H - m.t - m.b);
  drawAxes(root, {W, H, m, X, Y, sx, sy, opts});
  for (const mark of opts.marks || []) {
    if (!(mark.x >= X.lo && mark.x <= X.hi)) continue;
    svgEl('line', {x1: sx(mark.x), x2: sx(mark.x), y1: m.t, y2: H - m.b, class: 'mark', stroke: '#555', 'stroke-dasharray': '4 3'}, root);
    svgEl('text', {x: sx(mark.x) + 3, y: m.t + 10, class: 'tick'}, root).textContent = mark.label;
  }
  for (const s of series) drawSeries(root, s, sx, sy);
  addChartHover(wrap, root, {series, sx, W, H, m, X, opts});
  return wrap;
}

function drawAxes(root, {W, H, m, X, Y, sx, sy, opts}) {
  const g = svgEl('g', {class: 'axes'}, root);
  for (const y of Y.ticks) {
    svgEl('line', {x1: m.l, x2: W - m.r, y1: sy(y), y2: sy(y), class: 'grid'}, g);
    svgEl('text', {x: m.l - 5, y: sy(y) + 4, 'text-anchor': 'end', class: 'tick'}, g).textContent = tickText(y, Y.log);
  }
  const xt = opts.xLabels ? categoricalTicks(opts.xLabels, X) : X.ticks;
  for (const x of xt) {
    if (x < X.lo || x > X.hi) continue;
    svgEl('line', {x1: sx(x), x2: sx(x), y1: H - m.b, y2: H - m.b + 4, class: 'axis'}, g);
    const label = opts.xLabels ? (opts.xLabels.length > 10 ? String(x) : opts.xLabels[x]) : X.log ? tickText(x, true) : fmt(x, 4);
    svgEl('text', {x: sx(x), y: H - m.b + 16, 'text-anchor': 'middle', class: 'tick'}, g).textContent = label;
  }
  svgEl('line', {x1: m.l, x2: W - m.r, y1: H - m.b, y2: H - m.b, class: 'axis'}, g);
  svgEl('line', {x1: m.l, x2: m.l, y1: m.t, y2: H - m.b, class: 'axis'}, g);
  if (opts.xLabel) {
    svgEl('text', {x: W - m.r, y: H - 4, 'text-anchor': 'end', class: 'axis-label'}, g).textContent = opts.xLabel;
  }
  if (opts.yLabel) svgEl('text', {x: m.l + 4, y: m.t - 6, class: 'axis-label'}, g).textContent = opts.yLabel;
}

function categoricalTicks(labels, X) {
  const n = Math.round(X.hi - X.lo), every = Math.max(1, Math.ceil(n / 8));
  const out = [];
  for (let i = Math.ceil(X.lo); i <= X.hi; i += every) if (labels[i] !== undefined) out.push(i);
  return out;
}

function drawSeries(root, s, sx, sy) {
  if (s.points.length === 0) return;
  const d = s.points.map((p, i) => (i ? 'L' : 'M') + sx(p[0]).toFixed(1) + ' ' + sy(p[1]).toFixed(1)).join(' ');
  svgEl('path', {d, class: 'series', stroke: s.color, 'stroke-dasharray': s.dash || null,
    'data-series': s.label, 'data-points': s.points.length, fill: 'none'}, root);
  if (s.square) {  // the test set's one point: a hollow square, so it is not taken for a validation point
    for (const p of s.points) svgEl('rect', {x: sx(p[0]) - 4, y: sy(p[1]) - 4, width: 8, height: 8, fill: '#fff', stroke: s.color, 'stroke-width': 2}, root);
  } else if (s.markers || s.points.length <= 2) {
    for (const p of s.points) svgEl('circle', {cx: sx(p[0]), cy: sy(p[1]), r: 2.6, fill: s.color}, root);
  }
}

// The hover guide: a vertical line and a tooltip with each series' value nearest the mouse.
function addChartHover(wrap, root, {series, sx, W, H, m, X, opts}) {
  const guide = svgEl('line', {y1: m.t, y2: H - m.b, class: 'guide', visibility: 'hidden'}, root);
  const hit = svgEl('rect', {x: m.l, y: m.t, width: W - m.l - m.r, height: H - m.t - m.b, class: 'hit'}, root);
  hit.addEventListener('mousemove', (ev) => {
    const box = root.getBoundingClientRect();
    const px = (ev.clientX - box.left) * (W / box.width);
    const f = (px - m.l) / (W - m.l - m.r);
    const x = opts.logX ? Math.pow(10, Math.log10(X.lo) + f * (Math.log10(X.hi) - Math.log10(X.lo))) : X.lo + f * (X.hi - X.lo);
    const lines = [];
    let gx = null;
    for (const s of series) {
      const p = nearest(s.points, x);
      if (!p) continue;
      gx = gx === null ? p[0] : gx;
      lines.push({color: s.color, text: `${s.label}: ${fmt(p[1])}` + (opts.xLabels ? '' : `  (${fmt(p[0], 6)})`)});
    }
    if (gx === null) return;
    guide.setAttribute('x1', sx(gx)); guide.setAttribute('x2', sx(gx)); guide.setAttribute('visibility', 'visible');
    const head = opts.xLabels ? opts.xLabels[Math.round(x)] || '' : (opts.xLabel || '') + ' ' + fmt(gx, 6);
    showTooltip(ev, head, lines);
  });
  hit.addEventListener('mouseleave', () => { guide.setAttribute('visibility', 'hidden'); hideTooltip(); });
}

function nearest(points, x) {
  if (points.length === 0) return null;
  let lo = 0, hi = points.length - 1;
  while (hi - lo > 1) { const mid = (lo + hi) >> 1; if (points[mid][0] < x) lo = mid; else hi = mid; }
  return Math.abs(points[lo][0] - x) <= Math.abs(points[hi][0] - x) ? points[lo] : points[hi];
}

function showTooltip(ev, head, lines) {
  const tip = clear($('#tooltip'));
  if (head) tip.append(el('div', {class: 'tip-head', text: head}));
  for (const l of lines.slice(0, 14)) {
    tip.append(el('div', {}, [el('span', {class: 'swatch', style: `background:${l.color || '#888'}`}), l.text]));
  }
  tip.hidden = false;
  const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
  const y = Math.min(ev.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
  tip.style.left = x + 'px'; tip.style.top = y + 'px';
}
function hideTooltip() { $('#tooltip').hidden = true; }

function legend(items) {
  return el('div', {class: 'legend'}, items.map((it) => el('span', {class: 'legend-item'}, [
    el('span', {class: 'swatch' + (it.dash ? ' dashed' : '') + (it.square ? ' square' : ''), style: it.square ? `border-color:${it.color}` : `background:${it.color}; border-color:${it.color}`}),
    it.label])));
}

// ---- charts: a canvas heatmap ----------------------------------------------------------------

let hatchPattern = null;
function hatch(ctx) {
  if (hatchPattern) return hatchPattern;
  const c = document.createElement('canvas');
  c.width = 6; c.height = 6;
  const g = c.getContext('2d');
  g.fillStyle = '#d9d9d9'; g.fillRect(0, 0, 6, 6);
  g.strokeStyle = '#8c8c8c'; g.lineWidth = 1;
  g.beginPath(); g.moveTo(0, 6); g.lineTo(6, 0); g.moveTo(-1, 1); g.lineTo(1, -1); g.moveTo(5, 7); g.lineTo(7, 5); g.stroke();
  hatchPattern = ctx.createPattern(c, 'repeat');
  return hatchPattern;
}

// matrix [R][C] of numbers; opts: {masked [R][C] bools, rowLabels, colLabels, cell (px),
// color (value -> css colour; default blue over [min, max]), min, max, onHover(i, j) / (null),
// rowTitle, colTitle, className}
function heatmap(matrix, opts = {}) {
  const R = matrix.length, C = R ? matrix[0].length : 0;
  const vals = matrix.flat().filter(isNum);
  const lo = opts.min !== undefined ? opts.min : Math.min(...vals, 0);
  const hi = opts.max !== undefined ? opts.max : Math.max(...vals, 1e-12);
  const color = opts.color || ((v) => blue((v - lo) / (hi - lo || 1)));
  const font = '11px ' + getComputedStyle(document.body).fontFamily;
  const canvas = el('canvas', {class: 'heatmap ' + (opts.className || '')});
  const ctx = canvas.getContext('2d');
  ctx.font = font;
  const labW = opts.rowLabels ? Math.min(140, Math.max(...opts.rowLabels.map((s) => ctx.measureText(String(s)).width), 0) + 8) : 0;
  // column labels are turned 60 degrees: a label of width w rises w sin 60 and reaches w cos 60
  // to the right of its column, so the canvas leaves that much room (no label is cut short)
  const colW = opts.colLabels ? Math.max(...opts.colLabels.map((s) => ctx.measureText(clip(String(s), 18)).width), 0) : 0;
  const labH = opts.colLabels ? colW * 0.87 + 14 : 0;
  const cell = opts.cell || 16;
  const W = labW + C * cell + 2 + colW * 0.5, H = labH + R * cell + 2, dpr = window.devicePixelRatio || 1;
  canvas.width = Math.ceil(W * dpr); canvas.height = Math.ceil(H * dpr);
  canvas.style.width = W + 'px'; canvas.style.height = H + 'px';
  // for the browser test: the widest column label and the room left for it above and to the right
  Object.assign(canvas.dataset, {labelWidth: colW.toFixed(1), labelUp: (labH - 14).toFixed(1), labelRight: (W - labW - C * cell - 2).toFixed(1)});
  ctx.scale(dpr, dpr);
  ctx.font = font;
  drawCells(ctx, matrix, {masked: opts.masked, x0: labW, y0: labH, cell, color, printValues: opts.printValues});
  drawHeatmapLabels(ctx, opts, {labW, labH, cell, R, C});
  if (opts.onHover) hookHeatmapHover(canvas, {labW, labH, cell, R, C, onHover: opts.onHover});
  return canvas;
}

function drawCells(ctx, matrix, {masked, x0, y0, cell, color, printValues}) {
  for (let i = 0; i < matrix.length; i++) {
    for (let j = 0; j < matrix[i].length; j++) {
      const v = matrix[i][j];
      const isMasked = masked && masked[i] && masked[i][j];
      ctx.fillStyle = isMasked ? hatch(ctx) : isNum(v) ? color(v) : '#f0f0f0';
      ctx.fillRect(x0 + j * cell, y0 + i * cell, cell, cell);
      if (printValues && isNum(v)) {
        ctx.fillStyle = isMasked ? '#555' : inkOn(ctx.fillStyle);
        ctx.textAlign = 'center'; ctx.textBaseline = 'middle';
        ctx.fillText(v.toFixed(2), x0 + (j + 0.5) * cell, y0 + (i + 0.5) * cell);
      }
    }
  }
  ctx.strokeStyle = '#999'; ctx.lineWidth = 1;
  ctx.strokeRect(x0 + 0.5, y0 + 0.5, (matrix[0] ? matrix[0].length : 0) * cell, matrix.length * cell);
}

function drawHeatmapLabels(ctx, opts, {labW, labH, cell, R, C}) {
  ctx.fillStyle = '#333';
  if (opts.rowLabels && cell >= 8) {
    ctx.textAlign = 'right'; ctx.textBaseline = 'middle';
    for (let i = 0; i < R; i++) ctx.fillText(clip(String(opts.rowLabels[i]), 18), labW - 4, labH + i * cell + cell / 2);
  }
  if (opts.colLabels && cell >= 8) {
    ctx.textAlign = 'left'; ctx.textBaseline = 'middle';
    for (let j = 0; j < C; j++) {
      ctx.save();
      ctx.translate(labW + j * cell + cell / 2, labH - 4);
      ctx.rotate(-Math.PI / 3);
      ctx.fillText(clip(String(opts.colLabels[j]), 18), 0, 0);
      ctx.restore();
    }
  }
}

// Dark or light text on a cell of colour `rgb(r,g,b)`.
// (A canvas reads an opaque colour back as "#rrggbb".)
function inkOn(css) {
  const s = String(css), hex = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(s), rgb = /rgb\((\d+),\s*(\d+),\s*(\d+)\)/.exec(s);
  const c = hex ? hex.slice(1).map((h) => parseInt(h, 16)) : rgb ? rgb.slice(1).map(Number) : null;
  if (!c) return '#111';
  return 0.299 * c[0] + 0.587 * c[1] + 0.114 * c[2] > 140 ? '#111' : '#fff';
}

function clip(s, n) { return s.length > n ? s.slice(0, n - 1) + '…' : s; }

function hookHeatmapHover(canvas, {labW, labH, cell, R, C, onHover}) {
  canvas.addEventListener('mousemove', (ev) => {
    const box = canvas.getBoundingClientRect();
    const j = Math.floor((ev.clientX - box.left - labW) / cell), i = Math.floor((ev.clientY - box.top - labH) / cell);
    onHover(i >= 0 && i < R && j >= 0 && j < C ? i : null, j, ev);
  });
  canvas.addEventListener('mouseleave', () => onHover(null, null));
}

// A colour bar: lo .. hi with the same colour function.
function colorBar(lo, hi, color, label) {
  const c = el('canvas', {class: 'colorbar', width: 160, height: 10});
  const g = c.getContext('2d');
  for (let x = 0; x < 160; x++) { g.fillStyle = color(lo + (hi - lo) * x / 159); g.fillRect(x, 0, 1, 10); }
  return el('div', {class: 'colorbar-row'}, [el('span', {text: fmt(lo, 3)}), c, el('span', {text: fmt(hi, 3)}),
    label ? el('span', {class: 'hint small', text: ' ' + label}) : null]);
}

function maskedKey() {
  return el('span', {class: 'legend-item'}, [el('span', {class: 'swatch hatched'}), t('at.masked')]);
}

// ---- page 1: runs and their curves ---------------------------------------------------------

async function loadRuns() {
  try {
    const answer = await getData('runs');
    state.runs = answer.runs || [];
    hideError('#runs-error');
  } catch (e) { showError('#runs-error', e); return; }
  if (state.shown.size === 0) pickDefaultRuns();
  renderRunsTable();
  fillRunSelects();
  fillModelSelect();
}

function pickDefaultRuns() {
  const withMetrics = state.runs.filter((r) => r.has_metrics).sort((a, b) => (b.modified || 0) - (a.modified || 0));
  const pick = REPORT ? withMetrics : withMetrics.slice(0, 1);
  for (const r of pick) state.shown.add(r.name);
  if (!state.configRun && state.runs.length) state.configRun = (pick[0] || state.runs[0]).name;
}

function runColor(name) {
  const i = state.runs.findIndex((r) => r.name === name);
  return PALETTE[(i < 0 ? 0 : i) % PALETTE.length];
}

function renderRunsTable() {
  const body = clear($('#runs-table tbody'));
  $('#runs-empty').hidden = state.runs.length > 0;
  for (const r of state.runs) {
    const box = el('input', {type: 'checkbox', class: 'run-toggle', 'data-run': r.name, 'aria-label': r.name,
      onchange: (ev) => toggleRun(r.name, ev.target.checked)});
    box.checked = state.shown.has(r.name);
    const name = el('button', {type: 'button', class: 'linkish', text: r.name, onclick: () => showConfig(r.name)});
    const modified = r.modified ? new Date(r.modified * 1000).toLocaleString(lang() === 'zh' ? 'zh-CN' : 'en-GB') : '–';
    body.append(el('tr', {class: r.name === state.configRun ? 'selected' : ''}, [
      el('td', {}, [box, el('span', {class: 'swatch', style: `background:${runColor(r.name)}`})]),
      el('td', {}, [name]), el('td', {text: r.arch || '–'}),
      r.error ? el('td', {class: 'run-error', text: r.error}) : el('td', {text: r.task || '–'}),
      el('td', {class: 'num', text: r.metrics_rows !== undefined ? String(r.metrics_rows) : '–'}),
      el('td', {text: (r.checkpoints || []).map(shortCheckpoint).join(', ') || '–', title: (r.checkpoints || []).join('\n')}),
      el('td', {text: modified})]));
  }
  showConfig(state.configRun, false);
}

// "checkpoint-best.safetensors" -> "best"
// "checkpoint-best.safetensors" -> "best" (in the page's language); other names as they are.
function shortCheckpoint(name) {
  const short = name.replace(/^checkpoint-/, '').replace(/\.safetensors$/, '');
  return short === 'best' || short === 'last' ? t('ckpt.' + short) : short;
}

function showConfig(name, rerender = true) {
  const r = state.runs.find((x) => x.name === name);
  state.configRun = r ? r.name : null;
  $('#runs-config-name').textContent = r ? r.name : '';
  $('#runs-config').textContent = r ? (r.config || t('runs.no_config')) : t('runs.pick');
  if (rerender) renderRunsTable();
}

async function toggleRun(name, on) {
  if (on) state.shown.add(name); else state.shown.delete(name);
  if (on && !state.metrics[name]) await fetchMetrics(name);
  renderCharts();
}

// Appends the rows from `since` on; a file that shrank (a new training in the same directory)
// is read again from the start.
async function fetchTable(kind, store, run) {
  const have = store[run];
  const since = have ? have.rows.length : 0;
  const answer = await getData(kind, {run, since});
  if (have && answer.total < since) { delete store[run]; return fetchTable(kind, store, run); }
  const rows = answer.rows || [];
  if (!have) store[run] = {columns: answer.columns || [], rows};
  else store[run].rows.push(...rows);
  return !have || rows.length > 0;
}

async function fetchMetrics(name) {
  try { return await fetchTable('metrics', state.metrics, name); } catch (e) { showError('#runs-error', e); return false; }
}

function metricSeries(metric) {
  const out = [];
  for (const run of state.runs.map((r) => r.name).filter((n) => state.shown.has(n))) {
    const m = state.metrics[run];
    if (!m) continue;
    const ci = m.columns.indexOf(metric), si = m.columns.indexOf('step'), ki = m.columns.indexOf('kind');
    if (ci < 0 || si < 0) continue;
    for (const kind of KINDS) {
      const points = m.rows.filter((r) => (ki < 0 ? 'train' : r[ki]) === kind && isNum(r[ci])).map((r) => [r[si], r[ci]]);
      if (points.length === 0) continue;
      out.push({label: `${run} · ${t('kind.' + kind)}`, color: runColor(run), points,
        dash: kind === 'valid' ? '5 3' : kind === 'test' ? '1 3' : null, markers: kind !== 'train', square: kind === 'test'});
    }
  }
  return out;
}

function renderCharts() {
  const grid = clear($('#runs-charts'));
  for (const metric of METRICS) {
    const series = metricSeries(metric);
    if (metric === 'accuracy' && series.length === 0) continue;
    grid.append(lineChart({key: metric, title: t('metric.' + metric), series, logY: LOG_METRICS.has(metric), xLabel: t('chart.step')}));
  }
  const items = state.runs.filter((r) => state.shown.has(r.name)).map((r) => ({label: r.name, color: runColor(r.name)}));
  const kinds = [{label: t('kind.train'), color: '#555'}, {label: t('kind.valid'), color: '#555', dash: true},
    {label: t('kind.test_final'), color: '#555', square: true}];
  clear($('#runs-legend')).append(...(items.length ? [legend(items), legend(kinds)] : [el('span', {class: 'hint', text: t('runs.none_shown')})]));
}

// ---- per-layer weight and gradient norms (pages 1 and 5) ------------------------------------

async function fetchNorms(run) {
  return fetchTable('layer_norms', state.norms, run);
}

function renderNorms(target, run) {
  const box = clear($(target));
  const n = state.norms[run];
  if (!run) { box.append(el('p', {class: 'empty', text: t('norms.no_run')})); return; }
  if (!n || n.rows.length === 0) { box.append(el('p', {class: 'empty', text: t('norms.none', {run})})); return; }
  const si = n.columns.indexOf('step'), pi = n.columns.indexOf('layer') >= 0 ? n.columns.indexOf('layer') : n.columns.indexOf('param');
  const params = [...new Set(n.rows.map((r) => r[pi]))];
  const grid = el('div', {class: 'chart-grid two'});
  for (const col of ['weight_norm', 'grad_norm']) {
    const ci = n.columns.indexOf(col);
    const series = params.map((p, i) => ({label: p, color: seriesColor(i, params.length),
      points: n.rows.filter((r) => r[pi] === p).map((r) => [r[si], r[ci]])}));
    grid.append(lineChart({key: 'norms-' + col, title: t('norms.' + col), series, logY: col === 'grad_norm',
      xLabel: t('chart.step'), width: 460, height: 250}));
  }
  box.append(grid, legend(params.map((p, i) => ({label: p, color: seriesColor(i, params.length)}))));
}

async function showRunsNorms() {
  const run = $('#runs-norms-run').value;
  if (run) { try { await fetchNorms(run); } catch (e) { showError('#runs-error', e); } }
  renderNorms('#runs-norms', run);
}

function fillRunSelects() {
  for (const id of ['#runs-norms-run', '#ot-run']) {
    const sel = $(id), keep = sel.value;
    clear(sel);
    for (const r of state.runs) sel.append(el('option', {value: r.name, text: r.name}));
    const first = [...state.shown][0] || (state.runs[0] && state.runs[0].name) || '';
    sel.value = state.runs.some((r) => r.name === keep) ? keep : first;
  }
}

// Every 2 s (live mode, the tab visible): new metrics rows of the shown runs, new layer-norm
// rows, and now and then the runs list (a training that just started appears).
async function poll() {
  if (REPORT || state.polling || document.hidden) return;
  if (state.tab !== 'runs' && state.tab !== 'training') return;
  state.polling = true;
  try {
    state.pollTick++;
    if (state.pollTick % RUNS_REFRESH_TICKS === 0) await loadRuns();
    let grew = false;
    for (const run of state.shown) grew = (await fetchMetrics(run)) || grew;
    if (grew) renderCharts();
    const normsRun = state.tab === 'runs' ? $('#runs-norms-run').value : $('#ot-run').value;
    if (normsRun && (await fetchNorms(normsRun))) {
      if (state.tab === 'runs') renderNorms('#runs-norms', normsRun); else renderNorms('#ot-norms', normsRun);
    }
    state.lastPoll = new Date();
    showPollTime();
  } catch (e) {
    showError('#runs-error', e);
  } finally { state.polling = false; }
}

// ---- the model picker -------------------------------------------------------------------------

function fillModelSelect() {
  const sel = $('#model-select');
  const options = [];
  if (state.info && state.info.default && state.info.default.run === '') {
    options.push({run: '', checkpoint: state.info.default.checkpoint, label: state.info.default.checkpoint});
  }
  for (const r of state.runs) for (const c of r.checkpoints || []) options.push({run: r.name, checkpoint: c, label: `${r.name} / ${c}`});
  clear(sel);
  if (options.length === 0) sel.append(el('option', {value: '', text: t('model.none')}));
  for (const o of options) sel.append(el('option', {value: JSON.stringify({run: o.run, checkpoint: o.checkpoint}), text: o.label}));
  const want = state.model ? JSON.stringify(state.model) : defaultModelKey(options);
  sel.value = options.some((o) => JSON.stringify({run: o.run, checkpoint: o.checkpoint}) === want) ? want : sel.options[0].value;
  state.model = sel.value ? JSON.parse(sel.value) : null;
}

function defaultModelKey(options) {
  const d = state.info && state.info.default;
  if (d) return JSON.stringify({run: d.run, checkpoint: d.checkpoint});
  const best = options.find((o) => o.checkpoint === 'checkpoint-best.safetensors') || options[0];
  return best ? JSON.stringify({run: best.run, checkpoint: best.checkpoint}) : '';
}

function modelFields() {
  if (!state.model) throw new Error(t('model.none'));
  return {run: state.model.run, checkpoint: state.model.checkpoint};
}

// ---- page 2: translate / generate ---------------------------------------------------------------

function translateBody() {
  const body = {...modelFields(), text: $('#tr-text').value.trim(), mode: $('#tr-mode').value,
    beam: intValue('#tr-beam'), length_penalty: numValue('#tr-lp'), temperature: numValue('#tr-temperature'),
    top_k: intValue('#tr-topk'), top_p: numValue('#tr-topp'), seed: intValue('#tr-seed'), max_new: intValue('#tr-maxnew')};
  // an empty length penalty: the server uses the model's (train.valid_length_penalty, as translate does)
  if ($('#tr-lp').value.trim() === '') delete body.length_penalty;
  return body;
}

async function runTranslate() {
  hideError('#tr-error');
  const button = $('#tr-go');
  button.disabled = true;
  try {
    const body = REPORT ? {text: $('#tr-sentence').value} : translateBody();
    const answer = await getData('translate', body);
    state.translate = {...answer, request_text: body.text};
    renderTranslate();
  } catch (e) {
    showError('#tr-error', e);
  } finally { button.disabled = false; }
}

function renderTranslate() {
  const a = state.translate;
  $('#tr-result').hidden = !a;
  if (!a) return;
  $('#tr-output').textContent = a.text;
  $('#tr-output').dataset.generation = String((+$('#tr-output').dataset.generation || 0) + 1);
  $('#tr-meta').textContent = t('tr.meta', {arch: a.arch || '?', n: (a.tokens || []).length,
    seconds: isNum(a.seconds) ? a.seconds.toFixed(3) : '?'});
  const pieces = clear($('#tr-source-pieces'));
  for (const p of a.source_pieces || []) pieces.append(el('span', {class: 'piece', text: p}));
  const cards = clear($('#tr-tokens'));
  for (const tok of a.tokens || []) cards.append(tokenCard(tok));
  $('#tr-candidates-title').textContent = t((a.candidates || []).length > 1 ? 'tr.candidates' : 'tr.candidates_greedy');
  const body = clear($('#tr-candidates tbody'));
  (a.candidates || []).forEach((c, i) => body.append(el('tr', {class: i === 0 ? 'selected' : ''}, [
    el('td', {text: String(i + 1)}), el('td', {text: c.text}), el('td', {class: 'num', text: fmt(c.score)}),
    el('td', {class: 'num', text: fmt(c.log_prob)}), el('td', {class: 'num', text: String(c.length)})])));
}

function tokenCard(tok) {
  const rows = (tok.top || []).map((alt) => el('div', {class: 'alt' + (alt.id === tok.id ? ' chosen' : '')}, [
    el('span', {class: 'alt-piece', text: alt.piece}),
    el('span', {class: 'bar'}, [el('span', {class: 'bar-fill', style: `width:${Math.max(1, alt.prob * 100)}%`})]),
    el('span', {class: 'alt-prob', text: pct(alt.prob)})]));
  return el('div', {class: 'token-card'}, [
    el('div', {class: 'token-head'}, [el('span', {class: 'piece big', text: tok.piece}), el('span', {class: 'prob', text: pct(tok.prob)})]),
    ...rows]);
}

function updateModeOptions() {
  const mode = $('#tr-mode').value;
  for (const e of $$('.opt-beam')) e.hidden = mode !== 'beam';
  for (const e of $$('.opt-sample')) e.hidden = mode !== 'sample';
}

// ---- page 3: attention ---------------------------------------------------------------------

async function runAttention() {
  hideError('#at-error');
  const button = $('#at-go');
  button.disabled = true;
  try {
    const target = $('#at-target').value.trim();
    const body = REPORT ? {text: $('#at-sentence').value}
      : {...modelFields(), text: $('#at-text').value.trim(), ...(target ? {target} : {})};
    const answer = await getData('attention', body);
    state.attention = answer;
    const stacks = answer.stacks || [];
    const cross = stacks.findIndex((s) => s.kind === 'cross');
    state.at = {stack: cross >= 0 ? cross : 0, layer: 0, head: 0};
    renderAttention();
  } catch (e) {
    state.attention = null;  // an error replaces the old result, it does not sit above it
    $('#at-result').hidden = true;
    showError('#at-error', e);
  } finally { button.disabled = false; }
}

// A recurrent encoder-decoder (arch rnn) has one stack, its alignment α, sent as "cross".
function stackName(kind) {
  if (kind === 'cross' && state.attention && state.attention.arch === 'rnn') return t('stack.rnn_alignment');
  return t('stack.' + kind);
}

// Options 0..n-1 of a select (with an optional "mean of heads" first option -1).
function fillIndexSelect(sel, n, value, labelKey, withMean) {
  clear(sel);
  if (withMean) sel.append(el('option', {value: -1, text: t('at.mean_heads')}));
  for (let i = 0; i < n; i++) sel.append(el('option', {value: i, text: t(labelKey, {i: i + 1})}));
  sel.value = String(value);
}

// The weights [Tq][Tk] of one layer and head; head -1 = the mean over heads.
function headWeights(stack, layer, head) {
  const L = stack.weights[layer];
  if (head >= 0) return L[head];
  return L[0].map((row, i) => row.map((_, j) => L.reduce((s, h) => s + h[i][j], 0) / L.length));
}

function renderAttention() {
  const a = state.attention;
  $('#at-result').hidden = !a;
  if (!a) return;
  const stacks = a.stacks || [];
  $('#at-meta').textContent = (a.translation !== undefined ? t('at.translation', {text: a.translation}) : '') +
    (a.teacher_forced ? '  ' + t('at.teacher_forced') : '');
  const sel = clear($('#at-stack'));
  stacks.forEach((s, i) => sel.append(el('option', {value: i, text: stackName(s.kind)})));
  if (stacks.length === 0) return;
  sel.value = String(state.at.stack);
  const s = stacks[state.at.stack];
  fillIndexSelect($('#at-layer'), s.layers, state.at.layer, 'at.layer_n', false);
  fillIndexSelect($('#at-head'), s.heads, state.at.head, 'at.head_n', true);
  renderHeadView();
  renderModelView();
}

function renderHeadView() {
  const s = state.attention.stacks[state.at.stack];
  const w = headWeights(s, state.at.layer, state.at.head);
  clear($('#at-head-view')).append(headView(s, w));
  const status = $('#at-cell-status');
  clear($('#at-matrix')).append(heatmap(w, {masked: s.masked, rowLabels: s.queries, colLabels: s.keys, min: 0, max: 1,
    cell: cellSize(s.keys.length, 20, 420),
    onHover: (i, j) => { status.textContent = i === null ? '\u00a0' : cellText(s, w, i, j); }}),
  el('div', {class: 'legend'}, [colorBar(0, 1, blue, t('at.weight')), maskedKey()]));
}

function cellText(s, w, i, j) {
  if (s.masked && s.masked[i] && s.masked[i][j]) return t('at.cell_masked', {q: s.queries[i], k: s.keys[j]});
  return t('at.cell', {q: s.queries[i], k: s.keys[j], w: fmt(w[i][j], 3)});
}

function cellSize(n, max, room) { return Math.max(4, Math.min(max, Math.floor(room / Math.max(1, n)))); }

// bertviz's head view: queries on the left, keys on the right, a line per (query, key) whose
// opacity is the weight. Hovering a token keeps only its lines and shades the other side by
// weight (data-weight on each token says how much).
function headView(s, w) {
  const rowH = 20, Tq = s.queries.length, Tk = s.keys.length;
  const W = 380, xl = 150, xr = 230, H = Math.max(Tq, Tk) * rowH + 30;
  const root = svgEl('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'head-svg'});
  svgEl('text', {x: xl, y: 12, 'text-anchor': 'end', class: 'col-title'}, root).textContent = t('at.queries');
  svgEl('text', {x: xr, y: 12, class: 'col-title'}, root).textContent = t('at.keys');
  const y = (i) => 30 + i * rowH;
  const lines = [];
  const lineGroup = svgEl('g', {class: 'lines'}, root);
  for (let i = 0; i < Tq; i++) {
    lines.push([]);
    for (let j = 0; j < Tk; j++) {
      const blocked = s.masked && s.masked[i] && s.masked[i][j];
      lines[i].push(blocked ? null : svgEl('line', {x1: xl + 4, y1: y(i) - 4, x2: xr - 4, y2: y(j) - 4,
        'stroke-opacity': w[i][j].toFixed(3), class: 'att-line'}, lineGroup));
    }
  }
  const qs = s.queries.map((q, i) => headToken(root, q, xl, y(i), 'end', 'q', i));
  const ks = s.keys.map((k, j) => headToken(root, k, xr, y(j), 'start', 'k', j));
  const view = {s, w, lines, qs, ks};
  qs.forEach((g, i) => g.addEventListener('mouseenter', () => highlight(view, 'q', i)));
  ks.forEach((g, j) => g.addEventListener('mouseenter', () => highlight(view, 'k', j)));
  root.addEventListener('mouseleave', () => highlight(view, null, -1));
  return root;
}

function headToken(root, label, x, y, anchor, side, index) {
  const g = svgEl('g', {class: 'tok tok-' + side, 'data-index': index, 'data-weight': ''}, root);
  const width = 140;
  svgEl('rect', {x: anchor === 'end' ? x - width : x, y: y - 15, width, height: 18, rx: 3, class: 'tok-bg', 'fill-opacity': 0}, g);
  svgEl('text', {x: anchor === 'end' ? x - 4 : x + 4, y: y - 1, 'text-anchor': anchor}, g).textContent = clip(label, 20);
  svgEl('title', {}, g).textContent = label;
  return g;
}

// side 'q' i: query i's weights over the keys; side 'k' j: what attends to key j; null: all.
function highlight(view, side, index) {
  const {w, lines, qs, ks} = view;
  for (let i = 0; i < lines.length; i++) {
    for (let j = 0; j < lines[i].length; j++) {
      const line = lines[i][j];
      if (!line) continue;
      const on = side === null || (side === 'q' ? i === index : j === index);
      line.setAttribute('stroke-opacity', on ? w[i][j].toFixed(3) : '0');
      line.classList.toggle('hot', side !== null && on);
    }
  }
  const shade = (g, v, active) => {
    g.setAttribute('data-weight', v === null ? '' : v.toFixed(4));
    g.querySelector('rect').setAttribute('fill-opacity', v === null ? 0 : Math.min(0.9, v * 0.9 + 0.05).toFixed(3));
    g.classList.toggle('active', active);
  };
  qs.forEach((g, i) => shade(g, side === 'k' ? w[i][index] : null, side === 'q' && i === index));
  ks.forEach((g, j) => shade(g, side === 'q' ? w[index][j] : null, side === 'k' && j === index));
}

// bertviz's model view: every stack, layers as rows, heads as columns; a click opens the head.
function renderModelView() {
  const box = clear($('#at-model-view'));
  state.attention.stacks.forEach((s, si) => {
    const grid = el('div', {class: 'model-grid', 'data-stack': s.kind, style: `grid-template-columns: 56px repeat(${s.heads}, auto)`});
    grid.append(el('span'));
    for (let h = 0; h < s.heads; h++) grid.append(el('span', {class: 'grid-head', text: t('at.head_n', {i: h + 1})}));
    for (let l = 0; l < s.layers; l++) {
      grid.append(el('span', {class: 'grid-head', text: t('at.layer_n', {i: l + 1})}));
      for (let h = 0; h < s.heads; h++) grid.append(thumbnail(s, si, l, h));
    }
    box.append(el('h4', {text: stackName(s.kind) + (s.causal ? ' · ' + t('at.causal') : '')}), grid);
  });
  box.append(el('div', {class: 'legend'}, [maskedKey()]));
}

function thumbnail(s, si, l, h) {
  const n = Math.max(s.queries.length, s.keys.length);
  const cell = Math.max(1, Math.min(8, Math.floor(84 / Math.max(1, n))));
  const canvas = heatmap(s.weights[l][h], {masked: s.masked, cell, min: 0, max: 1});
  const on = si === state.at.stack && l === state.at.layer && h === state.at.head;
  const b = el('button', {type: 'button', class: 'thumb' + (on ? ' on' : ''), 'data-layer': l, 'data-head': h,
    title: `${stackName(s.kind)} · ${t('at.layer_n', {i: l + 1})} · ${t('at.head_n', {i: h + 1})}`,
    onclick: () => { state.at = {stack: si, layer: l, head: h}; renderAttention(); }}, [canvas]);
  return b;
}

// ---- page 3b: attention beside attribution (POST /api/attribution) --------------------------

async function runAttribution() {
  hideError('#ab-error');
  $('#ab-go').disabled = true;
  $('#ab-status').textContent = t('ab.running');
  try {
    const target = $('#at-target').value.trim();
    state.attribution = await getData('attribution', REPORT ? {text: $('#at-sentence').value}
      : {...modelFields(), text: $('#at-text').value.trim(), ...(target ? {target} : {})});
  } catch (e) {
    state.attribution = null;  // an error replaces the old result, it does not sit above it
    showError('#ab-error', e);
  } finally { $('#ab-go').disabled = false; $('#ab-status').textContent = ''; }
  renderAttribution();
}

// The choices: the four methods, then every cross-attention head.
function attributionChoices(a) {
  return [...a.methods.map((m) => ({key: m.key, label: t('ab.m.' + m.key), values: m.values, signed: m.key === 'gradient_input' || m.key === 'integrated'})),
    ...a.heads.map((h, i) => ({key: 'head' + i, label: t('ab.m.head', {l: h.layer + 1, h: h.head + 1}), values: h.weights, signed: false}))];
}

function renderAttribution() {
  const a = state.attribution;
  $('#ab-result').hidden = !a;
  $('#ab-method-label').hidden = !a;  // nothing to choose before the first answer
  if (!a) return;
  const choices = attributionChoices(a);
  const sel = $('#ab-method'), keep = sel.value;
  clear(sel);
  for (const c of choices) sel.append(el('option', {value: c.key, text: c.label}));
  sel.value = choices.some((c) => c.key === keep) ? keep : 'integrated';
  const c = choices.find((x) => x.key === sel.value);
  const rows = a.target, cols = a.source, values = c.values.slice(0, rows.length);
  const finite = values.flat().filter(isNum), lim = Math.max(...finite.map(Math.abs), 1e-12);
  const color = c.signed ? (v) => diverging((v / lim + 1) / 2) : (v) => blue(v / (Math.max(...finite) || 1));
  const cell = cellSize(Math.max(cols.length, rows.length), 32, 560);
  const status = $('#ab-cell-status');
  clear($('#ab-view')).append(heatmap(values, {rowLabels: rows, colLabels: cols, cell, color, printValues: cell >= 28,
    onHover: (i, j) => { status.textContent = i === null ? '\u00a0' : t('ab.cell', {row: rows[i], col: cols[j], v: fmt(values[i][j])}); }}),
  c.signed ? colorBar(-lim, lim, color) : colorBar(0, Math.max(...finite), color));
  const mean = (xs) => xs.reduce((s, x) => s + x, 0) / Math.max(1, xs.length);
  clear($('#ab-ablation')).append(figureBars({labels: a.heads.map((h) => `L${h.layer + 1} H${h.head + 1}`),
    series: [{name: t('ab.drop'), values: a.heads.map((h) => mean(h.drop))}], log: false}));
}

// ---- page 4: inside one step ----------------------------------------------------------------

function stepBody(side) {
  const fs = $(`#st-form fieldset[data-side="${side}"]`);
  const set = $('.st-set', fs).value.split('\n').map((x) => x.trim()).filter(Boolean);
  const source = $('.st-source', fs).value;
  const base = source === 'run' ? {run: modelFields().run} : {config: $('.st-config', fs).value.trim()};
  return {...base, set, batch: intValue('#st-batch'), seed: intValue('#st-seed'), detail_values: intValue('#st-values')};
}

async function runStep() {
  hideError('#st-error');
  const button = $('#st-go');
  button.disabled = true;
  try {
    const A = await getData('step', stepBody('A'));
    const B = await getData('step', stepBody('B'));
    state.step = {A, B};
    state.openRow = null;
    renderStep();
  } catch (e) {
    showError('#st-error', e);
  } finally { button.disabled = false; }
}

function renderStep() {
  $('#st-result').hidden = !state.step;
  if (!state.step) return;
  const sums = clear($('#st-summaries'));
  for (const side of ['A', 'B']) sums.append(stepSummary(side, state.step[side]));
  renderDepthCharts();
  renderTree();
}

function stepSummary(side, a) {
  const b = a.batch || {};
  const overrides = stepBodySafe(side);
  return el('div', {class: 'card summary'}, [
    el('h3', {}, [el('span', {class: 'swatch', style: `background:${sideColor(side)}`}), `${side}: ${overrides}`]),
    el('p', {class: 'big-number', text: t('st.loss', {loss: fmt(a.loss)})}),
    el('p', {class: 'meta', text: t('st.batch_info', {rows: b.rows, src: b.src_len, tgt: b.tgt_len, tokens: b.tokens})}),
    el('details', {}, [el('summary', {text: t('st.config_text')}), el('pre', {class: 'config', text: a.config || ''})])]);
}

function stepBodySafe(side) {
  const fs = $(`#st-form fieldset[data-side="${side}"]`);
  const set = $('.st-set', fs).value.split('\n').map((x) => x.trim()).filter(Boolean);
  const what = $('.st-source', fs).value === 'run' ? (state.model ? state.model.run : '') : $('.st-config', fs).value;
  return [what, ...set].join('  ');
}

function sideColor(side) { return side === 'A' ? PALETTE[0] : PALETTE[1]; }

function rms(stats) {
  if (!stats || !isNum(stats.mean) || !isNum(stats.std)) return null;
  return Math.sqrt(stats.mean * stats.mean + stats.std * stats.std);
}

const LAYER_PATH = /(^|\.)layers\.\d+$/;

function layerLabel(path) {
  const parts = path.split('.');
  const n = parts[parts.length - 1];
  return parts.length > 2 ? parts[0].slice(0, 3) + ' ' + n : n;
}

// Gradient RMS of each layer's output (dL/d output, forward order) and of each parameter.
function renderDepthCharts() {
  const box = clear($('#st-depth'));
  const charts = [
    {key: 'depth-layers', title: t('st.depth_layers'), pick: (a) => (a.gradients || []).filter((g) => LAYER_PATH.test(g.path)), label: layerLabel},
    {key: 'depth-modules', title: t('st.depth_modules'), pick: (a) => a.gradients || [], label: (p) => p},
    {key: 'depth-params', title: t('st.depth_params'), pick: (a) => a.parameters || [], label: (p) => p},
  ];
  for (const c of charts) {
    const order = depthOrder(c.pick, c.key === 'depth-params');
    if (order.length === 0) continue;
    const series = ['A', 'B'].map((side) => {
      const by = new Map(c.pick(state.step[side]).map((g) => [g.path, rms(g.stats)]));
      return {label: side, color: sideColor(side), markers: true, points: order.map((p, i) => [i, by.has(p) ? by.get(p) : null])};
    });
    box.append(lineChart({key: c.key, title: c.title, series, logY: true, xLabels: order.map(c.label), width: 460, height: 240}));
  }
  clear($('#st-depth-legend')).append(legend([{label: 'A', color: sideColor('A')}, {label: 'B', color: sideColor('B')}]));
}

// Paths in forward order (modules' order; parameters as listed), A's first, then B's extra ones.
function depthOrder(pick, asListed) {
  const seen = new Set(), order = [];
  for (const side of ['A', 'B']) {
    const a = state.step[side];
    const paths = new Set(pick(a).map((g) => g.path));
    const ordered = asListed ? [...paths] : (a.modules || []).map((m) => m.path).filter((p) => paths.has(p));
    for (const p of ordered) if (!seen.has(p)) { seen.add(p); order.push(p); }
  }
  return order;
}

function showPollTime() {
  if (!state.lastPoll) return;
  $('#runs-poll-status').textContent = t('runs.polled', {time: state.lastPoll.toLocaleTimeString(lang() === 'zh' ? 'zh-CN' : 'en-GB')});
}

// The trace lists a module when its forward ends, so a child comes before its parent: put every
// parent first and its children after it, in the order they ran.
function treeOrder(rows) {
  const byPath = new Set(rows.map((r) => r.path));
  const kids = new Map(), roots = [];
  for (const r of rows) {
    let up = r.path, parent = null;
    while (parent === null && up.lastIndexOf('.') > 0) {
      up = up.slice(0, up.lastIndexOf('.'));
      if (byPath.has(up)) parent = up;
    }
    if (parent === null) roots.push(r); else { if (!kids.has(parent)) kids.set(parent, []); kids.get(parent).push(r); }
  }
  roots.sort((a, b) => (b.path === '(model)') - (a.path === '(model)'));  // the whole model first
  const out = [];
  const visit = (r) => { out.push(r); for (const k of kids.get(r.path) || []) visit(k); };
  roots.forEach(visit);
  return out;
}

function renderTree() {
  for (const b of $$('#st-tree-side button')) b.classList.toggle('on', b.dataset.side === state.stepSide);
  const a = state.step[state.stepSide];
  const showParams = $('#st-show-params').checked;
  // parameters by their full path ("encoder.layers.0.self_attn.q_proj.weight"): no module rows around them
  const rows = showParams ? (a.parameters || []).map((p) => ({path: p.path, type: t('st.parameter'), depth: 0, full: true, grad: p}))
    : treeOrder((a.modules || []).map((m) => ({...m, grad: gradientOf(a, m.path), out: m})));
  const table = el('table', {class: 'table tree'});
  table.append(el('thead', {}, [el('tr', {}, [el('th', {text: t('st.col.module')}), el('th', {text: t('st.col.shape')}),
    ...(showParams ? [] : statHeads(t('st.col.output'))), ...statHeads(t('st.col.gradient'))])]));
  const body = el('tbody');
  rows.forEach((r, i) => { if (!isFolded(r.path)) body.append(...treeRows(r, i, rows, showParams)); });
  table.append(body);
  clear($('#st-tree')).append(table);
}

function statHeads(what) {
  return [el('th', {class: 'group', text: what + ' ' + t('st.col.mean')}), el('th', {text: t('st.col.std')}),
    el('th', {text: t('st.col.min')}), el('th', {text: t('st.col.max')}), el('th', {text: t('st.col.hist')})];
}

function gradientOf(a, path) { return (a.gradients || []).find((g) => g.path === path) || null; }

function isFolded(path) {
  for (const c of state.collapsed) if (path.startsWith(c + '.')) return true;
  return false;
}

function treeRows(r, i, rows, showParams) {
  const hasKids = !showParams && rows.some((x) => x.path.startsWith(r.path + '.'));
  const fold = hasKids ? el('button', {type: 'button', class: 'fold', text: state.collapsed.has(r.path) ? '▸' : '▾',
    onclick: (ev) => { ev.stopPropagation(); toggleFold(r.path); }}) : el('span', {class: 'fold'});
  const name = r.full || r.path === '(model)' || r.depth === 0 ? r.path : shortName(r.path);
  const cells = [el('td', {style: `padding-left:${6 + 14 * (r.depth || 0)}px`}, [fold, el('span', {class: 'mod-name', text: name, title: r.path}),
    el('span', {class: 'mod-type', text: ' ' + (r.type || '')})]), el('td', {class: 'num', text: shapeText((r.out || r.grad || {}).shape)})];
  if (!showParams) cells.push(...statCells(r.out));
  cells.push(...statCells(r.grad));
  const tr = el('tr', {class: 'tree-row' + (state.openRow === i ? ' selected' : ''), 'data-path': r.path,
    onclick: () => { state.openRow = state.openRow === i ? null : i; renderTree(); }}, cells);
  if (state.openRow !== i) return [tr];
  return [tr, el('tr', {class: 'details'}, [el('td', {colspan: cells.length}, [moduleDetails(r, showParams)])])];
}

// "encoder.layers.0" -> "layers.0", "encoder.layers.0.self_attn" -> "self_attn".
function shortName(path) {
  const parts = path.split('.');
  const last = parts[parts.length - 1];
  return /^\d+$/.test(last) && parts.length > 1 ? parts[parts.length - 2] + '.' + last : last;
}

function toggleFold(path) {
  if (state.collapsed.has(path)) state.collapsed.delete(path); else state.collapsed.add(path);
  renderTree();
}

function shapeText(shape) { return shape ? '(' + shape.join(', ') + ')' : '–'; }

function statCells(entry) {
  if (!entry || !entry.stats) return [el('td', {class: 'num', text: '–'}), el('td'), el('td'), el('td'), el('td')];
  const s = entry.stats, bad = (s.nan || 0) + (s.inf || 0);
  return [el('td', {class: 'num' + (bad ? ' bad' : ''), text: fmt(s.mean) + (bad ? ` (${s.nan || 0} NaN, ${s.inf || 0} Inf)` : '')}),
    el('td', {class: 'num', text: fmt(s.std)}), el('td', {class: 'num', text: fmt(s.min)}), el('td', {class: 'num', text: fmt(s.max)}),
    el('td', {}, [histogram(entry.histogram, 64, 18, false)])];
}

// A 20-bin histogram {min, max, counts} as SVG bars; big: with axis labels.
function histogram(h, W, H, big) {
  const root = svgEl('svg', {width: W, height: H + (big ? 16 : 0), class: 'hist'});
  if (!h || !h.counts || h.counts.length === 0) return root;
  const top = Math.max(...h.counts, 1), bw = W / h.counts.length;
  h.counts.forEach((c, i) => {
    const bh = c > 0 ? Math.max(1, (c / top) * (H - 2)) : 0;
    svgEl('rect', {x: i * bw + 0.5, y: H - bh, width: Math.max(1, bw - 1), height: bh, class: 'hist-bar'}, root);
    if (big) svgEl('title', {}, root.lastChild).textContent = String(c);
  });
  if (big) {
    svgEl('text', {x: 0, y: H + 13, class: 'tick'}, root).textContent = fmt(h.min);
    svgEl('text', {x: W, y: H + 13, 'text-anchor': 'end', class: 'tick'}, root).textContent = fmt(h.max);
  }
  return root;
}

function moduleDetails(r, showParams) {
  const parts = [];
  if (!showParams && r.out) parts.push(detailBlock(t('st.col.output'), r.out));
  if (r.grad) parts.push(detailBlock(t('st.col.gradient'), r.grad));
  if (parts.length === 0) parts.push(el('p', {class: 'empty', text: t('st.no_detail')}));
  return el('div', {class: 'detail-blocks'}, parts);
}

function detailBlock(title, entry) {
  const values = entry.values || [];
  const table = el('table', {class: 'values'}, values.map((row) =>
    el('tr', {}, (Array.isArray(row) ? row : [row]).map((v) => el('td', {class: 'num', text: fmt(v)})))));
  return el('div', {class: 'detail'}, [el('h4', {text: `${title}: ${entry.path} ${shapeText(entry.shape)}`}),
    histogram(entry.histogram, 280, 90, true), el('p', {class: 'hint small', text: t('st.first_values')}), table]);
}

// ---- page 5: over training ------------------------------------------------------------------

async function loadSnapshots() {
  const run = $('#ot-run').value;
  hideError('#ot-error');
  if (!run) { renderSnapshots(); return; }
  try {
    const answer = await getData('snapshots', {run});
    state.snapshots = answer.snapshots || [];
    state.snapshotsRun = run;
    const first = state.snapshots[0];
    const cross = first ? (first.stacks || []).findIndex((s) => s.kind === 'cross') : -1;
    state.ot = {index: Math.max(0, state.snapshots.length - 1), stack: Math.max(0, cross), layer: 0, head: -1};
  } catch (e) { state.snapshots = null; showError('#ot-error', e); }
  renderSnapshots();
  try { await fetchNorms(run); } catch (e) { showError('#ot-error', e); }
  renderNorms('#ot-norms', run);
}

function renderSnapshots() {
  const snaps = state.snapshots || [];
  $('#ot-empty').hidden = snaps.length > 0;
  $('#ot-empty').textContent = t('ot.none', {run: state.snapshotsRun || ''});
  $('#ot-view').hidden = snaps.length === 0;
  for (const e of $$('.ot-snap-control')) e.hidden = snaps.length === 0;
  if (snaps.length === 0) return;
  const slider = $('#ot-slider');
  slider.max = String(snaps.length - 1);
  slider.value = String(state.ot.index);
  const snap = snaps[state.ot.index];
  const stacks = snap.stacks || [];
  const sel = clear($('#ot-stack'));
  stacks.forEach((s, i) => sel.append(el('option', {value: i, text: stackName(s.kind)})));
  if (stacks.length === 0) return;
  state.ot.stack = Math.min(state.ot.stack, stacks.length - 1);
  sel.value = String(state.ot.stack);
  const s = stacks[state.ot.stack];
  state.ot.layer = Math.min(state.ot.layer, s.layers - 1);
  fillIndexSelect($('#ot-layer'), s.layers, state.ot.layer, 'at.layer_n', false);
  fillIndexSelect($('#ot-head'), s.heads, Math.min(state.ot.head, s.heads - 1), 'at.head_n', true);
  $('#ot-step-label').textContent = t('ot.step', {step: snap.step, i: state.ot.index + 1, n: snaps.length});
  $('#ot-meta').textContent = snap.translation !== undefined ? t('at.translation', {text: snap.translation}) : '';
  const w = headWeights(s, state.ot.layer, state.ot.head);
  const status = $('#ot-cell-status');
  clear($('#ot-matrix')).append(heatmap(w, {masked: s.masked, rowLabels: s.queries, colLabels: s.keys, min: 0, max: 1,
    cell: cellSize(s.keys.length, 26, 560), onHover: (i, j) => { status.textContent = i === null ? '\u00a0' : cellText(s, w, i, j); }}),
  el('div', {class: 'legend'}, [colorBar(0, 1, blue, t('at.weight')), maskedKey()]));
}

let playTimer = null;
function togglePlay() {
  if (playTimer) { clearInterval(playTimer); playTimer = null; $('#ot-play').textContent = t('ot.play'); return; }
  const n = (state.snapshots || []).length;
  if (n === 0) return;
  if (state.ot.index >= n - 1) state.ot.index = -1;
  $('#ot-play').textContent = t('ot.pause');
  playTimer = setInterval(() => {
    if (state.ot.index >= n - 1) { togglePlay(); return; }
    state.ot.index++;
    renderSnapshots();
  }, 700);
}

// ---- page 6: lessons (the lecture's demos, train/lessons) -----------------------------------
// GET /api/demos lists them in course order; POST /api/demo {name} returns a demo's report:
// {claim, explain, held, numbers, figures, steps} (train/lessons/demo_report.h). Each figure kind
// has one drawing function below; a report with "steps" shows one figure at a time.

// A text of a report: a string as it is, {en, zh} in the page's language.
function tx(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'object' && !Array.isArray(v)) return v[lang()] || v.en || '';
  return String(v);
}

async function loadDemoList() {
  hideError('#ls-error');
  try { state.demos = (await getData('demos')).demos; } catch (e) { showError('#ls-error', e); return; }
  renderDemoList();
  // open the first quick demo (the slow ones train a model first: a click of the teacher's choice)
  const first = state.demos.find((d) => d.seconds <= 1);
  if (!state.demo && first) openDemo(first.name);
}

function renderDemoList() {
  const box = clear($('#ls-list'));
  for (const d of state.demos || []) {
    box.append(el('button', {type: 'button', class: 'demo-chip' + (state.demo && state.demo.name === d.name ? ' on' : ''),
      'data-demo': d.name, title: tx(d.claim), onclick: () => openDemo(d.name)},
    [el('b', {text: d.name}), d.seconds > 1 ? el('span', {class: 'small', text: ' ' + t('ls.seconds', {s: d.seconds})}) : null]));
  }
}

async function openDemo(name, text) {
  hideError('#ls-error');
  const entry = (state.demos || []).find((d) => d.name === name) || {name, seconds: 1};
  state.demo = {name, report: null, step: 0};
  renderDemoList();
  const running = $('#ls-running');
  running.textContent = t('ls.running', {name, s: entry.seconds});
  running.hidden = false;
  try {
    const body = {name};
    if (text) body.text = text;
    const report = await getData('demo', body);
    if (state.demo && state.demo.name === name) state.demo.report = report;
  } catch (e) {
    state.demo = null;
    showError('#ls-error', e);
  }
  running.hidden = true;
  renderDemo();
}

function renderDemo() {
  const r = state.demo && state.demo.report;
  $('#ls-result').hidden = !r;
  if (!r) return;
  $('#ls-title').textContent = r.name;
  $('#ls-claim').textContent = tx(r.claim);
  const verdict = $('#ls-verdict');
  verdict.textContent = t(r.held ? 'ls.holds' : 'ls.fails');
  verdict.className = 'verdict ' + (r.held ? 'ok' : 'bad');
  $('#ls-explain').textContent = tx(r.explain);
  $('#ls-text-form').hidden = r.name !== 'worked-example';
  const numbers = clear($('#ls-numbers'));
  if ((r.numbers || []).length) {
    numbers.append(el('table', {class: 'table kv'}, r.numbers.map((n) => el('tr', {}, [el('th', {text: tx(n.label)}),
      el('td', {text: typeof n.value === 'number' ? fmt(n.value) : tx(n.value)})]))));
  }
  const figures = r.figures || [];
  const stepping = !!r.steps && figures.length > 1;
  $('#ls-steps').hidden = !stepping;
  const view = clear($('#ls-view'));
  if (stepping) {
    const i = Math.min(Math.max(0, state.demo.step), figures.length - 1);
    $('#ls-step-label').textContent = t('ls.step', {i: i + 1, n: figures.length});
    $('#ls-prev').disabled = i === 0;
    $('#ls-next').disabled = i === figures.length - 1;
    view.append(demoFigure(figures[i], i));
  } else {
    view.append(el('div', {class: 'figure-grid'}, figures.map((f, i) => demoFigure(f, i))));
  }
}

function stepDemo(delta) {
  if (!state.demo || !state.demo.report) return;
  const n = state.demo.report.figures.length;
  state.demo.step = Math.min(Math.max(0, state.demo.step + delta), n - 1);
  renderDemo();
}

function demoFigure(f, i) {
  const draw = {lines: figureLines, heatmap: figureHeatmap, bars: figureBars, table: figureTable, rotation: figureRotation}[f.kind];
  const body = draw ? draw(f, i) : el('p', {class: 'error', text: t('ls.unknown_figure', {kind: f.kind})});
  return el('figure', {class: 'demo-figure', 'data-kind': f.kind}, [el('figcaption', {text: tx(f.title)}), body]);
}

function figureLines(f, i) {
  const series = f.series.map((s, k) => ({label: tx(s.name), color: PALETTE[k % PALETTE.length], points: s.points,
    dash: s.dashed ? '5 3' : null, markers: s.points.length <= 16}));
  return el('div', {}, [
    lineChart({key: 'demo-' + i, title: '', xLabel: tx(f.x_label), yLabel: tx(f.y_label), logX: f.x_log, logY: f.y_log,
      width: 620, height: 320, series, marks: (f.marks || []).map((m) => ({x: m.x, label: tx(m.label)}))}),
    legend(series.map((s) => ({label: s.label, color: s.color, dash: s.dash})))]);
}

function figureHeatmap(f) {
  if (f.cells) return tokenGrid(f);
  const values = f.values, R = values.length, C = R ? values[0].length : 0;
  const finite = values.flat().filter(isNum);
  const lim = Math.max(...finite.map(Math.abs), 1e-12), lo = Math.min(...finite), hi = Math.max(...finite);
  const color = f.signed ? (v) => diverging((v / lim + 1) / 2) : (v) => blue((v - lo) / (hi - lo || 1));
  const rows = f.rows.map(tx), cols = f.cols.map(tx);
  const status = el('p', {class: 'status', text: '\u00a0'});
  const cell = C <= 8 ? 44 : cellSize(Math.max(C, R / 2), 30, 1100);
  const map = heatmap(values, {masked: f.masked, rowLabels: rows, colLabels: C <= 80 ? cols : undefined, cell, color,
    printValues: cell >= 28, onHover: (r, c) => {
      if (r === null) { status.textContent = '\u00a0'; return; }
      const token = f.cells && f.cells[r] ? ' (' + f.cells[r][c] + ')' : '';
      status.textContent = t('ls.cell', {row: rows[r], col: cols[c] + token, v: fmt(values[r][c])});
    }});
  return el('div', {}, [el('div', {class: 'scroll-x'}, [map]),
    f.signed ? colorBar(-lim, lim, color) : colorBar(lo, hi, color), f.masked ? el('div', {class: 'legend'}, [maskedKey()]) : null, status]);
}

// A mask over tokens (a heatmap with "cells"): each row's tokens in a table, a masked cell hatched.
function tokenGrid(f) {
  return el('div', {class: 'scroll-x'}, [el('table', {class: 'table token-grid'}, [
    el('tr', {}, [el('th'), ...f.cols.map((c) => el('th', {text: tx(c)}))]),
    ...f.cells.map((row, r) => el('tr', {}, [el('th', {text: tx(f.rows[r])}),
      ...row.map((token, c) => el('td', {class: f.masked && f.masked[r][c] ? 'masked-cell' : '', text: token}))]))]),
  el('div', {class: 'legend'}, [maskedKey()])]);
}

// Horizontal bars, one row per label and one bar per series; on a log scale the bar's length is
// log10(value) above a floor a decade below the smallest positive value.
function figureBars(f) {
  const W = 620, labW = 170, rowH = 16 * Math.max(1, f.series.length) + 8, H = 20 + rowH * f.labels.length;
  const root = svgEl('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart-svg'});
  const all = f.series.flatMap((s) => s.values).filter(isNum);
  const positive = all.filter((v) => v > 0);
  const floor = f.log ? Math.pow(10, Math.floor(Math.log10(Math.min(...positive, 1))) - 1) : 0;
  const top = Math.max(...all, floor * 10);
  const span = W - labW - 70;
  const len = f.log ? (v) => (v <= floor ? 0 : span * (Math.log10(v) - Math.log10(floor)) / (Math.log10(top) - Math.log10(floor)))
    : (v) => span * Math.max(0, v) / (top || 1);
  f.labels.forEach((label, r) => {
    const y0 = 14 + r * rowH;
    svgEl('text', {x: labW - 6, y: y0 + rowH / 2, 'text-anchor': 'end', class: 'tick'}, root).textContent = clip(tx(label), 28);
    f.series.forEach((s, k) => {
      const v = s.values[r], y = y0 + k * 16;
      svgEl('rect', {x: labW, y, width: Math.max(0.5, len(v)), height: 12, fill: PALETTE[k % PALETTE.length]}, root);
      svgEl('text', {x: labW + len(v) + 4, y: y + 10, class: 'tick'}, root).textContent = fmt(v);
    });
  });
  if (f.log) svgEl('text', {x: W - 4, y: 10, 'text-anchor': 'end', class: 'axis-label'}, root).textContent = 'log10';
  return el('div', {}, [root, f.series.length > 1 ? legend(f.series.map((s, k) => ({label: tx(s.name), color: PALETTE[k % PALETTE.length]}))) : null]);
}

function figureTable(f) {
  const cell = (v) => (typeof v === 'number' ? fmt(v) : typeof v === 'boolean' ? String(v) : tx(v));
  return el('div', {class: 'scroll-x'}, [el('table', {class: 'table'}, [el('tr', {}, f.columns.map((c) => el('th', {text: tx(c)}))),
    ...f.rows.map((row) => el('tr', {}, row.map((v) => el('td', {text: cell(v)}))))])]);
}

// RoPE's rotating pairs: one unit circle per pair k with the arrow at angle p theta_k; a slider
// (and a play button) moves p. Fast pairs spin, slow pairs barely move.
function figureRotation(f) {
  const ks = [...new Set([0, 1, 2, 4, 8, 12, 16, f.thetas.length - 1])].filter((k) => k < f.thetas.length);
  const R = 46, W = ks.length * (2 * R + 24), H = 2 * R + 60;
  const root = svgEl('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'chart-svg rotation'});
  const arrows = ks.map((k, n) => {
    const cx = R + 12 + n * (2 * R + 24), cy = R + 12;
    svgEl('circle', {cx, cy, r: R, fill: 'none', stroke: '#bbb'}, root);
    svgEl('line', {x1: cx - R, x2: cx + R, y1: cy, y2: cy, stroke: '#eee'}, root);
    const line = svgEl('line', {x1: cx, y1: cy, x2: cx + R, y2: cy, stroke: PALETTE[n % PALETTE.length], 'stroke-width': 3}, root);
    const label = svgEl('text', {x: cx, y: cy + R + 18, 'text-anchor': 'middle', class: 'tick'}, root);
    label.textContent = 'k = ' + k;
    svgEl('title', {}, label).textContent = t('ls.pair', {k, theta: fmt(f.thetas[k]), period: fmt(2 * Math.PI / f.thetas[k])});
    return {k, cx, cy, line};
  });
  const slider = el('input', {type: 'range', min: 0, max: f.positions, value: 0, class: 'wide'});
  const readout = el('span', {class: 'status'});
  const draw = () => {
    const p = +slider.value;
    readout.textContent = t('ls.position') + ' = ' + p;
    for (const a of arrows) {
      const angle = p * f.thetas[a.k];
      a.line.setAttribute('x2', a.cx + R * Math.cos(angle));
      a.line.setAttribute('y2', a.cy - R * Math.sin(angle));
    }
  };
  slider.addEventListener('input', draw);
  let timer = null;
  const play = el('button', {type: 'button', text: t('ls.play')});
  play.addEventListener('click', () => {
    if (timer) { clearInterval(timer); timer = null; play.textContent = t('ls.play'); return; }
    play.textContent = t('ls.pause');
    timer = setInterval(() => {
      if (!document.body.contains(slider)) { clearInterval(timer); timer = null; return; }
      slider.value = (+slider.value + 1) % (f.positions + 1);
      draw();
    }, 120);
  });
  draw();
  return el('div', {}, [root, el('div', {class: 'row'}, [play, slider, readout]),
    el('p', {class: 'hint small', text: ks.map((k) => t('ls.pair', {k, theta: fmt(f.thetas[k], 3), period: fmt(2 * Math.PI / f.thetas[k], 3)})).join(' · ')})]);
}

// ---- the guided tour: a few steps per page, for a student alone at home ------------------------
// Each step points at one element of the page (outlined) with a short text beside it.

const TOURS = {
  runs: ['#runs-table', '#runs-charts', '#runs-norms'],
  translate: ['#tr-text', '#tr-mode', '#tr-tokens'],
  attention: ['#at-form', '#at-head-view', '#at-model-view', '#ab-card'],
  step: ['#st-form', '#st-depth', '#st-tree'],
  training: ['#ot-view', '#ot-norms'],
  lessons: ['#ls-list', '#ls-verdict', '#ls-view'],
};

const tour = {page: null, index: 0};

function startTour() {
  tour.page = state.tab;
  tour.index = 0;
  showTourStep();
}

function showTourStep() {
  for (const e of $$('.tour-focus')) e.classList.remove('tour-focus');
  const steps = TOURS[tour.page] || [];
  const box = $('#tour');
  if (tour.index < 0 || tour.index >= steps.length) { box.hidden = true; tour.page = null; return; }
  const target = $(steps[tour.index]);
  $('#tour-count').textContent = t('tour.count', {i: tour.index + 1, n: steps.length});
  $('#tour-text').textContent = t(`tour.${tour.page}.${tour.index + 1}`);
  $('#tour-back').disabled = tour.index === 0;
  $('#tour-next').textContent = t(tour.index === steps.length - 1 ? 'tour.done' : 'tour.next');
  box.hidden = false;
  // an element not drawn yet (no result so far) is pointed at through its page
  const shown = target && target.offsetParent !== null ? target : $(`#page-${tour.page}`);
  shown.classList.add('tour-focus');
  shown.scrollIntoView({block: 'center', behavior: 'instant'});
  const r = shown.getBoundingClientRect();
  box.style.top = Math.min(window.innerHeight - box.offsetHeight - 12, Math.max(12, r.bottom + 10)) + 'px';
  box.style.left = Math.min(window.innerWidth - box.offsetWidth - 12, Math.max(12, r.left)) + 'px';
}

function moveTour(delta) {
  tour.index += delta;
  showTourStep();
}

function wireTour() {
  $('#tour-start').addEventListener('click', startTour);
  $('#tour-next').addEventListener('click', () => moveTour(1));
  $('#tour-back').addEventListener('click', () => moveTour(-1));
  $('#tour-close').addEventListener('click', () => { tour.index = -1; showTourStep(); });
  document.addEventListener('keydown', (e) => { if (e.key === 'Escape' && tour.page) { tour.index = -1; showTourStep(); } });
}

// ---- tabs, language, start-up ---------------------------------------------------------------

const ON_FIRST_SHOW = {
  translate: () => { if (REPORT || state.model) runTranslate(); },
  attention: () => { if (REPORT || state.model) runAttention(); },
  training: () => loadSnapshots(),
  lessons: () => loadDemoList(),
};

function showTab(name) {
  if (tour.page && tour.page !== name) { tour.index = -1; showTourStep(); }  // a tour belongs to its page
  const tab = $(`#tabs button[data-tab="${name}"]`);
  if (!tab || (REPORT && tab.classList.contains('live-only'))) name = 'runs';
  state.tab = name;
  for (const b of $$('#tabs button')) { b.classList.toggle('on', b.dataset.tab === name); b.setAttribute('aria-selected', b.dataset.tab === name); }
  for (const p of $$('.page')) p.hidden = p.dataset.page !== name;
  if (location.hash !== '#' + name) history.replaceState(null, '', '#' + name);
  if (!state.shownTabs.has(name)) {
    state.shownTabs.add(name);
    if (ON_FIRST_SHOW[name]) ON_FIRST_SHOW[name]();
  }
}

// After a language switch: every label of index.html and every view drawn so far.
function rerender() {
  applyI18n(document);
  renderRunsTable();
  renderCharts();
  renderNorms('#runs-norms', $('#runs-norms-run').value);
  if (state.translate) renderTranslate();
  if (state.attention) renderAttention();
  if (state.attribution) renderAttribution();
  if (state.step) renderStep();
  if (state.snapshotsRun) { renderSnapshots(); renderNorms('#ot-norms', state.snapshotsRun); }
  if (state.demos) renderDemoList();
  if (state.demo) renderDemo();
  fillModelSelect();
  showPollTime();
  if (tour.page) showTourStep();
  for (const b of $$('.lang-switch button')) b.classList.toggle('on', b.dataset.lang === lang());
  $('#ot-play').textContent = t(playTimer ? 'ot.pause' : 'ot.play');
}

function wireEvents() {
  for (const b of $$('#tabs button')) b.addEventListener('click', () => showTab(b.dataset.tab));
  for (const b of $$('.lang-switch button')) b.addEventListener('click', () => { setLanguage(b.dataset.lang); rerender(); });
  $('#model-select').addEventListener('change', (e) => { state.model = e.target.value ? JSON.parse(e.target.value) : null; });
  $('#tr-form').addEventListener('submit', (e) => { e.preventDefault(); runTranslate(); });
  $('#tr-text').addEventListener('keydown', (e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); runTranslate(); } });
  $('#tr-mode').addEventListener('change', updateModeOptions);
  $('#tr-sentence').addEventListener('change', runTranslate);
  $('#tr-to-attention').addEventListener('click', () => {
    $('#at-text').value = $('#tr-text').value;
    $('#at-sentence').value = $('#tr-sentence').value;
    state.shownTabs.add('attention');
    showTab('attention');
    runAttention();
  });
  $('#at-form').addEventListener('submit', (e) => { e.preventDefault(); runAttention(); });
  $('#ab-go').addEventListener('click', runAttribution);
  $('#ab-method').addEventListener('change', renderAttribution);
  $('#at-sentence').addEventListener('change', runAttention);
  wireAttentionSelects();
  wireStepEvents();
  wireTrainingEvents();
  wireTour();
  $('#ls-prev').addEventListener('click', () => stepDemo(-1));
  $('#ls-next').addEventListener('click', () => stepDemo(1));
  $('#ls-text-form').addEventListener('submit', (e) => { e.preventDefault(); openDemo('worked-example', $('#ls-text').value.trim()); });
  $('#runs-norms-run').addEventListener('change', showRunsNorms);
}

function wireAttentionSelects() {
  $('#at-stack').addEventListener('change', (e) => { state.at = {stack: +e.target.value, layer: 0, head: 0}; renderAttention(); });
  $('#at-layer').addEventListener('change', (e) => { state.at.layer = +e.target.value; renderAttention(); });
  $('#at-head').addEventListener('change', (e) => { state.at.head = +e.target.value; renderAttention(); });
}

function wireStepEvents() {
  $('#st-form').addEventListener('submit', (e) => { e.preventDefault(); runStep(); });
  for (const fs of $$('#st-form fieldset')) {
    $('.st-source', fs).addEventListener('change', () => { $('.st-config-label', fs).hidden = $('.st-source', fs).value === 'run'; });
  }
  for (const b of $$('#st-tree-side button')) b.addEventListener('click', () => { state.stepSide = b.dataset.side; state.openRow = null; renderTree(); });
  $('#st-show-params').addEventListener('change', () => { state.openRow = null; if (state.step) renderTree(); });
}

function wireTrainingEvents() {
  $('#ot-run').addEventListener('change', loadSnapshots);
  $('#ot-slider').addEventListener('input', (e) => { state.ot.index = +e.target.value; renderSnapshots(); });
  $('#ot-stack').addEventListener('change', (e) => { state.ot = {...state.ot, stack: +e.target.value, layer: 0, head: -1}; renderSnapshots(); });
  $('#ot-layer').addEventListener('change', (e) => { state.ot.layer = +e.target.value; renderSnapshots(); });
  $('#ot-head').addEventListener('change', (e) => { state.ot.head = +e.target.value; renderSnapshots(); });
  $('#ot-play').addEventListener('click', togglePlay);
}

function fillReportSentences() {
  for (const id of ['#tr-sentence', '#at-sentence']) {
    const sel = clear($(id));
    for (const s of (window.SF_REPORT_DATA.sentences || [])) sel.append(el('option', {value: s.text, text: s.text}));
  }
}

function fillConfigList() {
  const list = clear($('#st-configs'));
  for (const c of (state.info && state.info.configs) || []) list.append(el('option', {value: c}));
}

async function start() {
  document.body.classList.toggle('report', REPORT);
  document.body.classList.toggle('live', !REPORT);
  setLanguage(lang(), false);
  wireEvents();
  updateModeOptions();
  if (REPORT) fillReportSentences();
  try { state.info = await getData('info'); } catch (e) { showError('#global-error', e); }
  const version = state.info && state.info.version;
  $('#app-version').textContent = version && /^\d/.test(version) ? 'v' + version : '';
  fillConfigList();
  await loadRuns();
  await Promise.all([...state.shown].map(fetchMetrics));
  renderCharts();
  fillRunSelects();
  await showRunsNorms();
  rerender();
  showTab((location.hash || '#runs').slice(1));
  if (!REPORT) setInterval(poll, POLL_MS);
  document.body.dataset.ready = '1';
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
