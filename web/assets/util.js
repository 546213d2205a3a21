// p5 web: helpers shared by the views (API calls, formatting, colours).

/** GET/POST against /api/v1; throws Error(message) on a JSON error answer. */
export async function api(path, opts) {
  const r = await fetch('api/v1' + path, opts);
  const type = r.headers.get('content-type') || '';
  const body = type.includes('json') ? await r.json() : await r.text();
  if (!r.ok) throw new Error((body && body.error) || `${r.status} ${r.statusText}`);
  return body;
}

const UNITS = [[1e9, 's'], [1e6, 'ms'], [1e3, 'µs'], [1, 'ns']];

/** A duration in ns, human readable, to 4 significant digits (999.96 ms reads 1.000 s). */
export function fmtDur(ns) {
  const a = Math.abs(ns);
  if (Math.round(a) < 1e3) return `${Math.round(ns)} ns`;
  for (const [u, name] of UNITS) {
    // The unit the value still has after rounding to 4 digits.
    if (Number((a / u).toPrecision(4)) >= 1) return `${(ns / u).toPrecision(4)} ${name}`;
  }
  return `${Math.round(ns)} ns`;
}

/**
 * A time `ns` shown to the resolution `res` (ns): the unit of the value, and as many
 * decimals as `res` needs, so neighbouring ruler ticks never read alike (+1.0001 s,
 * +1.0002 s); the unit is that of the largest of `ns`, `ref` and `res` (give both ends of a
 * range the same `ref` and they share unit and precision).
 */
export function fmtAt(ns, res, ref = ns) {
  const a = Math.max(Math.abs(ref), Math.abs(ns), res);
  const [u, name] = UNITS.find(([v]) => a >= v) || UNITS[UNITS.length - 1];
  const r = Math.max(1, res);
  const decimals = Math.min(9, Math.max(0, Math.ceil(-Math.log10(r / u) - 1e-9)));
  return `${(ns / u).toFixed(decimals)} ${name}`;
}

/** A byte count or rate. */
export function fmtBytes(b) {
  if (b < 1024) return `${b.toFixed(0)} B`;
  if (b < 1 << 20) return `${(b / 1024).toFixed(1)} KiB`;
  if (b < 1 << 30) return `${(b / (1 << 20)).toFixed(1)} MiB`;
  return `${(b / (1 << 30)).toFixed(2)} GiB`;
}

/**
 * State colours (CoSMoS Fig. 7: sending red, receiving green, calculating yellow). Waiting
 * (poll, select, epoll_wait, a selector) is a pale blue-grey: idle time, lighter than every
 * other state and too grey to share a hue with a function bar.
 */
export const STATE_COLORS = {
  calculating: '#f2cf5b', sending: '#d9453d', receiving: '#3fa34d',
  connecting: '#8e5bd6', accepting: '#2aa5b5', closing: '#888888', waiting: '#cad2dc',
  other: '#bbbbbb',
};

/** IRQ numbers from 0x10000 up are softirqs: the host agent's SOFTIRQ_BASE + vector. */
export const SOFTIRQ_BASE = 0x10000;
const SOFTIRQS = ['HI', 'TIMER', 'NET_TX', 'NET_RX', 'BLOCK', 'IRQ_POLL', 'TASKLET', 'SCHED', 'HRTIMER', 'RCU'];

/** An `irq` number as text: `IRQ 24`, `softirq NET_RX`. */
export function irqName(n) {
  if (n < SOFTIRQ_BASE) return `IRQ ${n}`;
  const v = n - SOFTIRQ_BASE;
  return `softirq ${SOFTIRQS[v] || v}`;
}

/** Dot colours of the IRQ row: hard IRQs blue, softirqs purple. */
export const IRQ_COLOR = '#2b4fa8';
export const SOFTIRQ_COLOR = '#9b3fb5';

// Hue bands the state colours leave free (sending red ≈ 3°, calculating yellow ≈ 45°,
// receiving green ≈ 128°, accepting teal ≈ 187°, connecting purple ≈ 265°): a function bar
// never looks like a state.
const FREE_HUES = [[70, 100], [150, 170], [205, 250], [285, 345]];
const FREE_SPAN = FREE_HUES.reduce((n, [a, b]) => n + b - a, 0);

/** A stable colour per sensor index, in hues no thread state uses. */
export function sensorColor(i, light = 0) {
  let x = (i * 0.618034 + 0.15) % 1 * FREE_SPAN;
  let h = FREE_HUES[0][0];
  for (const [a, b] of FREE_HUES) {
    if (x < b - a) {
      h = a + x;
      break;
    }
    x -= b - a;
  }
  return `hsl(${h.toFixed(0)}, 50%, ${66 + light}%)`;
}

/** Escapes text for innerHTML. */
export function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
