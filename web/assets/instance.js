// p5 web: one path instance on the Gantt. Highlights the instance's messages and zooms to it,
// and lists, per thread it passed through, that thread's time split into on CPU, waiting for
// a CPU and blocked, its states, and the functions with the most self time (click: source).
import { api, esc, fmtDur } from './util.js';

const PARTS = [
  ['on_cpu_ns', 'on CPU', '#3f8f4f'],
  ['runnable_ns', 'waiting for a CPU', '#f2cf5b'],
  ['blocked_ns', 'blocked', '#9aa5b1'],
  ['unknown_ns', 'not recorded', '#eeeeee'],
];

export class InstancePanel {
  constructor(ctx, timeline) {
    this.ctx = ctx;
    this.timeline = timeline;
    this.el = document.querySelector('#instance');
    document.querySelector('#inst-close').onclick = () => this.close();
  }

  close() {
    this.el.hidden = true;
    this.timeline.highlight(null);
    delete document.body.dataset.instance;
  }

  /** Shows instance `iid` of run `run` of the current session. */
  async show(run, iid) {
    const d = await api(`/sessions/${this.ctx.sid}/runs/${run}/instances/${iid}`);
    this.timeline.highlight({
      t0: d.t_start, t1: d.t_end, messages: d.messages, threads: d.threads.map((t) => t.thread),
    });
    document.querySelector('#inst-title').textContent =
      `Instance ${d.id} of pattern ${d.pattern} (run ${run}): ${fmtDur(d.t_end - d.t_start)}, ${d.messages.length} messages${
        d.prob < 1 ? `, probability ${d.prob.toFixed(3)}` : ''}${d.missing ? `, ${d.missing} not in this merge` : ''}`;
    const rows = d.threads.map((t) => {
      const span = Math.max(1, t.t1 - t.t0);
      const bar = PARTS.filter(([k]) => t[k]).map(([k, name, col]) =>
        `<i style="width:${(100 * t[k] / span).toFixed(2)}%;background:${col}" title="${name} ${fmtDur(t[k])}"></i>`).join('');
      const parts = PARTS.filter(([k]) => t[k] !== null && t[k] > 0)
        .map(([k, name]) => `${name} ${fmtDur(t[k])}`).join(' · ');
      const top = t.top.map((f) =>
        `<a href="#" data-sensor="${f.sensor}">${esc(f.name || `sensor ${f.sensor}`)}</a> ${fmtDur(f.self_ns)}`).join(', ');
      const node = t.nodes.length ? ` <small>as ${t.nodes.map(esc).join(', ')}</small>` : '';
      return `<tr><td>${esc(t.label)}${node}</td><td>${fmtDur(span)}</td><td class="split"><span class="bar">${bar}</span></td>
        <td class="l">${parts}${t.sched ? '' : ' <small>(no scheduling data)</small>'}</td><td class="l">${top}</td></tr>`;
    }).join('');
    const body = document.querySelector('#inst-table tbody');
    body.innerHTML = rows;
    body.onclick = (ev) => {
      const a = ev.target.closest('a[data-sensor]');
      if (!a) return;
      ev.preventDefault();
      this.ctx.openSource(Number(a.dataset.sensor));
    };
    this.el.hidden = false;
    document.body.dataset.instance = String(d.id);
  }
}
