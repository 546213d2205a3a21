// p5 web: the timeline (CoSMoS Figs. 5, 7, 8, 12). One block per process: per thread a state
// bar (sending / receiving / calculating …), its nested function intervals beneath, a black
// line for each scheduling interval (the thread had a CPU), then the host's IRQ dots (hard IRQs
// blue, network softirqs purple: on loopback the kernel's packet work shows there); message
// arrows from each send to its receive; host CPU and network charts at the bottom on the same
// time axis. The server sends level-of-detail items ([start, end, category, count, covered]);
// this file only lays them out and draws them on canvases.
import {
  api, fmtDur, fmtAt, fmtBytes, STATE_COLORS, sensorColor, esc, irqName, SOFTIRQ_BASE, IRQ_COLOR, SOFTIRQ_COLOR,
} from './util.js';

const LABEL_W = 210;
const STATE_H = 16;
const LEVEL_H = 11;
const SCHED_H = 4;
const IRQ_H = 10;
const GAP = 10;
const CHART_H = 48;
const MIN_SPAN = 100; // ns: the deepest zoom

export class Timeline {
  constructor(ctx) {
    this.ctx = ctx;
    this.chart = document.querySelector('#chart');
    this.ruler = document.querySelector('#ruler');
    this.scroll = document.querySelector('#scroll');
    this.tip = document.querySelector('#tip');
    this.rangeEl = document.querySelector('#range');
    this.cursorEl = document.querySelector('#cursor-time');
    this.view = { t0: 0, t1: 1 };
    this.bounds = { t0: 0, t1: 1 };
    this.cursor = 0;
    this.playing = false;
    this.speedExp = 0;
    this.seq = 0;
    this.loads = 0;
    this.lanes = [];
    this.height = 100;
    this.drag = null;
    this.gantt = null;
    this.msgs = [];
    this.hosts = new Map();
    this.bind();
    new ResizeObserver(() => this.resize()).observe(this.scroll);
  }

  // ---- session, layout, data --------------------------------------------------------------

  async setSession(rows) {
    this.rows = rows;
    this.bounds = { t0: rows.t_min, t1: Math.max(rows.t_max, rows.t_min + 1) };
    this.view = { ...this.bounds };
    this.cursor = rows.t_min;
    this.gantt = null;
    this.msgs = [];
    this.stop();
    if (rows.partial) this.awaitIndex();
    // Host charts only for hosts that report load.
    const m = await api(`/sessions/${this.ctx.sid}/metrics?px=200`);
    this.chartHosts = m.hosts.filter((h) => h.series.length);
    this.layout();
    this.legend();
    this.resize();
    this.setView(this.bounds.t0, this.bounds.t1);
  }

  layout() {
    const lanes = [];
    let y = 6;
    this.threadY = new Map();
    // Each thread's clock error bound (its process's), for arrows whose order is uncertain.
    this.threadBound = new Map();
    for (const p of this.rows.processes) {
      for (const t of p.threads) this.threadBound.set(t.id, p.clock_bound_ns ?? null);
    }
    for (const p of this.rows.processes) {
      const top = y;
      p.threads.forEach((t, k) => {
        const lost = t.dropped > 0 ? `  ⚠ ${t.dropped.toLocaleString()} events lost` : '';
        const state = { kind: 'state', y, h: STATE_H, thread: t.id, process: p,
          label: k === 0 ? p.label : '', sub: `${t.name} (tid ${t.tid})${lost}` };
        lanes.push(state);
        this.threadY.set(t.id, y + STATE_H / 2);
        y += STATE_H + 1;
        for (let l = 0; l < t.levels; l++) {
          lanes.push({ kind: 'level', y, h: LEVEL_H, thread: t.id, level: l, process: p });
          y += LEVEL_H;
        }
        // Where the thread lost events: a warning band over its state and call lanes.
        if (t.drops && t.drops.length) {
          lanes.push({ kind: 'drops', y: state.y, h: y - state.y, thread: t.id, process: p, drops: t.drops });
        }
        if (t.sched) {
          y += 2;
          lanes.push({ kind: 'sched', y, h: SCHED_H, thread: t.id, process: p, sub: 'on CPU' });
          y += SCHED_H + 1;
        }
      });
      if (this.rows.irq_hosts.includes(p.host_id)) {
        y += 1;
        lanes.push({ kind: 'irq', y, h: IRQ_H, host: p.host_id, process: p, sub: 'IRQs, softirqs' });
        y += IRQ_H;
      }
      lanes.push({ kind: 'block', y: top - 3, h: y - top + 6, process: p });
      y += GAP;
    }
    this.chartsTop = y;
    for (const h of this.chartHosts) {
      for (const kind of ['cpu', 'net']) {
        if (!h.series.some((s) => (kind === 'cpu' ? s.name === 'cpu' : s.name.startsWith('net')))) continue;
        y += 4;
        lanes.push({ kind, y, h: CHART_H, host: h.host,
          label: `${h.hostname} ${kind === 'cpu' ? 'CPU %' : 'network'}` });
        y += CHART_H;
      }
    }
    this.lanes = lanes;
    this.height = y + 8;
  }

  legend() {
    const st = this.rows.states.filter((s) => ['calculating', 'sending', 'receiving', 'waiting'].includes(s));
    const box = (c, t) => `<span><i style="background:${c}"></i>${esc(t)}</span>`;
    document.querySelector('#legend').innerHTML = [
      ...st.map((s) => box(STATE_COLORS[s], s === 'waiting' ? 'waiting (poll, select, epoll)' : s)),
      box('#222', 'scheduled (had a CPU)'),
      box(IRQ_COLOR, 'IRQ'),
      box(SOFTIRQ_COLOR, 'network softirq'),
      '<span>&#8594; message send → receive (dashed: within the clock error bound)</span>',
      box('rgba(70,130,180,.5)', 'CPU'), box('#1f77b4', 'net rx'), box('#ff7f0e', 'net tx'),
      `<span>session: ${esc(this.rows.session.name)}, ${this.rows.processes.length} processes</span>`,
      this.rows.partial ? '<span class="partial">indexing: showing the overview (no arrows yet)</span>' : '',
    ].join('');
  }

  plotW() {
    return Math.max(10, this.width - LABEL_W - 8);
  }

  X(t) {
    return LABEL_W + ((t - this.view.t0) / (this.view.t1 - this.view.t0)) * this.plotW();
  }

  T(x) {
    return this.view.t0 + ((x - LABEL_W) / this.plotW()) * (this.view.t1 - this.view.t0);
  }

  setView(t0, t1) {
    const full = this.bounds.t1 - this.bounds.t0;
    let w = Math.min(Math.max(t1 - t0, MIN_SPAN), full * 1.5);
    const pad = full * 0.25;
    t0 = Math.min(Math.max(t0, this.bounds.t0 - pad), this.bounds.t1 + pad - w);
    this.view = { t0, t1: t0 + w };
    const base = this.rows ? this.rows.t_min : 0;
    const ref = Math.max(Math.abs(t0 - base), Math.abs(t0 + w - base));
    this.rangeEl.textContent =
      `${this.fmtT(t0, w / 1000, ref)} – ${this.fmtT(t0 + w, w / 1000, ref)}  (${fmtDur(w)})`;
    this.rangeEl.dataset.t0 = String(Math.round(t0));
    this.rangeEl.dataset.t1 = String(Math.round(t0 + w));
    clearTimeout(this.fetchTimer);
    this.fetchTimer = setTimeout(() => this.fetch(), 30);
    this.draw();
  }

  async fetch() {
    if (!this.rows) return;
    const seq = ++this.seq;
    const t0 = Math.floor(this.view.t0);
    const t1 = Math.max(Math.ceil(this.view.t1), t0 + 1);
    const px = Math.round(this.plotW());
    const sid = this.ctx.sid;
    try {
      const [g, m, met] = await Promise.all([
        api(`/sessions/${sid}/gantt?t0=${t0}&t1=${t1}&px=${px}`),
        api(`/sessions/${sid}/messages?t0=${t0}&t1=${t1}&limit=${Math.min(2000, px)}`),
        api(`/sessions/${sid}/metrics?t0=${t0}&t1=${t1}&px=${px}`),
      ]);
      if (seq !== this.seq) return;
      if (g.partial) this.awaitIndex();
      this.gantt = new Map(g.threads.map((t) => [t.id, t]));
      this.irqs = new Map(g.irqs.map((i) => [i.host, i.items]));
      this.msgs = m.messages;
      this.msgTotal = m.total;
      this.msgExact = m.total_exact;
      this.hosts = new Map(met.hosts.map((h) => [h.host, h]));
      this.loads += 1;
      document.body.dataset.loads = String(this.loads);
      document.body.dataset.ready = '1';
      this.draw();
    } catch (e) {
      document.querySelector('#legend').textContent = `error: ${e.message}`;
    }
  }

  // The server answers from the session's overview while it builds the index of a large
  // session it has not opened before: show that, ask again every second, then take the full
  // rows and redraw the same view.
  awaitIndex() {
    if (this.indexTimer) return;
    const sid = this.ctx.sid;
    document.body.dataset.partial = '1';
    document.body.dataset.previewed = '1';
    const poll = async () => {
      const rows = await api(`/sessions/${sid}/rows`).catch(() => null);
      if (sid !== this.ctx.sid) {
        this.indexTimer = null;
        return;
      }
      if (!rows || rows.partial) {
        this.indexTimer = setTimeout(poll, 1000);
        return;
      }
      this.indexTimer = null;
      delete document.body.dataset.partial;
      this.ctx.rows = rows;
      this.rows = rows;
      this.layout();
      this.legend();
      this.resize();
      this.fetch();
    };
    this.indexTimer = setTimeout(poll, 1000);
  }

  resize() {
    const r = this.scroll.getBoundingClientRect();
    if (!r.width) return;
    this.width = r.width;
    const dpr = window.devicePixelRatio || 1;
    this.dpr = dpr;
    this.chart.width = Math.round(r.width * dpr);
    this.chart.height = Math.round(this.height * dpr);
    this.chart.style.height = `${this.height}px`;
    this.ruler.width = Math.round(r.width * dpr);
    this.ruler.height = Math.round(28 * dpr);
    if (this.rows) {
      clearTimeout(this.fetchTimer);
      this.fetchTimer = setTimeout(() => this.fetch(), 60);
    }
    this.draw();
  }

  // ---- drawing ------------------------------------------------------------------------------

  // A time since session start; with `res` (ns), to that resolution (see `fmtAt`).
  fmtT(t, res, ref) {
    const d = t - (this.rows ? this.rows.t_min : 0);
    return `+${res === undefined ? fmtDur(d) : fmtAt(d, res, ref)}`;
  }

  // Nanoseconds one pixel column of the plot covers.
  pxRes() {
    return (this.view.t1 - this.view.t0) / Math.max(1, this.plotW());
  }

  itemsFor(lane) {
    if (!this.gantt) return [];
    if (lane.kind === 'irq') return (this.irqs && this.irqs.get(lane.host)) || [];
    const g = this.gantt.get(lane.thread);
    if (!g) return [];
    if (lane.kind === 'state') return g.states;
    if (lane.kind === 'level') return g.levels[lane.level] || [];
    if (lane.kind === 'sched') return g.sched;
    return [];
  }

  draw() {
    if (!this.rows || !this.width) return;
    this.drawRuler();
    const c = this.chart.getContext('2d');
    c.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    c.clearRect(0, 0, this.width, this.height);
    const x0 = LABEL_W;
    const x1 = LABEL_W + this.plotW();
    c.font = '12px system-ui, sans-serif';
    c.textBaseline = 'middle';
    let odd = false;
    for (const lane of this.lanes) {
      if (lane.kind === 'block') {
        odd = !odd;
        c.fillStyle = odd ? '#fbfbfd' : '#f3f5f9';
        c.fillRect(0, lane.y, this.width, lane.h);
      }
    }
    c.save();
    c.beginPath();
    c.rect(x0, 0, x1 - x0, this.height);
    c.clip();
    this.drawGrid(c);
    for (const lane of this.lanes) this.drawLane(c, lane);
    for (const lane of this.lanes) if (lane.kind === 'drops') this.drawDrops(c, lane);
    this.drawMessages(c);
    this.drawHighlight(c);
    c.restore();
    // labels
    c.fillStyle = '#222';
    for (const lane of this.lanes) {
      if (lane.label) {
        c.font = lane.kind === 'state' ? 'bold 12px system-ui, sans-serif' : '11px system-ui, sans-serif';
        c.fillStyle = '#222';
        c.fillText(clipText(c, lane.label, LABEL_W - 12), 8, lane.y + (lane.kind === 'state' ? STATE_H / 2 : 10));
      }
      if (lane.sub && lane.kind === 'state') {
        c.font = '10px system-ui, sans-serif';
        c.fillStyle = '#777';
        c.fillText(lane.sub, 8, lane.y + STATE_H + 6);
      } else if (lane.sub) {
        c.font = '9px system-ui, sans-serif';
        c.fillStyle = '#999';
        c.textAlign = 'right';
        c.fillText(lane.sub, LABEL_W - 6, lane.y + lane.h / 2);
        c.textAlign = 'left';
      }
    }
    c.strokeStyle = '#ccc';
    c.beginPath();
    c.moveTo(LABEL_W - 0.5, 0);
    c.lineTo(LABEL_W - 0.5, this.height);
    c.stroke();
    // time cursor across every chart
    const xc = this.X(this.cursor);
    if (xc >= x0 && xc <= x1) {
      c.strokeStyle = '#e00';
      c.lineWidth = 1.5;
      c.beginPath();
      c.moveTo(xc, 0);
      c.lineTo(xc, this.height);
      c.stroke();
      c.lineWidth = 1;
    }
    if (this.drag && this.drag.mode === 'box') {
      const a = Math.min(this.drag.x, this.drag.cx);
      const b = Math.max(this.drag.x, this.drag.cx);
      c.fillStyle = 'rgba(30,110,220,.15)';
      c.fillRect(a, 0, b - a, this.height);
    }
    this.cursorEl.textContent = `cursor ${this.fmtT(this.cursor, this.pxRes())}`;
    this.cursorEl.dataset.t = String(Math.round(this.cursor));
  }

  drawGrid(c) {
    c.strokeStyle = '#eceef2';
    c.beginPath();
    for (const t of this.ticks()) {
      const x = Math.round(this.X(t)) + 0.5;
      c.moveTo(x, 0);
      c.lineTo(x, this.height);
    }
    c.stroke();
  }

  ticks() {
    const w = this.view.t1 - this.view.t0;
    const target = w / Math.max(2, this.plotW() / 110);
    const p = 10 ** Math.floor(Math.log10(target));
    const step = [1, 2, 5, 10].map((m) => m * p).find((s) => s >= target) || 10 * p;
    const base = this.rows.t_min;
    const out = [];
    for (let t = base + Math.ceil((this.view.t0 - base) / step) * step; t <= this.view.t1; t += step) out.push(t);
    this.tickStep = step;
    return out;
  }

  drawRuler() {
    const c = this.ruler.getContext('2d');
    c.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    c.clearRect(0, 0, this.width, 28);
    c.font = '11px system-ui, sans-serif';
    c.textBaseline = 'top';
    c.fillStyle = '#444';
    c.strokeStyle = '#999';
    c.beginPath();
    for (const t of this.ticks()) {
      const x = Math.round(this.X(t)) + 0.5;
      c.moveTo(x, 18);
      c.lineTo(x, 28);
      c.fillText(this.fmtT(t, this.tickStep), x + 3, 4);
    }
    c.stroke();
    c.fillStyle = '#fff';
    c.fillRect(0, 0, LABEL_W, 28);
    c.fillStyle = '#777';
    c.fillText(`time since session start`, 8, 8);
    const xc = this.X(this.cursor);
    if (xc >= LABEL_W) {
      c.fillStyle = '#e00';
      c.beginPath();
      c.moveTo(xc - 6, 16);
      c.lineTo(xc + 6, 16);
      c.lineTo(xc, 28);
      c.fill();
    }
    if (this.drag && this.drag.mode === 'box') {
      const a = Math.min(this.drag.x, this.drag.cx);
      c.fillStyle = 'rgba(30,110,220,.25)';
      c.fillRect(a, 0, Math.abs(this.drag.cx - this.drag.x), 28);
    }
  }

  drawLane(c, lane) {
    if (lane.kind === 'drops') return undefined;
    if (lane.kind === 'cpu' || lane.kind === 'net') return this.drawHostChart(c, lane);
    const items = this.itemsFor(lane);
    const y = lane.y;
    const h = lane.h;
    for (const it of items) {
      const [s, e, cat, n, cov] = it;
      const a = this.X(s);
      const b = Math.max(this.X(e), a + 1);
      if (b < LABEL_W || a > this.width) continue;
      if (lane.kind === 'state') {
        c.fillStyle = STATE_COLORS[this.rows.states[cat]] || STATE_COLORS.other;
        c.fillRect(a, y, b - a, h);
        if (b - a > 4) {
          c.strokeStyle = 'rgba(0,0,0,.25)';
          c.strokeRect(a + 0.5, y + 0.5, b - a - 1, h - 1);
        }
      } else if (lane.kind === 'level') {
        const fill = n > 1 && e > s ? Math.max(0.35, Math.min(1, cov / (e - s))) : 1;
        c.globalAlpha = fill;
        c.fillStyle = sensorColor(cat);
        c.fillRect(a, y, b - a, h - 1);
        c.globalAlpha = 1;
        if (b - a > 3) {
          c.strokeStyle = sensorColor(cat, -25);
          c.strokeRect(a + 0.5, y + 0.5, b - a - 1, h - 2);
        }
        if (b - a > 40 && n === 1) {
          const name = (this.ctx.sensors[cat] || {}).name || '';
          c.fillStyle = '#111';
          c.font = '10px system-ui, sans-serif';
          c.fillText(clipText(c, name, b - a - 6), Math.max(a, LABEL_W) + 3, y + h / 2);
        }
      } else if (lane.kind === 'sched') {
        c.fillStyle = '#222';
        c.fillRect(a, y, b - a, h);
      } else if (lane.kind === 'irq') {
        c.fillStyle = cat >= SOFTIRQ_BASE ? SOFTIRQ_COLOR : IRQ_COLOR;
        if (n > 1 && b - a > 3) {
          // A run of instants closer than a pixel column: a band over the time they span.
          c.fillRect(a, y + h / 2 - 2, b - a, 4);
        } else {
          c.beginPath();
          const r = n > 1 ? 3 : 2.2;
          c.arc(a, y + h / 2, r, 0, Math.PI * 2);
          c.fill();
        }
      }
    }
  }

  // Time ranges where the runtime lost events to a full buffer: the trace has gaps there.
  drawDrops(c, lane) {
    c.save();
    c.fillStyle = 'rgba(255,140,0,.28)';
    c.strokeStyle = 'rgba(200,90,0,.9)';
    for (const [a, b] of lane.drops) {
      if (b < this.view.t0 || a > this.view.t1) continue;
      const x0 = this.X(a);
      const w = Math.max(3, this.X(b) - x0);
      c.fillRect(x0, lane.y, w, lane.h);
      c.strokeRect(x0 + 0.5, lane.y + 0.5, w - 1, lane.h - 1);
    }
    c.restore();
  }

  drawHostChart(c, lane) {
    const host = this.hosts.get(lane.host);
    c.strokeStyle = '#ddd';
    c.strokeRect(LABEL_W + 0.5, lane.y + 0.5, this.plotW() - 1, lane.h - 1);
    if (!host) return;
    const series = host.series.filter((s) => (lane.kind === 'cpu' ? s.name === 'cpu' : s.name.startsWith('net')));
    let max = lane.kind === 'cpu' ? 100 : 0;
    if (lane.kind === 'net') for (const s of series) for (const p of s.points) max = Math.max(max, p[1]);
    if (max <= 0) max = 1;
    const Y = (v) => lane.y + lane.h - 2 - (Math.min(v, max) / max) * (lane.h - 4);
    for (const s of series) {
      if (!s.points.length) continue;
      c.beginPath();
      s.points.forEach(([t, v], k) => (k ? c.lineTo(this.X(t), Y(v)) : c.moveTo(this.X(t), Y(v))));
      if (s.name === 'cpu') {
        c.lineTo(this.X(s.points[s.points.length - 1][0]), lane.y + lane.h - 2);
        c.lineTo(this.X(s.points[0][0]), lane.y + lane.h - 2);
        c.closePath();
        c.fillStyle = 'rgba(70,130,180,.35)';
        c.fill();
        c.strokeStyle = 'steelblue';
      } else {
        c.strokeStyle = s.name === 'net_rx' ? '#1f77b4' : '#ff7f0e';
        c.stroke();
      }
      c.stroke();
    }
    c.fillStyle = '#888';
    c.font = '9px system-ui, sans-serif';
    lane.scale = lane.kind === 'cpu' ? '100 %' : netScale(series, max);
    c.fillText(lane.scale, LABEL_W + 4, lane.y + 7);
  }

  // The two clocks' error bounds together, if a message's latency is within them (its ends
  // could be in the other order, or much closer): null when certain or unknown.
  uncertainty(m) {
    const a = this.threadBound.get(m.send_thread);
    const b = this.threadBound.get(m.recv_thread);
    if (a === null || a === undefined || b === null || b === undefined) return null;
    const bound = a + b;
    return bound > 0 && Math.abs(m.recv_t - m.send_t) <= bound ? bound : null;
  }

  // Arrows closer than about 8 px apart on average would hide the bars beneath: they are then
  // drawn as faint lines without heads (fainter the denser), and a note says how many there are.
  drawMessages(c) {
    c.lineWidth = 1;
    const n = this.msgs.length;
    const room = this.plotW() / 8;
    const dense = n > room;
    const ink = dense ? Math.max(0.06, Math.min(0.8, (0.8 * room) / n)) : 0.8;
    for (const m of this.msgs) {
      const ya = this.threadY.get(m.send_thread);
      const yb = this.threadY.get(m.recv_thread);
      if (ya === undefined || yb === undefined) continue;
      const xa = this.X(m.send_t);
      const xb = this.X(m.recv_t);
      c.strokeStyle = m.violation ? '#e00' : `rgba(20,20,20,${ink.toFixed(3)})`;
      c.fillStyle = c.strokeStyle;
      // Latency within the clocks' error bound: dashed, the order of its ends is not certain.
      c.setLineDash(this.uncertainty(m) !== null ? [4, 3] : []);
      c.beginPath();
      c.moveTo(xa, ya);
      c.lineTo(xb, yb);
      c.stroke();
      c.setLineDash([]);
      if (dense && !m.violation) continue;
      const ang = Math.atan2(yb - ya, xb - xa);
      c.beginPath();
      c.moveTo(xb, yb);
      c.lineTo(xb - 7 * Math.cos(ang - 0.4), yb - 7 * Math.sin(ang - 0.4));
      c.lineTo(xb - 7 * Math.cos(ang + 0.4), yb - 7 * Math.sin(ang + 0.4));
      c.fill();
      c.beginPath();
      c.arc(xa, ya, 2, 0, Math.PI * 2);
      c.fill();
    }
    const total = this.msgTotal || n;
    const note = document.querySelector('#msg-note');
    // The server counts exactly up to a limit and estimates beyond: say which.
    const count = this.msgExact === false
      ? `about ${Number(total.toPrecision(2)).toLocaleString()}`
      : total.toLocaleString();
    note.textContent = dense || total > n
      ? `${count} messages in view${total > n ? ` (${n.toLocaleString()} drawn)` : ''}: zoom in for arrows`
      : '';
  }

  /**
   * Highlights a path instance (or a flow): `h` = { t0, t1, messages: [{send_thread, send_t,
   * recv_thread, recv_t}], threads: [ids] }, or null to clear; zooms to it.
   */
  highlight(h) {
    this.marked = h;
    if (!h) { this.draw(); return; }
    const pad = Math.max((h.t1 - h.t0) * 0.2, 2000);
    this.setView(h.t0 - pad, h.t1 + pad);
  }

  drawHighlight(c) {
    const h = this.marked;
    if (!h) return;
    c.fillStyle = 'rgba(255,150,0,.10)';
    for (const th of h.threads || []) {
      const y = this.threadY.get(th);
      if (y !== undefined) c.fillRect(this.X(h.t0), y - STATE_H / 2, this.X(h.t1) - this.X(h.t0), STATE_H);
    }
    c.strokeStyle = '#ff8c00';
    c.fillStyle = '#ff8c00';
    c.lineWidth = 3;
    for (const m of h.messages || []) {
      const ya = this.threadY.get(m.send_thread);
      const yb = this.threadY.get(m.recv_thread);
      if (ya === undefined || yb === undefined) continue;
      c.beginPath();
      c.moveTo(this.X(m.send_t), ya);
      c.lineTo(this.X(m.recv_t), yb);
      c.stroke();
      c.beginPath();
      c.arc(this.X(m.recv_t), yb, 3.5, 0, Math.PI * 2);
      c.fill();
    }
    c.lineWidth = 1;
  }

  // ---- hit testing, hover, click-back -----------------------------------------------------

  hit(x, y) {
    if (x < LABEL_W) return null;
    for (const m of this.msgs) {
      const ya = this.threadY.get(m.send_thread);
      const yb = this.threadY.get(m.recv_thread);
      if (ya === undefined || yb === undefined) continue;
      if (Math.hypot(this.X(m.send_t) - x, ya - y) < 6) return { kind: 'msg', m, end: 'send' };
      if (Math.hypot(this.X(m.recv_t) - x, yb - y) < 6) return { kind: 'msg', m, end: 'recv' };
    }
    const t = this.T(x);
    const px = (this.view.t1 - this.view.t0) / this.plotW();
    for (const l of this.lanes) {
      if (l.kind !== 'drops' || y < l.y || y >= l.y + l.h) continue;
      const r = l.drops.find(([a, b]) => t >= a - 2 * px && t <= Math.max(b, a + 3 * px));
      if (r) return { kind: 'drops', lane: l, range: r, t };
    }
    const lane = this.lanes.find((l) => l.kind !== 'block' && l.kind !== 'drops' && y >= l.y && y < l.y + l.h);
    if (!lane) return null;
    if (lane.kind === 'cpu' || lane.kind === 'net') return { kind: lane.kind, lane, t };
    const tol = (3 * (this.view.t1 - this.view.t0)) / this.plotW();
    let best = null;
    for (const it of this.itemsFor(lane)) {
      if (t >= it[0] - tol && t <= it[1] + tol) {
        const d = t < it[0] ? it[0] - t : t > it[1] ? t - it[1] : 0;
        if (!best || d < best.d) best = { d, it };
      }
    }
    return best ? { kind: lane.kind, lane, item: best.it, t } : null;
  }

  /** The deepest interval of a thread at time t (for clicks on a state bar). */
  deepest(thread, t) {
    const g = this.gantt && this.gantt.get(thread);
    if (!g) return null;
    for (let l = g.levels.length - 1; l >= 0; l--) {
      const it = g.levels[l].find((i) => i[0] <= t && t <= i[1]);
      if (it) return it;
    }
    return null;
  }

  describe(h) {
    if (h.kind === 'drops') {
      const [a, b, n] = h.range;
      const res = Math.min(this.pxRes(), Math.max(1, (b - a) / 100));
      return `⚠ ${n.toLocaleString()} events lost between ${this.fmtT(a, res)} and ${this.fmtT(b, res)}\n`
        + 'the runtime\'s buffer was full: the trace has a gap here';
    }
    if (h.kind === 'msg') {
      const m = h.m;
      const mres = Math.min(this.pxRes(), Math.max(1, Math.abs(m.recv_t - m.send_t) / 100));
      return `message ${m.id}: ${m.bytes} bytes\nsent ${this.fmtT(m.send_t, mres)}, received ${this.fmtT(m.recv_t, mres)}\n` +
        `latency ${fmtDur(m.recv_t - m.send_t)}${m.violation ? ' — received before sent!' : ''}\n` +
        (this.uncertainty(m) !== null
          ? `within the clocks' error bound (±${fmtDur(this.uncertainty(m))}): order uncertain\n` : '') +
        `click: source of the ${h.end === 'send' ? 'send' : 'receive'} call`;
    }
    if (h.kind === 'cpu' || h.kind === 'net') {
      const host = this.hosts.get(h.lane.host);
      const lines = [h.lane.label, this.fmtT(h.t, this.pxRes())];
      for (const s of (host ? host.series : [])) {
        if (h.kind === 'cpu' ? s.name !== 'cpu' : !s.name.startsWith('net')) continue;
        const p = nearest(s.points, h.t);
        if (p) lines.push(`${s.name}: ${s.unit === 'B/s' ? `${fmtBytes(p[1])}/s` : `${p[1].toFixed(1)} ${s.unit}`}`);
      }
      return lines.join('\n');
    }
    const [s, e, cat, n, cov] = h.item;
    // Start shown to a resolution fitting both the item and the zoom: a 3 µs event at
    // +1.4 ms reads "+1.40012 ms + 3.000 µs", not "+1.400 ms".
    const res = Math.min(this.pxRes(), Math.max(1, (e - s) / 100));
    const span = `${this.fmtT(s, res)} + ${fmtDur(e - s)}`;
    const many = n > 1 ? `\n${n} items, ${fmtDur(cov)} covered (zoom in for detail)` : '';
    if (h.kind === 'state') return `${h.lane.process.label}\n${this.rows.states[cat] || 'other'}${n > 1 ? ' (mostly)' : ''}\n${span}${many}`;
    if (h.kind === 'sched') return `on CPU ${cat}\n${span}${many}`;
    if (h.kind === 'irq') {
      return `${irqName(cat)} at ${this.fmtT(s, this.pxRes())}${n > 1 ? ` (${n} interrupts or softirqs; zoom in)` : ''}`;
    }
    const sen = this.ctx.sensors[cat] || {};
    return `${sen.name || '?'}${n > 1 ? ' (longest)' : ''}\n${sen.function ? `${sen.function}() ` : ''}${sen.file || ''}${sen.line ? `:${sen.line}` : ''}\n${span}${many}\nclick: show source`;
  }

  clickAt(x, y) {
    const h = this.hit(x, y);
    if (!h) return;
    if (h.kind === 'level') this.ctx.openSource(h.item[2]);
    else if (h.kind === 'state') {
      const it = this.deepest(h.lane.thread, h.t);
      if (it) this.ctx.openSource(it[2]);
    } else if (h.kind === 'msg') {
      const s = h.end === 'send' ? h.m.send_sensor : h.m.recv_sensor;
      if (s !== null && s !== undefined) this.ctx.openSource(s);
    } else if (h.kind !== 'cpu' && h.kind !== 'net') {
      this.cursor = h.t;
      this.draw();
    }
  }

  /** Client coordinates of the middle of the first visible single interval of a sensor. */
  locate(sensorName) {
    const idx = this.ctx.sensors.findIndex((s) => s.name === sensorName);
    const r = this.chart.getBoundingClientRect();
    for (const lane of this.lanes) {
      if (lane.kind !== 'level') continue;
      for (const it of this.itemsFor(lane)) {
        if (it[2] !== idx || it[3] !== 1) continue;
        const a = Math.max(this.X(it[0]), LABEL_W);
        const b = Math.min(this.X(it[1]), LABEL_W + this.plotW());
        if (b - a < 4) continue;
        return { x: r.left + (a + b) / 2, y: r.top + lane.y + lane.h / 2 };
      }
    }
    return null;
  }

  // ---- interaction ------------------------------------------------------------------------

  bind() {
    const pos = (ev, el) => {
      const r = el.getBoundingClientRect();
      return { x: ev.clientX - r.left, y: ev.clientY - r.top };
    };
    const down = (ev, onRuler) => {
      if (!this.rows || ev.button !== 0) return;
      const { x, y } = pos(ev, onRuler ? this.ruler : this.chart);
      if (x < LABEL_W) return;
      ev.preventDefault();
      const nearCursor = Math.abs(x - this.X(this.cursor)) <= 5;
      const mode = nearCursor ? 'cursor' : onRuler || ev.shiftKey ? 'box' : 'pan';
      this.drag = { mode, x, y, cx: x, onRuler, view: { ...this.view }, moved: false };
    };
    this.chart.addEventListener('mousedown', (ev) => down(ev, false));
    this.ruler.addEventListener('mousedown', (ev) => down(ev, true));
    window.addEventListener('mousemove', (ev) => {
      const d = this.drag;
      if (!d) return this.hover(ev);
      const { x } = pos(ev, d.onRuler ? this.ruler : this.chart);
      if (Math.abs(x - d.x) > 3) d.moved = true;
      d.cx = x;
      if (d.mode === 'pan') {
        const dt = ((x - d.x) / this.plotW()) * (d.view.t1 - d.view.t0);
        this.setView(d.view.t0 - dt, d.view.t1 - dt);
      } else if (d.mode === 'cursor') {
        this.setCursor(this.T(Math.max(LABEL_W, Math.min(x, LABEL_W + this.plotW()))));
      } else this.draw();
    });
    window.addEventListener('mouseup', (ev) => {
      const d = this.drag;
      if (!d) return;
      this.drag = null;
      const { x, y } = pos(ev, d.onRuler ? this.ruler : this.chart);
      if (d.mode === 'box' && d.moved) {
        const a = this.T(Math.min(d.x, x));
        const b = this.T(Math.max(d.x, x));
        this.setView(a, b);
      } else if (!d.moved && d.mode !== 'cursor') {
        if (d.onRuler) this.setCursor(this.T(x));
        else this.clickAt(x, y);
      }
      this.draw();
    });
    this.chart.addEventListener('wheel', (ev) => {
      if (!this.rows) return;
      const { x } = pos(ev, this.chart);
      if (x < LABEL_W) return; // the label column scrolls vertically
      ev.preventDefault();
      const w = this.view.t1 - this.view.t0;
      if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) {
        const dt = ((ev.shiftKey ? ev.deltaY : ev.deltaX) / this.plotW()) * w;
        this.setView(this.view.t0 + dt, this.view.t1 + dt);
      } else this.zoomAt(this.T(x), Math.exp(ev.deltaY * 0.0015));
    }, { passive: false });
    this.chart.addEventListener('mouseleave', () => { this.tip.hidden = true; });
    document.querySelector('#fit').onclick = () => this.setView(this.bounds.t0, this.bounds.t1);
    document.querySelector('#zoom-in').onclick = () => this.zoomAt(this.center(), 0.5);
    document.querySelector('#zoom-out').onclick = () => this.zoomAt(this.center(), 2);
    document.querySelector('#play').onclick = () => this.togglePlay();
    document.querySelector('#faster').onclick = () => this.speed(1);
    document.querySelector('#slower').onclick = () => this.speed(-1);
    window.addEventListener('keydown', (ev) => {
      if (!this.rows || ev.target.closest('input, textarea, select')) return;
      if (!document.querySelector('#timeline').classList.contains('on')) return;
      const w = this.view.t1 - this.view.t0;
      const keys = {
        ' ': () => this.togglePlay(), '+': () => this.zoomAt(this.center(), 0.5),
        '=': () => this.zoomAt(this.center(), 0.5), '-': () => this.zoomAt(this.center(), 2),
        '0': () => this.setView(this.bounds.t0, this.bounds.t1),
        '[': () => this.speed(-1), ']': () => this.speed(1),
        ArrowLeft: () => this.setView(this.view.t0 - w / 5, this.view.t1 - w / 5),
        ArrowRight: () => this.setView(this.view.t0 + w / 5, this.view.t1 + w / 5),
      };
      if (keys[ev.key]) {
        ev.preventDefault();
        keys[ev.key]();
      }
    });
  }

  center() {
    const xc = this.X(this.cursor);
    return xc > LABEL_W && xc < LABEL_W + this.plotW() ? this.cursor : (this.view.t0 + this.view.t1) / 2;
  }

  zoomAt(t, f) {
    const a = t - (t - this.view.t0) * f;
    const b = t + (this.view.t1 - t) * f;
    this.setView(a, b);
  }

  hover(ev) {
    if (!this.rows) return;
    const r = this.chart.getBoundingClientRect();
    const x = ev.clientX - r.left;
    const y = ev.clientY - r.top;
    const inside = x >= 0 && y >= 0 && x <= r.width && y <= r.height && ev.target === this.chart;
    const h = inside ? this.hit(x, y) : null;
    if (!h) {
      this.tip.hidden = true;
      this.chart.style.cursor = inside && Math.abs(x - this.X(this.cursor)) <= 5 ? 'ew-resize' : 'default';
      return;
    }
    this.chart.style.cursor = h.kind === 'level' || h.kind === 'msg' || h.kind === 'state' ? 'pointer' : 'default';
    this.tip.textContent = this.describe(h);
    this.tip.hidden = false;
    const tw = this.tip.offsetWidth;
    this.tip.style.left = `${Math.min(ev.clientX + 14, window.innerWidth - tw - 8)}px`;
    this.tip.style.top = `${ev.clientY + 16}px`;
  }

  // ---- animation ----------------------------------------------------------------------------

  setCursor(t) {
    this.cursor = Math.max(this.bounds.t0, Math.min(t, this.bounds.t1));
    this.draw();
  }

  rate() {
    return ((this.view.t1 - this.view.t0) / 10) * 2 ** this.speedExp;
  }

  speed(d) {
    this.speedExp = Math.max(-8, Math.min(8, this.speedExp + d));
    const f = 2 ** this.speedExp;
    document.querySelector('#speed').textContent = `${f >= 1 ? f : `1/${1 / f}`}×`;
    document.querySelector('#speed').title = `${fmtDur(this.rate())} of session time per second`;
  }

  togglePlay() {
    if (this.playing) return this.stop();
    if (this.cursor >= this.bounds.t1) this.cursor = this.bounds.t0;
    if (this.X(this.cursor) < LABEL_W || this.X(this.cursor) > LABEL_W + this.plotW()) this.cursor = this.view.t0;
    this.playing = true;
    document.querySelector('#play').innerHTML = '&#10074;&#10074;';
    let last = performance.now();
    const tick = (now) => {
      if (!this.playing) return;
      const dt = Math.min(0.1, (now - last) / 1000);
      last = now;
      this.cursor += dt * this.rate();
      if (this.cursor >= this.bounds.t1) {
        this.cursor = this.bounds.t1;
        this.stop();
      }
      const w = this.view.t1 - this.view.t0;
      if (this.cursor > this.view.t1) this.setView(this.cursor - w * 0.1, this.cursor + w * 0.9);
      else this.draw();
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  }

  stop() {
    this.playing = false;
    const b = document.querySelector('#play');
    if (b) b.innerHTML = '&#9654;';
  }
}

// The network chart's scale label: its top in bytes/s and the interfaces that carried
// traffic ("lo, eth0"), or that none did.
function netScale(series, max) {
  const names = [...new Set(series.flatMap((s) => s.interfaces || []))];
  if (!names.length) return 'network: no traffic';
  return `${fmtBytes(max)}/s · ${names.join(', ')}`;
}

function clipText(c, s, w) {
  if (c.measureText(s).width <= w) return s;
  let lo = 0;
  let hi = s.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (c.measureText(`${s.slice(0, mid)}…`).width <= w) lo = mid;
    else hi = mid - 1;
  }
  return lo ? `${s.slice(0, lo)}…` : '';
}

function nearest(points, t) {
  let best = null;
  for (const p of points) if (!best || Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
  return best;
}
