// p5 web: statistics (CoSMoS' static visualizer, Fig. 14): per-sensor table, total-time bar
// chart, state pie chart, duration histogram, nesting tree with a breakdown bar chart, and a
// Kiviat diagram of host load. Every sensor you can click opens its source.
import { api, esc, fmtBytes, fmtDur, STATE_COLORS, sensorColor } from './util.js';

const COLUMNS = [
  ['name', 'sensor'], ['where', 'where'], ['count', 'count'], ['total', 'total'], ['mean', 'mean'],
  ['p50', 'p50'], ['p95', 'p95'], ['p99', 'p99'], ['max', 'max'], ['self', 'self'], ['child', 'nested'],
];

export class StatsView {
  constructor(ctx) {
    this.ctx = ctx;
    this.data = null;
    this.sort = 'total';
    this.selected = null;
    this.hits = new Map();
    for (const id of ['bar', 'breakdown']) {
      const cv = document.querySelector(`#${id}`);
      cv.addEventListener('click', (ev) => {
        const r = cv.getBoundingClientRect();
        const x = ((ev.clientX - r.left) * cv.width) / r.width;
        const y = ((ev.clientY - r.top) * cv.height) / r.height;
        const h = (this.hits.get(id) || []).find((b) => x >= b.x && x <= b.x + b.w && y >= b.y && y <= b.y + b.h);
        if (h) this.pick(h.sensor, true);
      });
    }
  }

  invalidate() {
    this.data = null;
    this.selected = null;
  }

  async load() {
    if (this.data || this.loading || !this.ctx.sid) return;
    const sid = this.ctx.sid;
    const body = document.querySelector('#sensor-table tbody');
    // A large session's statistics wait for its index (built once, in the background).
    body.innerHTML = `<tr><td>${this.ctx.rows && this.ctx.rows.partial
      ? 'indexing the session: statistics follow when the index is built …' : 'computing …'}</td></tr>`;
    this.loading = true;
    let data;
    try {
      data = await api(`/sessions/${sid}/stats`);
    } finally {
      this.loading = false;
    }
    if (sid !== this.ctx.sid) {
      // Another session was chosen meanwhile.
      if (document.querySelector('#stats').classList.contains('on')) this.load();
      return;
    }
    this.data = data;
    this.bySensor = new Map(this.data.sensors.map((s) => [s.sensor, s]));
    this.table();
    this.throttled();
    this.bar();
    this.pie();
    this.kiviat();
    this.tree();
    const first = this.data.sensors[0];
    if (first) this.pick(first.sensor, false);
    document.body.dataset.stats = '1';
  }

  /** Selects a sensor: histogram, breakdown, table row; optionally its source. */
  pick(sensor, source) {
    this.selected = sensor;
    for (const tr of document.querySelectorAll('#sensor-table tbody tr')) {
      tr.classList.toggle('on', Number(tr.dataset.sensor) === sensor);
    }
    for (const sp of document.querySelectorAll('#tree span')) {
      sp.classList.toggle('on', Number(sp.dataset.sensor) === sensor);
    }
    this.hist();
    this.breakdown();
    if (source) this.ctx.openSource(sensor);
  }

  table() {
    const head = document.querySelector('#sensor-table thead');
    head.innerHTML = `<tr>${COLUMNS.map(([k, t]) => `<th data-k="${k}">${t}${k === this.sort ? ' ▾' : ''}</th>`).join('')}</tr>`;
    for (const th of head.querySelectorAll('th')) {
      th.onclick = () => {
        this.sort = th.dataset.k;
        this.table();
      };
    }
    const rows = [...this.data.sensors];
    const k = this.sort;
    rows.sort((a, b) => (k === 'name' || k === 'where'
      ? String(a.name).localeCompare(String(b.name))
      : (b[k] ?? 0) - (a[k] ?? 0)));
    const d = (v) => fmtDur(v);
    document.querySelector('#sensor-table tbody').innerHTML = rows.map((s) => `
      <tr data-sensor="${s.sensor}" class="${s.sensor === this.selected ? 'on' : ''}">
        <td><i style="display:inline-block;width:9px;height:9px;background:${sensorColor(s.sensor)}"></i> ${esc(s.name)}</td>
        <td>${esc(s.function || '')} ${esc(s.file || '')}${s.line ? `:${s.line}` : ''}</td>
        <td>${s.count}</td><td>${d(s.total)}</td><td>${d(s.mean)}</td><td>${d(s.p50)}</td>
        <td>${d(s.p95)}</td><td>${d(s.p99)}</td><td>${d(s.max)}</td><td>${d(s.self)}</td><td>${d(s.child)}</td>
      </tr>`).join('');
    for (const tr of document.querySelectorAll('#sensor-table tbody tr')) {
      tr.onclick = () => this.pick(Number(tr.dataset.sensor), true);
    }
  }

  /**
   * Throttled sensors (issue 21): after the runtime throttled them (or the selection pinned
   * them count-only) their calls were counted, not recorded, so the table above holds only
   * their recorded calls. This card lists each with its calls in all and when it happened.
   */
  throttled() {
    const list = this.data.throttled || [];
    let card = document.querySelector('#throttled-card');
    if (!card) {
      card = document.createElement('div');
      card.id = 'throttled-card';
      card.className = 'card wide';
      const sensors = document.querySelector('#sensor-table').closest('.card');
      sensors.after(card);
    }
    card.hidden = list.length === 0;
    if (!list.length) return;
    const t0 = (this.ctx.rows && this.ctx.rows.session && this.ctx.rows.session.t_min) || 0;
    card.innerHTML = `<h3>Throttled sensors (${list.length}): calls counted, not recorded</h3>
      <div class="tablewrap"><table id="throttled-table"><thead><tr><th>sensor</th><th>calls</th>
      <th>recorded while throttled</th><th>mean (timed calls)</th><th>since</th><th>why</th></tr></thead>
      <tbody>${list.map((t) => `<tr data-sensor="${t.sensor ?? ''}">
        <td>${esc(t.name || t.hex)}${t.function ? ` <small>${esc(t.function)}()</small>` : ''}</td>
        <td>${t.calls}</td><td>${t.recorded}</td><td>${fmtDur(t.mean)}</td>
        <td>${fmtDur(Math.max(0, t.t_throttled - t0))}</td>
        <td>${t.pinned ? 'pinned count-only (selection)' : 'hot and tiny (P5_THROTTLE)'}</td></tr>`).join('')}
      </tbody></table></div>`;
    for (const tr of card.querySelectorAll('tbody tr')) {
      if (tr.dataset.sensor !== '') tr.onclick = () => this.pick(Number(tr.dataset.sensor), true);
    }
  }

  /** Horizontal bars: self (solid) and nested (light) time of the top sensors. */
  bars(id, items) {
    const cv = document.querySelector(`#${id}`);
    const c = cv.getContext('2d');
    c.clearRect(0, 0, cv.width, cv.height);
    const lw = 170;
    const bh = Math.min(22, (cv.height - 10) / Math.max(1, items.length));
    const max = Math.max(1, ...items.map((i) => i.self + i.child));
    const hits = [];
    c.font = '11px system-ui, sans-serif';
    c.textBaseline = 'middle';
    items.forEach((it, k) => {
      const y = 5 + k * bh;
      const w = cv.width - lw - 80;
      const ws = (it.self / max) * w;
      const wc = (it.child / max) * w;
      c.fillStyle = '#333';
      c.fillText(it.label.length > 26 ? `${it.label.slice(0, 25)}…` : it.label, 4, y + bh / 2);
      c.fillStyle = sensorColor(it.sensor);
      c.fillRect(lw, y + 2, ws, bh - 4);
      c.globalAlpha = 0.35;
      c.fillRect(lw + ws, y + 2, wc, bh - 4);
      c.globalAlpha = 1;
      c.fillStyle = '#555';
      c.fillText(fmtDur(it.self + it.child), lw + ws + wc + 4, y + bh / 2);
      if (it.sensor !== null) hits.push({ x: 0, y, w: cv.width, h: bh, sensor: it.sensor });
    });
    this.hits.set(id, hits);
  }

  bar() {
    this.bars('bar', this.data.sensors.slice(0, 14).map((s) => ({
      label: s.name, sensor: s.sensor, self: s.self, child: s.child,
    })));
  }

  pie() {
    const cv = document.querySelector('#pie');
    const c = cv.getContext('2d');
    c.clearRect(0, 0, cv.width, cv.height);
    const st = this.data.states;
    const sum = st.reduce((a, s) => a + s.total, 0) || 1;
    let a = -Math.PI / 2;
    const cx = 115;
    const cy = cv.height / 2;
    const r = Math.min(100, cy - 10);
    c.font = '12px system-ui, sans-serif';
    c.textBaseline = 'middle';
    st.forEach((s, k) => {
      const da = (s.total / sum) * Math.PI * 2;
      c.fillStyle = STATE_COLORS[s.state] || STATE_COLORS.other;
      c.beginPath();
      c.moveTo(cx, cy);
      c.arc(cx, cy, r, a, a + da);
      c.closePath();
      c.fill();
      c.strokeStyle = '#fff';
      c.stroke();
      a += da;
      c.fillRect(cx + r + 20, 20 + k * 20, 12, 12);
      c.fillStyle = '#333';
      c.fillText(`${s.state} ${((100 * s.total) / sum).toFixed(1)} %`, cx + r + 38, 26 + k * 20);
    });
  }

  hist() {
    const s = this.bySensor.get(this.selected);
    const cv = document.querySelector('#hist');
    const c = cv.getContext('2d');
    c.clearRect(0, 0, cv.width, cv.height);
    document.querySelector('#hist-name').textContent = s ? `${s.name} (${s.count})` : '';
    if (!s) return;
    const counts = s.hist.counts;
    const max = Math.max(...counts);
    const bw = Math.min(64, (cv.width - 40) / counts.length);
    c.font = '10px system-ui, sans-serif';
    c.textAlign = 'center';
    // Bin labels that would overlap their neighbours are thinned to every `every`-th bin.
    const label = (k) => `<${fmtDur(2 ** (s.hist.first_bin + k))}`;
    const widest = Math.max(...counts.map((_, k) => c.measureText(label(k)).width));
    const every = Math.max(1, Math.ceil((widest + 6) / bw));
    const countW = Math.max(...counts.map((n) => c.measureText(String(n)).width));
    const countEvery = Math.max(1, Math.ceil((countW + 4) / bw));
    this.histLabels = [];
    counts.forEach((n, k) => {
      const h = (n / max) * (cv.height - 40);
      const x = 30 + k * bw + bw / 2;
      c.fillStyle = sensorColor(s.sensor);
      c.fillRect(30 + k * bw + 1, cv.height - 24 - h, bw - 2, h);
      c.fillStyle = '#333';
      if (n && k % countEvery === 0) c.fillText(String(n), x, cv.height - 30 - h);
      if (k % every === 0) {
        c.fillText(label(k), x, cv.height - 10);
        const w = c.measureText(label(k)).width;
        this.histLabels.push([x - w / 2, x + w / 2]);
      }
    });
    c.textAlign = 'left';
  }

  tree() {
    const kids = new Map();
    for (const e of this.data.tree) {
      const p = e.parent === null ? 'root' : e.parent;
      if (!kids.has(p)) kids.set(p, []);
      kids.get(p).push(e);
    }
    for (const v of kids.values()) v.sort((a, b) => b.total - a.total);
    this.kids = kids;
    const name = (i) => (this.ctx.sensors[i] || {}).name || `sensor ${i}`;
    const build = (key, path, depth) => (kids.get(key) || []).map((e) => {
      const rec = path.includes(e.child) || depth > 12;
      const sub = rec ? '' : build(e.child, [...path, e.child], depth + 1);
      return `<li><span data-sensor="${e.child}">${esc(name(e.child))}</span> <small>${e.count}× ${fmtDur(e.total)}</small>${sub ? `<ul>${sub}</ul>` : ''}</li>`;
    }).join('');
    const ul = document.querySelector('#tree');
    ul.innerHTML = build('root', [], 0);
    for (const sp of ul.querySelectorAll('span')) sp.onclick = () => this.pick(Number(sp.dataset.sensor), true);
  }

  /** Fig. 14: where the selected sensor's time goes — its own time and each nested sensor. */
  breakdown() {
    const s = this.bySensor.get(this.selected);
    document.querySelector('#breakdown-name').textContent = s ? s.name : '';
    if (!s) return this.bars('breakdown', []);
    const items = [{ label: `${s.name} (self)`, sensor: s.sensor, self: s.self, child: 0 }];
    for (const e of (this.kids.get(s.sensor) || [])) {
      items.push({ label: (this.ctx.sensors[e.child] || {}).name || '?', sensor: e.child, self: e.total, child: 0 });
    }
    this.bars('breakdown', items.slice(0, 12));
  }

  kiviat() {
    const cv = document.querySelector('#kiviat');
    const c = cv.getContext('2d');
    c.clearRect(0, 0, cv.width, cv.height);
    const { axes, hosts } = this.data.kiviat;
    const scale = this.data.kiviat.scale || [];
    const units = this.data.kiviat.units || [];
    const cx = 150;
    const cy = cv.height / 2;
    const r = Math.min(110, cy - 25);
    const ang = (k) => -Math.PI / 2 + (k * 2 * Math.PI) / axes.length;
    c.strokeStyle = '#ccc';
    c.font = '11px system-ui, sans-serif';
    c.textAlign = 'center';
    c.textBaseline = 'middle';
    for (const f of [0.25, 0.5, 0.75, 1]) {
      c.beginPath();
      axes.forEach((_, k) => {
        const x = cx + Math.cos(ang(k)) * r * f;
        const y = cy + Math.sin(ang(k)) * r * f;
        if (k) c.lineTo(x, y);
        else c.moveTo(x, y);
      });
      c.closePath();
      c.stroke();
    }
    // The scale: rings at a quarter of the outer one; each axis names what its outer ring is.
    c.fillStyle = '#999';
    c.font = '9px system-ui, sans-serif';
    // Ring labels between the first two axes, clear of the axis names.
    const mid = (ang(0) + ang(1)) / 2;
    for (const f of [0.25, 0.5, 0.75, 1]) {
      c.fillText(`${f * 100}%`, cx + Math.cos(mid) * r * f + 10, cy + Math.sin(mid) * r * f);
    }
    c.font = '11px system-ui, sans-serif';
    this.kiviatLabels = [];
    axes.forEach((a, k) => {
      c.beginPath();
      c.moveTo(cx, cy);
      c.lineTo(cx + Math.cos(ang(k)) * r, cy + Math.sin(ang(k)) * r);
      c.stroke();
      c.fillStyle = '#333';
      const x = cx + Math.cos(ang(k)) * (r + 16);
      const y = cy + Math.sin(ang(k)) * (r + 12);
      c.fillText(a, x, y - 6);
      const full = scale[k] === undefined ? '' : scale[k] === null ? 'no data' : fullScale(scale[k], units[k]);
      c.fillStyle = '#888';
      c.font = '9px system-ui, sans-serif';
      c.fillText(full, x, y + 6);
      c.font = '11px system-ui, sans-serif';
      this.kiviatLabels.push(`${a} ${full}`.trim());
    });
    const colors = ['#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#ff7f0e', '#8c564b'];
    c.textAlign = 'left';
    hosts.forEach((h, i) => {
      const col = colors[i % colors.length];
      c.strokeStyle = col;
      c.fillStyle = col;
      c.globalAlpha = 0.18;
      c.beginPath();
      h.normalized.forEach((v, k) => {
        const x = cx + Math.cos(ang(k)) * r * (v || 0);
        const y = cy + Math.sin(ang(k)) * r * (v || 0);
        if (k) c.lineTo(x, y);
        else c.moveTo(x, y);
      });
      c.closePath();
      c.fill();
      c.globalAlpha = 1;
      c.stroke();
      c.fillText(`■ ${h.hostname}`, cx + r + 45, 20 + i * 18);
    });
    c.textAlign = 'left';
  }
}

// What an axis's outer ring of the Kiviat diagram stands for: "100 %", "2.3 MiB/s", "1.5".
function fullScale(v, unit) {
  if (unit === 'B/s') return `${fmtBytes(v)}/s`;
  if (unit === '%') return `${Number(v.toPrecision(3))} %`;
  return `${Number(v.toPrecision(3))}${unit ? ` ${unit}` : ''}`;
}
