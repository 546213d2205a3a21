// p5 web: page wiring. Loads the session list, builds the timeline, statistics and source
// panel, and keeps the URL hash (#session=ID) in step. Shared helpers are in util.js.
import { Timeline } from './gantt.js';
import { StatsView } from './stats.js';
import { SourcePanel } from './source.js';
import { PathsView } from './paths.js';
import { InstancePanel } from './instance.js';
import { FlowsView } from './flows.js';
import { CompareView } from './compare.js';
import { api, esc } from './util.js';

const ctx = {
  sid: null, rows: null, sensors: [], config: null,
  /** Opens the source panel for a sensor index (click-back). */
  openSource: (sensor) => source.open(sensor),
  /** Shows a path instance on the timeline. */
  showInstance: (run, id) => { showTab('timeline'); return instance.show(run, id); },
  /** Shows a flow's segments on the timeline. */
  showFlow: (d) => {
    showTab('timeline');
    timeline.highlight({ t0: d.flow.t_start, t1: d.flow.t_end, threads: d.segments.map((s) => s.thread) });
  },
};
const timeline = new Timeline(ctx);
const stats = new StatsView(ctx);
const source = new SourcePanel(ctx);
const paths = new PathsView(ctx);
const instance = new InstancePanel(ctx, timeline);
const flows = new FlowsView(ctx);
const compare = new CompareView(ctx);
window.p5 = { ctx, timeline, stats, source, paths, instance, flows, compare };

async function loadSession(sid) {
  ctx.sid = sid;
  if (!location.hash.includes('compare=')) location.hash = `session=${sid}`;
  const [rows, sensors] = await Promise.all([
    api(`/sessions/${sid}/rows`), api(`/sessions/${sid}/sensors`)]);
  ctx.rows = rows;
  ctx.sensors = sensors;
  source.reset();
  instance.close();
  timeline.setSession(rows);
  stats.invalidate();
  paths.invalidate();
  flows.invalidate();
  const on = document.querySelector('.tab.on');
  if (on && on.id !== 'timeline') showTab(on.id);
}

function showTab(name) {
  for (const b of document.querySelectorAll('nav button')) b.classList.toggle('on', b.dataset.tab === name);
  for (const s of document.querySelectorAll('.tab')) s.classList.toggle('on', s.id === name);
  const fail = (e) => { document.querySelector('#legend').textContent = `error: ${e.message}`; console.error(e); };
  if (name === 'stats') stats.load();
  else if (name === 'paths') paths.load().catch(fail);
  else if (name === 'flows') flows.load().catch(fail);
  else if (name === 'compare') compare.load().catch(fail);
  else timeline.resize();
}

async function main() {
  for (const b of document.querySelectorAll('nav button')) b.onclick = () => showTab(b.dataset.tab);
  ctx.config = await api('/config');
  const sessions = await api('/sessions');
  const sel = document.querySelector('#session');
  sel.innerHTML = sessions.map((s) =>
    `<option value="${s.id}">${esc(s.name)} (${s.programs} processes, ${s.events} events${
      s.dropped > 0 ? `, ⚠ ${s.dropped.toLocaleString()} lost` : ''})</option>`).join('');
  sel.onchange = () => loadSession(Number(sel.value));
  const want = Number((location.hash.match(/session=(\d+)/) || [])[1]);
  const first = sessions.find((s) => s.id === want) || sessions.find((s) => s.events > 0) || sessions[0];
  if (!first) {
    document.querySelector('#legend').textContent = 'No sessions in this database: run p5 merge first.';
    return;
  }
  sel.value = first.id;
  await loadSession(first.id);
  // #compare=SID:RUN,SID:RUN opens on a comparison (p5 demo's black-box case study).
  const cmp = (location.hash.match(/compare=(\d+:\d+),(\d+:\d+)/) || []).slice(1);
  if (cmp.length === 2) {
    compare.want = cmp;
    showTab('compare');
  }
}

main().catch((e) => {
  document.querySelector('#legend').textContent = `error: ${e.message}`;
  console.error(e);
});
