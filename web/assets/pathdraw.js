// p5 web: drawings of a path pattern — the call tree (seed 000 Fig. 8), the timeline (seed 001
// Fig. 10), per-node latency histograms, and the graph of a run's edges (seed 000 Fig. 9).
// Pure DOM/canvas functions of the JSON the /paths and /graph endpoints send.
import { esc, fmtDur } from './util.js';

const CRIT = '#d0442b';
const BOX = '#7fa7d9';
const UNTRACED = '#c9c9c9';

/** A duration or a dash. */
const dur = (ns) => (ns === null || ns === undefined ? '–' : fmtDur(ns));

/** Children lists by parent id (stored order: parents before children, siblings by ord). */
function childrenOf(nodes) {
  const kids = new Map();
  for (const n of nodes) {
    if (!kids.has(n.parent)) kids.set(n.parent, []);
    kids.get(n.parent).push(n);
  }
  for (const v of kids.values()) v.sort((a, b) => a.ord - b.ord);
  return kids;
}

/**
 * The call tree into `el`: per node its name and mean latency including children; per edge
 * the delay from the parent's entry to the child's entry; the first edge says how many
 * instances and their total time. Critical-path nodes are marked.
 */
export function callTree(el, pattern, nodes) {
  const kids = childrenOf(nodes);
  const item = (n, depth) => {
    const edge = depth === 0 ? ''
      : depth === 1
        ? `<small class="edge">${pattern.count.toLocaleString()} × · total ${fmtDur(pattern.total_ns)}</small>`
        : `<small class="edge">+${dur(n.call_delay_ns)}</small>`;
    const cls = [n.critical ? 'crit' : '', n.kind === 'untraced' ? 'untraced' : ''].join(' ');
    const lat = n.latency_ns === null ? '' : ` <small>${fmtDur(n.latency_ns)}</small>`;
    const net = n.net_delay_ns ? ` <small class="net">net ${fmtDur(n.net_delay_ns)}</small>` : '';
    const tag = n.kind === 'untraced' ? ' <small>(untraced)</small>' : '';
    const sub = (kids.get(n.id) || []).map((c) => item(c, depth + 1)).join('');
    return `<li>${edge}<span class="${cls}" data-node="${n.id}">${esc(n.node)}${tag}${lat}${net}</span>${
      sub ? `<ul>${sub}</ul>` : ''}</li>`;
  };
  el.innerHTML = (kids.get(null) || []).map((r) => item(r, 0)).join('');
}

/** Rows of the timeline: nodes in depth-first order with their depth. */
function order(nodes) {
  const kids = childrenOf(nodes);
  const out = [];
  const walk = (n, d) => { out.push([n, d]); for (const c of kids.get(n.id) || []) walk(c, d + 1); };
  for (const r of kids.get(null) || []) walk(r, 0);
  return out;
}

/**
 * The timeline into `canvas`: one row per node, time left to right from the root's entry;
 * a box per node delay, a line from the parent's row to the child's at the child's entry,
 * labelled with the network delay when known; untraced nodes grey and dashed; the critical
 * path outlined.
 */
export function drawTimeline(canvas, nodes) {
  const rows = order(nodes);
  const rowH = 22;
  const left = 140;
  const dpr = window.devicePixelRatio || 1;
  const cssW = canvas.clientWidth || 640;
  const cssH = rows.length * rowH + 26;
  canvas.style.height = `${cssH}px`;
  canvas.width = cssW * dpr;
  canvas.height = cssH * dpr;
  const c = canvas.getContext('2d');
  c.setTransform(dpr, 0, 0, dpr, 0, 0);
  c.clearRect(0, 0, cssW, cssH);
  const end = Math.max(1, ...nodes.map((n) => n.end_ns));
  const X = (t) => left + (t / end) * (cssW - left - 12);
  const y = new Map();
  c.font = '12px system-ui, sans-serif';
  c.textBaseline = 'middle';
  rows.forEach(([n, d], i) => {
    const yy = 8 + i * rowH;
    y.set(n.id, yy);
    c.fillStyle = '#333';
    c.fillText(`${'  '.repeat(d)}${n.node}`, 4, yy + rowH / 2 - 2, left - 8);
  });
  for (const [n] of rows) {
    const yy = y.get(n.id);
    const x0 = X(n.start_ns);
    const x1 = Math.max(X(n.end_ns), x0 + 2);
    c.fillStyle = n.kind === 'untraced' ? UNTRACED : BOX;
    c.setLineDash(n.kind === 'untraced' ? [3, 2] : []);
    c.fillRect(x0, yy + 3, x1 - x0, rowH - 10);
    c.strokeStyle = n.critical ? CRIT : 'rgba(0,0,0,.35)';
    c.lineWidth = n.critical ? 2 : 1;
    c.strokeRect(x0, yy + 3, x1 - x0, rowH - 10);
    c.setLineDash([]);
    if (x1 - x0 > 60 && n.latency_ns !== null) {
      c.fillStyle = '#123';
      c.fillText(fmtDur(n.latency_ns), x0 + 4, yy + rowH / 2 - 2, x1 - x0 - 6);
    }
    if (n.parent !== null && y.has(n.parent)) {
      const yp = y.get(n.parent) + rowH - 7;
      const net = n.net_delay_ns || 0;
      c.strokeStyle = '#555';
      c.lineWidth = 1;
      c.beginPath();
      c.moveTo(X(Math.max(0, n.start_ns - net)), yp);
      c.lineTo(x0, yy + 3);
      c.stroke();
      if (n.net_delay_ns) {
        c.fillStyle = '#666';
        c.fillText(`net ${fmtDur(n.net_delay_ns)}`, x0 + 3, yy - 2);
      }
    }
  }
  c.fillStyle = '#777';
  c.fillText(`0 … ${fmtDur(end)} after the root's entry`, left, cssH - 8);
}

/**
 * A node's latency histogram into `canvas`: the stored bins are edges with the weight of the
 * samples from that edge to the next (p5 stores min, median, p90 and max); bars are drawn with
 * height = weight / width on a logarithmic time axis.
 */
export function drawHist(canvas, hist, title) {
  const c = canvas.getContext('2d');
  const W = canvas.width;
  const H = canvas.height;
  c.clearRect(0, 0, W, H);
  c.font = '11px system-ui, sans-serif';
  c.fillStyle = '#333';
  c.fillText(title, 4, 12);
  if (hist.length < 2) {
    c.fillStyle = '#999';
    c.fillText('no distribution stored', 4, H / 2);
    return;
  }
  const lo = Math.log10(Math.max(1, hist[0][0]));
  const hi = Math.log10(Math.max(hist[hist.length - 1][0], hist[0][0] + 1));
  const X = (v) => 4 + ((Math.log10(Math.max(1, v)) - lo) / Math.max(1e-9, hi - lo)) * (W - 8);
  const bars = [];
  for (let i = 0; i + 1 < hist.length; i += 1) {
    const [a, w] = hist[i];
    const b = hist[i + 1][0];
    if (b > a) bars.push([a, b, w / (Math.log10(b) - Math.log10(Math.max(1, a)) || 1)]);
  }
  const top = Math.max(1e-12, ...bars.map((x) => x[2]));
  c.fillStyle = BOX;
  for (const [a, b, d] of bars) {
    const h = (d / top) * (H - 34);
    c.fillRect(X(a), H - 16 - h, Math.max(1, X(b) - X(a) - 1), h);
  }
  c.fillStyle = '#666';
  c.fillText(fmtDur(hist[0][0]), 4, H - 4);
  const last = fmtDur(hist[hist.length - 1][0]);
  c.fillText(last, W - 4 - c.measureText(last).width, H - 4);
}

/**
 * The graph of a run into `el` (SVG): node names in layers by their depth from the roots,
 * edges labelled with their weight and heaviest call delays, heavier edges thicker.
 */
export function drawGraph(el, g) {
  const depth = new Map();
  const incoming = new Set(g.edges.map((e) => e.to));
  const roots = g.nodes.filter((n) => !incoming.has(n));
  const queue = (roots.length ? roots : g.nodes.slice(0, 1)).map((n) => [n, 0]);
  while (queue.length) {
    const [n, d] = queue.shift();
    if (depth.has(n) || d > 32) continue;
    depth.set(n, d);
    for (const e of g.edges) if (e.from === n) queue.push([e.to, d + 1]);
  }
  for (const n of g.nodes) if (!depth.has(n)) depth.set(n, 0);
  const layers = [];
  for (const n of g.nodes) (layers[depth.get(n)] ||= []).push(n);
  const W = 170;
  const H = 70;
  const pos = new Map();
  layers.forEach((ns, d) => ns.forEach((n, i) => pos.set(n, [20 + d * W, 20 + i * H])));
  const width = 40 + layers.length * W;
  const height = 40 + Math.max(1, ...layers.map((l) => l.length)) * H;
  const maxW = Math.max(1e-9, ...g.edges.map((e) => e.weight));
  const edges = g.edges.map((e) => {
    const [x1, y1] = pos.get(e.from);
    const [x2, y2] = pos.get(e.to);
    const delays = e.delays.slice(0, 2).map((d) => fmtDur(d[0])).join(', ');
    const label = `${Math.round(e.weight).toLocaleString()}${delays ? ` · ${delays}` : ''}`;
    const back = x2 <= x1;
    const path = back
      ? `M${x1 + 50},${y1 + 28} C${x1 + 50},${y1 + 70} ${x2 + 50},${y2 + 70} ${x2 + 50},${y2 + 28}`
      : `M${x1 + 100},${y1 + 14} L${x2},${y2 + 14}`;
    const mx = back ? (x1 + x2) / 2 + 50 : (x1 + 100 + x2) / 2;
    const my = back ? Math.max(y1, y2) + 64 : (y1 + y2) / 2 + 8;
    return `<path d="${path}" stroke="#555" fill="none" stroke-width="${1 + 3 * (e.weight / maxW)}" marker-end="url(#arrow)"/>
      <text x="${mx}" y="${my}" text-anchor="middle" class="elabel">${esc(label)}</text>`;
  }).join('');
  const boxes = g.nodes.map((n) => {
    const [x, y] = pos.get(n);
    return `<g><rect x="${x}" y="${y}" width="100" height="28" rx="4" fill="#eef4ff" stroke="#7fa7d9"/>
      <text x="${x + 50}" y="${y + 18}" text-anchor="middle">${esc(n)}</text></g>`;
  }).join('');
  el.innerHTML = `<svg width="${width}" height="${height}" class="graph">
    <defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">
    <path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>${edges}${boxes}</svg>`;
}
