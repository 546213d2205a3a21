// p5 web: the Paths tab. The analysis runs of the session (`p5 analyze … --db`), a run's path
// patterns sortable by count, expectation, expectation/count, expectation/√count and total
// time; a chosen pattern as call tree, timeline, per-node latency histograms and the run's
// graph; its instances, each of which opens on the Gantt (timeline.showInstance).
import { api, esc, fmtDur } from './util.js';
import { callTree, drawGraph, drawHist, drawTimeline } from './pathdraw.js';

const SORT_LABELS = {
  expectation: 'expectation', count: 'count', expectation_per_count: 'expectation / count',
  expectation_per_sqrt_count: 'expectation / √count', total: 'total time',
};
const PATTERN_ALGOS = new Set(['nesting', 'linking', 'convolution', 'truth']);

export class PathsView {
  constructor(ctx) {
    this.ctx = ctx;
    this.el = document.querySelector('#paths');
    this.runSel = document.querySelector('#path-run');
    this.sortSel = document.querySelector('#path-sort');
    this.filter = document.querySelector('#path-filter');
    this.table = document.querySelector('#path-table');
    this.detail = document.querySelector('#path-detail');
    this.loaded = null;
    this.runSel.onchange = () => this.list();
    this.sortSel.onchange = () => this.list();
    let timer = null;
    this.filter.oninput = () => { clearTimeout(timer); timer = setTimeout(() => this.list(), 200); };
  }

  invalidate() { this.loaded = null; }

  /** Loads the runs of the session (once per session) and lists the chosen run's patterns. */
  async load() {
    if (this.loaded === this.ctx.sid) return;
    this.loaded = this.ctx.sid;
    const r = await api(`/sessions/${this.ctx.sid}/runs`);
    this.runs = r.runs.filter((x) => PATTERN_ALGOS.has(x.algorithm));
    this.sortSel.innerHTML = r.sorts.map((s) => `<option value="${s}">${SORT_LABELS[s] || s}</option>`).join('');
    this.runSel.innerHTML = this.runs.map((x) =>
      `<option value="${x.id}">run ${x.id}: ${esc(x.algorithm)}${x.stale ? ' (older merge)' : ''}</option>`).join('');
    this.detail.hidden = true;
    if (!this.runs.length) {
      this.table.innerHTML = '';
      document.querySelector('#path-note').textContent =
        'No path analyses in this session: run p5 analyze nesting|linking|convolution --db … --session … first.';
      return;
    }
    // The newest run that found instances (convolution finds edges, not instances).
    const withInstances = this.runs.filter((x) => x.algorithm !== 'convolution');
    const last = (withInstances.length ? withInstances : this.runs).slice(-1)[0];
    this.runSel.value = last.id;
    const rank = last.params && last.params.rank;
    this.sortSel.value = r.sorts.includes(rank) ? rank : 'expectation';
    await this.list();
  }

  /** Fetches and renders the pattern list of the chosen run. */
  async list() {
    const run = Number(this.runSel.value);
    const q = encodeURIComponent(this.filter.value.trim());
    const t = performance.now();
    const r = await api(`/sessions/${this.ctx.sid}/runs/${run}/paths?sort=${this.sortSel.value}&limit=10000&q=${q}`);
    this.table.querySelector('thead').innerHTML = `<tr><th>rank</th><th>signature</th><th>count</th>
      <th>expectation</th><th>E/count</th><th>E/√count</th><th>mean</th><th>p90</th><th>total time</th></tr>`;
    this.patterns = r.patterns;
    this.renderRows();
    const body = this.table.querySelector('tbody');
    body.onclick = (ev) => {
      const tr = ev.target.closest('tr[data-id]');
      if (tr) this.open(Number(tr.dataset.id));
    };
    const ms = performance.now() - t;
    this.el.dataset.listMs = ms.toFixed(1);
    document.querySelector('#path-note').textContent =
      `${r.total.toLocaleString()} patterns of a ${r.run.algorithm} run over ${r.run.messages.toLocaleString()} messages, sorted by ${SORT_LABELS[r.sort]}`;
    if (r.patterns.length) await this.open(r.patterns[0].id);
    else this.detail.hidden = true;
  }

  /**
   * Draws only the rows in view (plus a margin) between two spacers, so a list of ten
   * thousand patterns costs what forty rows cost; scrolling draws the next ones.
   */
  renderRows() {
    const wrap = this.table.parentNode;
    const rowH = 21;
    const list = this.patterns || [];
    const first = Math.max(0, Math.floor(wrap.scrollTop / rowH) - 20);
    const last = Math.min(list.length, first + Math.ceil((wrap.clientHeight || 400) / rowH) + 40);
    const row = (p) => `<tr data-id="${p.id}"${p.id === this.openId ? ' class="on"' : ''}><td>${p.rank}</td>
      <td class="sig">${esc(p.signature)}</td><td>${p.count.toLocaleString()}</td><td>${p.expectation.toFixed(2)}</td>
      <td>${p.expectation_per_count.toFixed(3)}</td><td>${p.expectation_per_sqrt_count.toFixed(2)}</td>
      <td>${fmtDur(p.mean_total_ns)}</td><td>${fmtDur(p.p90_total_ns)}</td><td>${fmtDur(p.total_ns)}</td></tr>`;
    const pad = (n) => (n > 0 ? `<tr class="spacer" style="height:${n * rowH}px"><td colspan="9"></td></tr>` : '');
    this.table.querySelector('tbody').innerHTML =
      pad(first) + list.slice(first, last).map(row).join('') + pad(list.length - last);
    if (!wrap.onscroll) wrap.onscroll = () => requestAnimationFrame(() => this.renderRows());
  }

  /** Shows one pattern: tree, timeline, histograms, graph, instances. */
  async open(id) {
    const sid = this.ctx.sid;
    const run = Number(this.runSel.value);
    this.openId = id;
    for (const tr of this.table.querySelectorAll('tbody tr[data-id]')) tr.classList.toggle('on', Number(tr.dataset.id) === id);
    const [d, g] = await Promise.all([
      api(`/sessions/${sid}/runs/${run}/paths/${id}?limit=200`),
      this.graphOf(run),
    ]);
    this.current = d;
    this.detail.hidden = false;
    document.querySelector('#path-title').textContent = d.pattern.signature;
    callTree(document.querySelector('#path-tree'), d.pattern, d.nodes);
    drawTimeline(document.querySelector('#path-timeline'), d.nodes);
    const hists = document.querySelector('#path-hists');
    hists.innerHTML = '';
    for (const n of d.nodes.filter((x) => x.hist.length)) {
      const cv = document.createElement('canvas');
      cv.width = 220;
      cv.height = 90;
      hists.appendChild(cv);
      drawHist(cv, n.hist, `${n.node}: mean ${fmtDur(n.latency_ns)}`);
    }
    drawGraph(document.querySelector('#path-graph'), g);
    const spikes = document.querySelector('#path-spikes');
    spikes.hidden = !g.spikes;
    if (g.spikes) {
      spikes.innerHTML = `<table><thead><tr><th>from</th><th>to</th><th>lag</th><th>height</th><th>messages</th>
        <th>verdict</th></tr></thead><tbody>${g.spikes.map((x) => `<tr><td>${esc(x.from || '')}</td><td>${esc(x.to)}</td>
        <td>${fmtDur(x.lag_ns)}</td><td>${x.height_sd.toFixed(1)} sd</td><td>${x.messages.toLocaleString()}</td>
        <td>${esc(x.verdict)}</td></tr>`).join('')}</tbody></table>`;
    }
    const inst = document.querySelector('#path-instances tbody');
    inst.innerHTML = d.instances.items.map((i) => `<tr data-id="${i.id}"><td>${i.id}</td>
      <td>${fmtDur(i.t_start - this.ctx.rows.t_min)}</td><td>${fmtDur(i.t_end - i.t_start)}</td>
      <td>${i.prob.toFixed(3)}</td></tr>`).join('');
    inst.onclick = (ev) => {
      const tr = ev.target.closest('tr');
      if (tr) this.ctx.showInstance(run, Number(tr.dataset.id));
    };
    document.body.dataset.pathOpen = String(id);
  }

  async graphOf(run) {
    const key = `${this.ctx.sid}:${run}`;
    if (this.graphKey !== key) {
      this.graph = await api(`/sessions/${this.ctx.sid}/runs/${run}/graph`);
      this.graphKey = key;
    }
    return this.graph;
  }
}
