// p5 web: the Flows tab. A `p5 analyze flows` run: suspect-score bars (most unusual flows
// first), a flow's segments (shown on the Gantt) and the call paths it covered; a `diff` run:
// the root-cause lists of both sides, ranked by time or by length. Every function of a path
// opens its source.
import { api, esc, fmtBytes, fmtDur } from './util.js';

export class FlowsView {
  constructor(ctx) {
    this.ctx = ctx;
    this.runSel = document.querySelector('#flow-run');
    this.runSel.onchange = () => this.show();
    this.rankSel = document.querySelector('#flow-rank');
    this.rankSel.onchange = () => this.show();
    this.loaded = null;
    document.querySelector('#flows').addEventListener('click', (ev) => {
      const a = ev.target.closest('a[data-sensor]');
      if (!a) return;
      ev.preventDefault();
      this.ctx.openSource(Number(a.dataset.sensor));
    });
  }

  invalidate() { this.loaded = null; }

  async load() {
    if (this.loaded === this.ctx.sid) return;
    this.loaded = this.ctx.sid;
    const r = await api(`/sessions/${this.ctx.sid}/runs`);
    const runs = r.runs.filter((x) => x.algorithm === 'flows' || x.algorithm === 'diff');
    this.runSel.innerHTML = runs.map((x) => `<option value="${x.id}">run ${x.id}: ${x.algorithm}</option>`).join('');
    if (!runs.length) {
      document.querySelector('#flow-note').textContent =
        'No flow analyses in this session: run p5 analyze flows (or diff) --db … first.';
      document.querySelector('#flow-body').innerHTML = '';
      return;
    }
    this.runSel.value = runs[runs.length - 1].id;
    await this.show();
  }

  async show() {
    const run = Number(this.runSel.value);
    const r = await api(`/sessions/${this.ctx.sid}/runs/${run}/flows?limit=200`);
    this.rankSel.hidden = r.kind !== 'diff';
    if (r.kind === 'flows') this.showFlows(run, r);
    else this.showDiff(r);
  }

  showFlows(run, r) {
    document.querySelector('#flow-note').textContent =
      `${r.total.toLocaleString()} flows, most suspect first (score: distance to the common behaviour)`;
    const top = Math.max(1e-12, ...r.flows.map((f) => f.suspect_score || 0));
    const rows = r.flows.map((f) => `<tr data-id="${f.id}"><td>${f.suspect_rank ?? '–'}</td>
      <td class="l">${esc(f.label)}${f.known ? ' <small>(known normal)</small>' : ''}</td>
      <td class="l"><span class="score"><i style="width:${(100 * (f.suspect_score || 0) / top).toFixed(1)}%"></i></span>
      ${f.suspect_score === null ? '–' : f.suspect_score.toFixed(4)}</td>
      <td>${fmtDur(f.t_end - f.t_start)}</td><td>${f.events}</td><td>${f.messages}</td><td>${fmtBytes(f.bytes)}</td>
      <td class="l"><small>${esc(f.start)}</small></td></tr>`).join('');
    document.querySelector('#flow-body').innerHTML = `<div class="tablewrap"><table id="flow-table"><thead><tr>
      <th>rank</th><th>thread</th><th>suspect score</th><th>duration</th><th>events</th><th>messages</th><th>bytes</th>
      <th>start</th></tr></thead><tbody>${rows}</tbody></table></div><div id="flow-detail"></div>`;
    document.querySelector('#flow-table tbody').onclick = (ev) => {
      const tr = ev.target.closest('tr');
      if (tr) this.openFlow(run, Number(tr.dataset.id), tr);
    };
  }

  async openFlow(run, id, tr) {
    for (const x of tr.parentNode.children) x.classList.toggle('on', x === tr);
    const d = await api(`/sessions/${this.ctx.sid}/runs/${run}/flows/${id}`);
    const paths = d.paths.map((p) => `<tr><td class="l">${calls(p.calls)}</td><td>${fmtDur(p.time_ns)}</td>
      <td>${fmtBytes(p.bytes)}</td></tr>`).join('');
    const el = document.querySelector('#flow-detail');
    el.innerHTML = `<h3>Flow ${d.flow.id}: ${esc(d.flow.label)} · ${d.segments.length} segments
      <button id="flow-gantt">Show on the timeline</button></h3>
      <table><thead><tr><th>call path (click a function: source)</th><th>time innermost</th><th>bytes</th></tr></thead>
      <tbody>${paths}</tbody></table>`;
    document.querySelector('#flow-gantt').onclick = () => this.ctx.showFlow(d);
    document.body.dataset.flowOpen = String(id);
  }

  showDiff(r) {
    const by = this.rankSel.value;
    const key = by === 'len' ? 'rank_len' : 'rank_time';
    const list = (side) => side.slice().sort((a, b) => a[key] - b[key]).map((d) => `<tr>
      <td>${d.rank_time}</td><td>${d.rank_len}</td><td class="l">${calls(d.calls)}</td>
      <td>${d.len}</td><td>${fmtDur(d.first_t - this.ctx.rows.t_min)}</td></tr>`).join('');
    const head = '<thead><tr><th>by time</th><th>by length</th><th>path</th><th>calls</th><th>first at</th></tr></thead>';
    document.querySelector('#flow-note').textContent =
      'Root-cause candidates: call paths only one side has, reduced; rank by the earliest or the shortest';
    document.querySelector('#flow-body').innerHTML = `<div class="grid">
      <div class="card"><h3>Only in the anomalous side (Δa)</h3><table id="diff-a">${head}<tbody>${list(r.anomalous)}</tbody></table></div>
      <div class="card"><h3>Only in the normal side (Δn)</h3><table id="diff-n">${head}<tbody>${list(r.normal)}</tbody></table></div></div>`;
  }
}

/** A path's functions as source links (`program: a → b → c`). */
function calls(c) {
  const fns = c.functions.map((f) => (f.sensor === null
    ? esc(f.name) : `<a href="#" data-sensor="${f.sensor}">${esc(f.name)}</a>`)).join(' → ');
  return `${c.program ? `<small>${esc(c.program)}:</small> ` : ''}${fns}`;
}
