// p5 web: the Compare tab. Two analysis runs (of one session or of two) side by side: patterns
// matched by signature with every node's latency on both sides and the change of its own
// delay — the node a delay was added to stands out; and two sessions' statistics diffed
// (per sensor, per thread state, messages). Opens from `#compare=SID:RUN,SID:RUN` too.
import { api, esc, fmtDur } from './util.js';

const PATTERN_ALGOS = new Set(['nesting', 'linking', 'convolution', 'truth']);
const signed = (ns) => (ns === null || ns === undefined ? '–' : `${ns > 0 ? '+' : ns < 0 ? '−' : '±'}${fmtDur(Math.abs(ns))}`);

export class CompareView {
  constructor(ctx) {
    this.ctx = ctx;
    this.a = document.querySelector('#cmp-a');
    this.b = document.querySelector('#cmp-b');
    document.querySelector('#cmp-go').onclick = () => this.compare();
    this.ready = false;
  }

  /** Fills both pickers with every session's pattern runs (once); compares `this.want`
   * (`[SID:RUN, SID:RUN]`, from the URL) when set. */
  async load() {
    const want = this.want;
    this.want = null;
    if (this.loading) return;
    this.loading = true;
    if (!this.ready) {
      const sessions = await api('/sessions');
      const opts = [];
      for (const s of sessions) {
        const r = await api(`/sessions/${s.id}/runs`);
        for (const x of r.runs.filter((y) => PATTERN_ALGOS.has(y.algorithm))) {
          opts.push(`<option value="${s.id}:${x.id}">${esc(s.name)} · run ${x.id} (${x.algorithm})</option>`);
        }
      }
      const html = opts.join('');
      this.a.innerHTML = html;
      this.b.innerHTML = html;
      this.ready = true;
      if (this.a.options.length > 1) this.b.selectedIndex = 1;
    }
    if (want) {
      this.a.value = want[0];
      this.b.value = want[1];
    }
    if (!this.a.options.length) {
      this.loading = false;
      document.querySelector('#cmp-note').textContent =
        'No path analyses stored: run p5 analyze nesting|linking --db … on two sessions (or twice) first.';
      return;
    }
    this.loading = false;
    if (want || !this.shown) await this.compare();
  }

  async compare() {
    const [a, b] = [this.a.value, this.b.value];
    if (!a || !b) return;
    this.shown = true;
    location.hash = `compare=${a},${b}`;
    const [p, s] = await Promise.all([
      api(`/compare/paths?a=${a}&b=${b}`),
      api(`/compare/stats?a=${a.split(':')[0]}&b=${b.split(':')[0]}`),
    ]);
    this.renderPaths(p);
    this.renderStats(s);
    document.body.dataset.compared = `${a},${b}`;
  }

  renderPaths(p) {
    const big = p.largest;
    document.querySelector('#cmp-note').innerHTML = big && big.own_delta_ns
      ? `Largest change of a node's own delay: <b>${esc(big.node)}</b> ${signed(big.own_delta_ns)} in <code>${esc(big.signature)}</code>`
      : `${p.matched.length} patterns matched; no node's own delay changed`;
    const rows = p.matched.map((m, i) => {
      const top = Math.max(1, ...m.nodes.map((n) => Math.abs(n.own_delta_ns || 0)));
      const nodes = m.nodes.map((n) => `<tr class="node"><td class="l">${'&nbsp;&nbsp;'.repeat(n.depth + 1)}${esc(n.node)}</td>
        <td>${n.a_latency_ns === null ? '–' : fmtDur(n.a_latency_ns)}</td><td>${n.b_latency_ns === null ? '–' : fmtDur(n.b_latency_ns)}</td>
        <td>${signed(n.delta_latency_ns)}</td><td>${signed(n.delta_call_delay_ns)}</td>
        <td class="l"><span class="delta"><i class="${(n.own_delta_ns || 0) >= 0 ? 'up' : 'down'}" style="width:${
          (50 * Math.abs(n.own_delta_ns || 0) / top).toFixed(1)}%"></i></span>${signed(n.own_delta_ns)}</td></tr>`).join('');
      return `<tbody class="pat" data-i="${i}"><tr class="head"><td class="l"><b>${esc(m.signature)}</b></td>
        <td>${fmtDur(m.a.mean_total_ns)} <small>×${m.a.count}</small></td><td>${fmtDur(m.b.mean_total_ns)} <small>×${m.b.count}</small></td>
        <td>${signed(m.delta_mean_total_ns)}</td><td></td><td></td></tr>${nodes}</tbody>`;
    }).join('');
    const only = (l, side) => (l.length
      ? `<p><small>Only in ${side}: ${l.map((x) => `<code>${esc(x.signature)}</code>`).join(', ')}</small></p>` : '');
    document.querySelector('#cmp-paths').innerHTML = `<table id="cmp-table"><thead><tr><th>pattern / node</th>
      <th>A latency</th><th>B latency</th><th>Δ latency</th><th>Δ call delay</th><th>Δ own delay</th></tr></thead>${rows}</table>
      ${only(p.only_a, 'A')}${only(p.only_b, 'B')}`;
  }

  renderStats(s) {
    const top = s.sensors.slice(0, 40).map((x) => `<tr><td class="l">${esc(x.name)}</td>
      <td>${x.a.count}</td><td>${x.b.count}</td><td>${fmtDur(x.a.total)}</td><td>${fmtDur(x.b.total)}</td>
      <td>${signed(x.delta_total)}</td><td>${x.delta_mean === null ? '–' : signed(Math.round(x.delta_mean))}</td></tr>`).join('');
    const states = s.states.map((x) => `<tr><td class="l">${esc(x.state)}</td><td>${fmtDur(x.a)}</td>
      <td>${fmtDur(x.b)}</td><td>${signed(x.delta)}</td></tr>`).join('');
    const m = s.messages;
    const lat = (v) => (v.mean_latency === null ? '–' : fmtDur(v.mean_latency));
    document.querySelector('#cmp-stats').innerHTML = `<h3>Statistics: ${esc(s.a.name)} (A) against ${esc(s.b.name)} (B)</h3>
      <p>messages: ${m.a.count.toLocaleString()} → ${m.b.count.toLocaleString()}, mean latency ${lat(m.a)} → ${lat(m.b)}</p>
      <div class="grid"><div class="card wide">${top ? `<table id="cmp-sensors"><thead><tr><th>sensor</th><th>A calls</th><th>B calls</th>
      <th>A total</th><th>B total</th><th>Δ total</th><th>Δ mean</th></tr></thead><tbody>${top}</tbody></table>`
    : '<p class="empty"><small>No function calls timed in either session (programs recorded with --preload have only their socket calls: see the states).</small></p>'}</div>
      <div class="card"><table><thead><tr><th>state</th><th>A</th><th>B</th><th>Δ</th></tr></thead><tbody>${states}</tbody></table></div></div>`;
  }
}
