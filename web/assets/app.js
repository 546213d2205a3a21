// p5 web: page wiring. Loads the session list, builds the timeline, statistics and source
// panel, and keeps the URL hash (#session=ID) in step. Shared helpers are in util.js.
import { Timeline } from './gantt.js';
import { StatsView } from './stats.js';
import { SourcePanel } from './source.js';
import { api, esc } from './util.js';

const ctx = {
  sid: null, rows: null, sensors: [], config: null,
  /** Opens the source panel for a sensor index (click-back). */
  openSource: (sensor) => source.open(sensor),
};
const timeline = new Timeline(ctx);
const stats = new StatsView(ctx);
const source = new SourcePanel(ctx);
window.p5 = { ctx, timeline, stats, source };

async function loadSession(sid) {
  ctx.sid = sid;
  location.hash = `session=${sid}`;
  const [rows, sensors] = await Promise.all([
    api(`/sessions/${sid}/rows`), api(`/sessions/${sid}/sensors`)]);
  ctx.rows = rows;
  ctx.sensors = sensors;
  source.reset();
  timeline.setSession(rows);
  stats.invalidate();
  if (document.querySelector('#stats').classList.contains('on')) stats.load();
}

function showTab(name) {
  for (const b of document.querySelectorAll('nav button')) b.classList.toggle('on', b.dataset.tab === name);
  for (const s of document.querySelectorAll('.tab')) s.classList.toggle('on', s.id === name);
  if (name === 'stats') stats.load();
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
}

main().catch((e) => {
  document.querySelector('#legend').textContent = `error: ${e.message}`;
  console.error(e);
});
