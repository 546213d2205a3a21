// Browser test of the p5 web viewer, run by `cargo test -p p5-web` (tests/web.rs, `browser`):
//   node test.mjs URL SCREENSHOT.png TRY_WORD_LINE
// Headless Debian chromium driven by playwright-core: the page loads (first from the session
// overview, then from the full index), rows render, clicking a
// bar opens the source with the right line highlighted, the animation cursor moves (and stops
// when paused), wheel and box zoom change the visible range, statistics load, and a screenshot
// is saved.
import { chromium } from 'playwright-core';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const [url, shot, lineArg] = process.argv.slice(2);
if (!url || !shot || !lineArg) {
  console.error('usage: node test.mjs URL SCREENSHOT.png LINE');
  process.exit(2);
}
const wantLine = Number(lineArg);
const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'p5-chromium-'));
const errors = [];
let failed = false;
const check = (ok, what) => {
  if (!ok) throw new Error(`check failed: ${what}`);
  console.log(`ok - ${what}`);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const context = await chromium.launchPersistentContext(dataDir, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
  viewport: { width: 1500, height: 860 },
});
try {
  const page = context.pages()[0] || (await context.newPage());
  page.setDefaultTimeout(20000);
  page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });

  // 1. The page loads and the first Gantt data arrives.
  await page.goto(url);
  await page.waitForSelector('body[data-ready="1"]');
  check(true, 'page loads and the first Gantt answer is drawn');

  // 1b. The server answered from the session overview first (the test server is told not to
  // wait for the index); the page then took the full index by itself.
  await page.waitForFunction(() => document.body.dataset.previewed === '1'
    && !document.body.dataset.partial && window.p5.ctx.rows && !window.p5.ctx.rows.partial);
  check(true, 'the overview preview is replaced by the full index without a reload');

  // 2. Rows render: one block per process with its label, and pixels in the state bars.
  const rows = await page.evaluate(() => {
    const t = window.p5.timeline;
    const states = t.lanes.filter((l) => l.kind === 'state');
    const c = document.querySelector('#chart');
    const g = c.getContext('2d');
    const dpr = window.devicePixelRatio || 1;
    const painted = states.map((l) => {
      const d = g.getImageData(250 * dpr, (l.y + 8) * dpr, (c.width - 260 * dpr), 1).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && !(d[i] > 240 && d[i + 1] > 240 && d[i + 2] > 240)) n++;
      return n;
    });
    return { labels: states.map((l) => l.label).filter(Boolean), painted,
      charts: t.lanes.filter((l) => l.kind === 'cpu' || l.kind === 'net').length,
      net: t.lanes.filter((l) => l.kind === 'net').map((l) => l.scale) };
  });
  check(rows.labels.join('|') === 'alpha · cpw · 1|beta · cow · 2|gamma · cow · 3',
    `process rows labelled host · program · number (${rows.labels.join(', ')})`);
  check(rows.painted.every((n) => n > 500), `state bars are painted (${rows.painted.join(', ')} px)`);
  check(rows.charts === 6, `host CPU and network charts beneath (${rows.charts})`);
  // Waiting (poll/select/epoll) has its own colour and legend entry, and is drawn.
  const waiting = await page.evaluate(async () => {
    const u = await import(new URL('assets/util.js', location.href).href);
    const t = window.p5.timeline;
    const lane = t.lanes.find((l) => l.kind === 'state' && l.thread === 1);
    const k = t.rows.states.indexOf('waiting');
    const it = t.itemsFor(lane).find((i) => i[2] === k && t.X(i[1]) - t.X(i[0]) > 6 && t.X(i[0]) > 260);
    const c = document.querySelector('#chart');
    const dpr = window.devicePixelRatio || 1;
    const x = it ? Math.round((t.X(it[0]) + t.X(it[1])) / 2) : 0;
    const px = it ? [...c.getContext('2d').getImageData(x * dpr, (lane.y + lane.h / 2) * dpr, 1, 1).data] : [];
    const want = u.STATE_COLORS.waiting;
    const others = Object.entries(u.STATE_COLORS).filter(([n]) => n !== 'waiting').map(([, v]) => v);
    return { found: !!it, px, want, unique: !others.includes(want),
      legend: document.querySelector('#legend').textContent };
  });
  const hex = () => [1, 3, 5].map((i) => parseInt(waiting.want.slice(i, i + 2), 16));
  check(waiting.legend.includes('waiting (poll, select, epoll)'), 'the legend has a waiting entry');
  check(waiting.unique, `waiting has its own colour (${waiting.want})`);
  check(waiting.found && hex().every((v, i) => Math.abs(v - waiting.px[i]) <= 4),
    `a waiting segment is drawn in its colour (rgb ${waiting.px.slice(0, 3)})`);
  // Lost events are never silent: the session list, the lane's label and a band on the lane.
  const lost = await page.evaluate(() => {
    const t = window.p5.timeline;
    const lane = t.lanes.find((l) => l.kind === 'drops');
    const state = t.lanes.find((l) => l.kind === 'state' && l.thread === (lane && lane.thread));
    const c = document.querySelector('#chart');
    const dpr = window.devicePixelRatio || 1;
    const [a, b] = lane.drops[0];
    const x = Math.round((t.X(a) + t.X(b)) / 2);
    const px = c.getContext('2d').getImageData(x * dpr, (lane.y + 2) * dpr, 1, 1).data;
    const tip = t.describe(t.hit(x, lane.y + 2));
    return { option: document.querySelector('#session option').textContent, sub: state.sub,
      ranges: lane.drops.length, px: [...px], tip };
  });
  check(lost.option.includes('⚠ 1,500 lost'), `the session list shows lost events (${lost.option})`);
  check(lost.sub.includes('⚠ 1,500 events lost') && lost.ranges === 2,
    `the thread's label and its two loss ranges (${lost.sub})`);
  check(lost.px[0] > 200 && lost.px[2] < 120, `a warning band is painted over the loss (rgb ${lost.px.slice(0, 3)})`);
  check(lost.tip.startsWith('⚠ 1,000 events lost between'), `hovering the band explains it (${lost.tip.split('\n')[0]})`);
  // Clock bounds where they matter: arrows whose latency is within them are uncertain.
  const unsure = await page.evaluate(() => {
    const t = window.p5.timeline;
    const u = t.msgs.filter((m) => t.uncertainty(m) !== null);
    const gamma = t.msgs.filter((m) => m.send_thread === 3 || m.recv_thread === 3);
    return { n: u.length, all: u.every((m) => gamma.includes(m)), gamma: gamma.length,
      tip: u.length ? t.describe({ kind: 'msg', m: u[0], end: 'send' }) : '' };
  });
  check(unsure.n === unsure.gamma && unsure.n > 0 && unsure.all,
    `arrows within the clock bound are uncertain: ${unsure.n} of gamma's ${unsure.gamma}, no other`);
  check(unsure.tip.includes("within the clocks' error bound (±100.0 µs): order uncertain"),
    `their tooltip says so (${unsure.tip.split('\n')[2]})`);
  // Loopback traffic counts: the scale names the interfaces that carried traffic.
  check(rows.net.length === 3 && rows.net.every((l) => /B\/s · eth0, lo$/.test(l)),
    `network charts name their interfaces, lo included (${rows.net.join(' | ')})`);

  // 3. Click-back: clicking a try_word bar opens its source with line highlighted.
  const pos = await page.evaluate(() => window.p5.timeline.locate('try_word'));
  check(pos !== null, 'a try_word interval is on screen');
  await page.mouse.click(pos.x, pos.y);
  await page.waitForSelector('#source:not([hidden]) .ln.hl.main');
  const src = await page.evaluate(() => ({
    line: Number(document.querySelector('.ln.hl.main').dataset.line),
    text: document.querySelector('.ln.hl.main code').textContent,
    title: document.querySelector('#src-title').textContent,
    preview: document.querySelector('#sel-preview').textContent,
  }));
  check(src.line === wantLine && src.text.includes('try_word'),
    `source opens at line ${src.line} of ${src.title}: "${src.text.trim()}"`);
  // Toggling a function off shows up in the selection preview.
  const toggles = await page.$$('#src-sensors input[type=checkbox]');
  check(toggles.length >= 2, `sensor toggles listed (${toggles.length})`);
  await toggles[0].click();
  await page.waitForFunction(() => document.querySelector('#sel-preview').textContent.includes('exclude_functions'));
  check(true, 'unchecking a function adds it to exclude_functions in p5.select.toml');
  await toggles[0].click();

  // Hovering a bar explains it; clicking an arrow's send end opens the send call's source.
  // (The open panel narrowed the timeline: locate the bar again.)
  const pos2 = await page.evaluate(() => window.p5.timeline.locate('try_word'));
  await page.mouse.move(pos2.x, pos2.y);
  await page.waitForSelector('#tip:not([hidden])');
  const tip = await page.textContent('#tip');
  check(tip.includes('try_word') && tip.includes('cow.c:9'), `hover shows details (${tip.split('\n')[0]})`);
  // IRQ dots: hard lines by number, the host agent's softirqs (0x10000 + vector) by name.
  const irqTips = await page.evaluate(() => {
    const t = window.p5.timeline;
    const lane = t.lanes.find((l) => l.kind === 'irq');
    return [24, 0x10003, 0x10002].map((n) => t.describe({ kind: 'irq', lane, item: [0, 0, n, 1, 0] }))
      .concat(document.querySelector('#legend').textContent);
  });
  check(irqTips[0].startsWith('IRQ 24 at') && irqTips[1].startsWith('softirq NET_RX at')
    && irqTips[2].startsWith('softirq NET_TX at') && irqTips[3].includes('network softirq'),
  `IRQ hover names softirqs (${irqTips.slice(0, 3).map((x) => x.split(' at')[0]).join(', ')})`);
  const arrow = await page.evaluate(() => {
    const t = window.p5.timeline;
    const r = t.chart.getBoundingClientRect();
    const m = t.msgs.find((x) => x.send_thread === 1 && t.X(x.send_t) > 260);
    return m && { x: r.left + t.X(m.send_t), y: r.top + t.threadY.get(1) };
  });
  check(arrow !== undefined && arrow !== null, 'a message arrow from the master is on screen');
  await page.mouse.click(arrow.x, arrow.y);
  await page.waitForFunction(() => document.querySelector('#src-title').textContent === 'src/cpw.c');
  const sendLine = await page.evaluate(() => Number(document.querySelector('.ln.hl.main').dataset.line));
  check(sendLine === 11, `clicking an arrow's send end opens the send call (cpw.c line ${sendLine})`);

  // 4. Animation: the cursor moves while playing and stops when paused.
  const cursor = () => page.evaluate(() => Number(document.querySelector('#cursor-time').dataset.t));
  const c0 = await cursor();
  await page.click('#play');
  await sleep(800);
  const c1 = await cursor();
  await page.click('#play');
  const c2 = await cursor();
  await sleep(400);
  const c3 = await cursor();
  check(c1 > c0, `animation moves the cursor (${c0} → ${c1} ns)`);
  check(c3 === c2, `pause stops it (${c2} = ${c3})`);
  // Clicking the ruler moves the cursor there; dragging it moves it back.
  const rr = await page.locator('#ruler').boundingBox();
  await page.mouse.click(rr.x + rr.width * 0.75, rr.y + 14);
  const c4 = await cursor();
  check(c4 > c3, `a click on the ruler moves the cursor (${c3} → ${c4})`);
  const cx = await page.evaluate(() => window.p5.timeline.X(window.p5.timeline.cursor));
  const chartBox = await page.locator('#chart').boundingBox();
  await page.mouse.move(chartBox.x + cx, chartBox.y + 30);
  await page.mouse.down();
  await page.mouse.move(chartBox.x + cx - 200, chartBox.y + 30, { steps: 5 });
  await page.mouse.up();
  const c5 = await cursor();
  check(c5 < c4, `the cursor can be dragged back (${c4} → ${c5})`);

  // 5. Zoom: the wheel narrows the range and fetches new detail; box zoom on the ruler too.
  const range = () => page.evaluate(() => {
    const r = document.querySelector('#range');
    return { t0: Number(r.dataset.t0), t1: Number(r.dataset.t1), loads: Number(document.body.dataset.loads) };
  });
  const r0 = await range();
  await page.mouse.move(chartBox.x + chartBox.width * 0.4, chartBox.y + 40);
  await page.mouse.wheel(0, -500);
  await page.waitForFunction((n) => Number(document.body.dataset.loads) > n, r0.loads);
  const r1 = await range();
  check(r1.t1 - r1.t0 < (r0.t1 - r0.t0) * 0.7, `wheel zoom narrows the range (${r0.t1 - r0.t0} → ${r1.t1 - r1.t0} ns)`);
  await page.mouse.move(rr.x + 400, rr.y + 14);
  await page.mouse.down();
  await page.mouse.move(rr.x + 600, rr.y + 14, { steps: 4 });
  await page.mouse.up();
  await page.waitForFunction((n) => Number(document.body.dataset.loads) > n, r1.loads);
  const r2 = await range();
  check(r2.t1 - r2.t0 < (r1.t1 - r1.t0) * 0.5, `box zoom on the ruler narrows it again (${r2.t1 - r2.t0} ns)`);
  // Deep zoom: ruler labels never repeat, the range shares one unit, tooltips resolve µs.
  const deep = await page.evaluate(async () => {
    const t = window.p5.timeline;
    const base = t.rows.t_min;
    t.setView(base + 1e6 - 40, base + 1e6 + 2000);
    const labels = t.ticks().map((x) => t.fmtT(x, t.tickStep));
    const range = document.querySelector('#range').textContent;
    t.setView(base + 1e6, base + 2e6);
    const lane = t.lanes.find((l) => l.kind === 'state');
    const tip = t.describe({ kind: 'state', lane, item: [base + 1400120, base + 1403120, 0, 1, 0] });
    const u = await import(new URL('assets/util.js', location.href).href);
    return { labels, range, tip, dur: u.fmtDur(999960000), durs: [u.fmtDur(999.96), u.fmtDur(1500), u.fmtDur(999.6)] };
  });
  check(deep.labels.length >= 3 && new Set(deep.labels).size === deep.labels.length,
    `deep zoom: ruler labels all differ (${deep.labels.join(', ')})`);
  check(/^\+0\.999960 ms – \+1\.002000 ms/.test(deep.range),
    `deep zoom: both ends of the range in one unit (${deep.range})`);
  check(deep.dur === '1.000 s' && deep.durs.join('|') === '1.000 µs|1.500 µs|999.6 ns',
    `durations round into the next unit (${deep.dur}, ${deep.durs.join(', ')})`);
  check(deep.tip.includes('+1.40012 ms + 3.000 µs'), `a 3 µs item's start is given to the µs (${deep.tip.split('\n').pop()})`);
  // Function bars never take a thread state's colour; an estimated count reads as one.
  const looks = await page.evaluate(async () => {
    const u = await import(new URL('assets/util.js', location.href).href);
    const hue = (css) => {
      const c = document.createElement('canvas').getContext('2d');
      c.fillStyle = css;
      c.fillRect(0, 0, 1, 1);
      const [r, g, b] = c.getImageData(0, 0, 1, 1).data;
      const mx = Math.max(r, g, b);
      const mn = Math.min(r, g, b);
      if (mx - mn < 20) return null;
      const d = mx - mn;
      const h = mx === r ? ((g - b) / d) % 6 : mx === g ? (b - r) / d + 2 : (r - g) / d + 4;
      return (h * 60 + 360) % 360;
    };
    const states = Object.values(u.STATE_COLORS).map(hue).filter((h) => h !== null);
    let closest = 360;
    for (let i = 0; i < 64; i++) {
      const h = hue(u.sensorColor(i));
      for (const s of states) closest = Math.min(closest, Math.abs(h - s), 360 - Math.abs(h - s));
    }
    const t = window.p5.timeline;
    t.msgTotal = 8001;
    t.msgExact = false;
    t.draw();
    const note = document.querySelector('#msg-note').textContent;
    return { closest, note };
  });
  check(looks.closest >= 8, `function colours keep ≥ 8° of hue from every state colour (${looks.closest.toFixed(1)}°)`);
  check(looks.note.startsWith('about 8,000 messages in view'), `an estimated message count says so (${looks.note})`);
  await page.click('#fit');
  await page.waitForFunction((w) => {
    const r = document.querySelector('#range');
    return Number(r.dataset.t1) - Number(r.dataset.t0) >= w;
  }, r0.t1 - r0.t0);
  check(true, 'Fit shows the whole session again');

  // 6. Statistics: table, charts, click-back from a row.
  await page.click('nav button[data-tab=stats]');
  await page.waitForSelector('body[data-stats="1"]');
  const nrows = await page.$$eval('#sensor-table tbody tr', (t) => t.length);
  check(nrows === 10, `statistics table lists every measured sensor (${nrows})`);
  await page.click('#sensor-table tbody tr:has-text("encrypt account name")');
  await page.waitForFunction(() => document.querySelector('.ln.hl.main') &&
    document.querySelector('.ln.hl.main').dataset.line === '13');
  check(true, 'clicking a statistics row opens its source line');
  // Waiting is its own share in the statistics, not part of calculating.
  const shares = await page.evaluate(() => Object.fromEntries(
    window.p5.stats.data.states.map((s) => [s.state, s.total])));
  check(shares.waiting > 0 && shares.calculating > 0,
    `statistics count waiting apart from calculating (${(shares.waiting / 1e6).toFixed(1)} ms waiting)`);
  const statLabels = await page.evaluate(() => ({
    hist: window.p5.stats.histLabels, kiviat: window.p5.stats.kiviatLabels }));
  const overlaps = statLabels.hist.filter((a, k) => k && a[0] < statLabels.hist[k - 1][1]).length;
  check(statLabels.hist.length > 1 && overlaps === 0,
    `histogram x labels do not overlap (${statLabels.hist.length} labels)`);
  check(statLabels.kiviat.length === 5 && statLabels.kiviat[0] === 'cpu 100 %'
    && /^net_rx [\d.]+ MiB\/s$/.test(statLabels.kiviat[3]),
  `the Kiviat diagram has a scale (${statLabels.kiviat.join(', ')})`);
  // Throttled sensors (issue 21): their own card, with calls and when; a row opens the source
  // panel, which says the sensor was throttled.
  const throttled = await page.$$eval('#throttled-table tbody tr', (t) => t.map((r) => r.textContent));
  check(throttled.length === 1 && throttled[0].includes('try_word') && throttled[0].includes('90000'),
    `the statistics list the throttled sensor with its calls (${throttled.join(' | ')})`);
  await page.click('#throttled-table tbody tr');
  await page.waitForFunction(() => /Throttled: 90000 calls/.test(
    (document.querySelector('#src-info .throttled') || {}).textContent || ''));
  check(true, 'the source panel says the sensor was throttled and how many calls it made');
  await page.screenshot({ path: path.join(os.tmpdir(), 'p5-web-stats.png') });
  await page.locator('#kiviat').screenshot({ path: path.join(os.tmpdir(), 'p5-web-kiviat.png') });
  await page.locator('#hist').screenshot({ path: path.join(os.tmpdir(), 'p5-web-hist.png') });

  // 7. The screenshot: zoom onto one round of the cracker with the source panel open.
  await page.click('nav button[data-tab=timeline]');
  await page.evaluate(() => {
    const t = window.p5.timeline;
    t.setView(t.bounds.t0 + 600000, t.bounds.t0 + 14600000);
    t.setCursor(t.bounds.t0 + 5200000);
  });
  await page.waitForFunction((n) => Number(document.body.dataset.loads) > n, r2.loads + 1);
  const p2 = await page.evaluate(() => window.p5.timeline.locate('try_word'));
  await page.mouse.click(p2.x, p2.y);
  await page.waitForSelector('#source:not([hidden]) .ln.hl.main');
  await page.mouse.move(p2.x, p2.y);
  await sleep(300);
  await page.screenshot({ path: shot });
  check(fs.statSync(shot).size > 10000, `screenshot saved to ${shot}`);

  // 8. Paths: the runs' patterns sort, a pattern draws as tree, timeline, histograms, graph.
  await page.click('nav button[data-tab=paths]');
  await page.waitForSelector('body[data-path-open]');
  const sigs = () => page.$$eval('#path-table tbody td.sig', (t) => t.map((x) => x.textContent));
  check((await sigs()).join(' ') === 'cpw>cow cpw>cow,cow cow>cpw',
    `the linking run's patterns are listed by expectation (${(await sigs()).join(', ')})`);
  await page.selectOption('#path-sort', 'count');
  await page.waitForFunction(() => document.querySelector('#path-table tbody td.sig').textContent === 'cow>cpw');
  check(true, 'sorting by count reorders the list');
  const listMs = await page.$eval('#paths', (e) => Number(e.dataset.listMs));
  console.log(`  pattern list fetched and drawn in ${listMs.toFixed(1)} ms`);
  await page.click('#path-table tbody tr:has-text("cpw>cow,cow")');
  await page.waitForFunction(() => document.querySelector('#path-title').textContent === 'cpw>cow,cow');
  const detail = await page.evaluate(() => {
    const c = document.querySelector('#path-timeline');
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) ink += 1;
    return {
      tree: document.querySelectorAll('#path-tree span').length,
      crit: document.querySelectorAll('#path-tree span.crit').length,
      ink,
      hists: document.querySelectorAll('#path-hists canvas').length,
      edges: document.querySelectorAll('#path-graph svg path[marker-end]').length,
    };
  });
  check(detail.tree === 3 && detail.crit === 2 && detail.ink > 500,
    `a pattern draws as a call tree with its critical path and a timeline (${JSON.stringify(detail)})`);
  check(detail.edges === 2, `the run's graph has its two edges (${detail.edges})`);
  await page.screenshot({ path: path.join(os.tmpdir(), 'p5-web-paths.png'), fullPage: true });

  // 9. An instance on the Gantt: its messages highlighted, its threads' time split.
  await page.click('#path-table tbody tr:has-text("cpw>cow"):not(:has-text(","))');
  await page.waitForFunction(() => document.querySelector('#path-title').textContent === 'cpw>cow'
    && document.querySelectorAll('#path-instances tbody tr').length === 12);
  check(await page.$$eval('#path-hists canvas', (c) => c.length) === 1, "the pattern's node latency histogram is drawn");
  await page.click('#path-instances tbody tr:first-child');
  await page.waitForSelector('body[data-instance]');
  const inst = await page.evaluate(() => ({
    tab: document.querySelector('#timeline').classList.contains('on'),
    rows: document.querySelectorAll('#inst-table tbody tr').length,
    marked: window.p5.timeline.marked && window.p5.timeline.marked.messages.length,
    span: window.p5.timeline.view.t1 - window.p5.timeline.view.t0,
  }));
  check(inst.tab && inst.rows === 2 && inst.marked === 2 && inst.span < 20e6,
    `choosing an instance zooms the timeline onto it and splits its threads' time (${JSON.stringify(inst)})`);
  await sleep(300);
  await page.screenshot({ path: path.join(os.tmpdir(), 'p5-web-instance.png') });
  await page.click('#inst-close');

  // 10. Flows: suspect bars and paths whose functions open their source; a diff's two lists.
  await page.click('nav button[data-tab=flows]');
  await page.waitForSelector('#diff-a tbody tr');
  check(await page.$$eval('#diff-a tbody tr', (t) => t.length) === 2, 'a diff run shows its anomalous paths');
  await page.selectOption('#flow-run', '3');
  await page.waitForSelector('#flow-table tbody tr');
  const bars = await page.$$eval('#flow-table span.score i', (b) => b.map((x) => x.style.width));
  check(parseFloat(bars[0]) === 100 && Math.abs(parseFloat(bars[1]) - 16.7) < 0.1, `suspect scores are drawn as bars (${bars.join(', ')})`);
  await page.click('#flow-table tbody tr:first-child');
  await page.waitForSelector('#flow-detail a[data-sensor]');
  await page.click('#flow-detail a:has-text("try_word")');
  await page.waitForFunction((l) => document.querySelector('.ln.hl.main')
    && document.querySelector('.ln.hl.main').dataset.line === String(l), wantLine);
  check(true, 'a function of a flow\'s path opens its source');
  await page.screenshot({ path: path.join(os.tmpdir(), 'p5-web-flows.png') });

  // 11. Compare, opened from the URL: the node whose own delay grew is named.
  await page.goto(`${url}#compare=1:1,1:2`);
  await page.reload();
  await page.waitForSelector('body[data-compared]');
  const note = await page.$eval('#cmp-note', (e) => e.textContent);
  check(/cow \+200\.0 µs/.test(note), `the comparison names the node whose delay grew (${note})`);
  await page.screenshot({ path: path.join(os.tmpdir(), 'p5-web-compare.png'), fullPage: true });

  check(errors.length === 0, `no page errors${errors.length ? `: ${errors.join('; ')}` : ''}`);
  console.log('browser test: ok');
} catch (e) {
  failed = true;
  console.error(e.stack || String(e));
  if (errors.length) console.error(errors.join('\n'));
} finally {
  await context.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
