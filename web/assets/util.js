// p5 web: helpers shared by the views (API calls, formatting, colours).

/** GET/POST against /api/v1; throws Error(message) on a JSON error answer. */
export async function api(path, opts) {
  const r = await fetch('api/v1' + path, opts);
  const type = r.headers.get('content-type') || '';
  const body = type.includes('json') ? await r.json() : await r.text();
  if (!r.ok) throw new Error((body && body.error) || `${r.status} ${r.statusText}`);
  return body;
}

/** A duration in ns, human readable. */
export function fmtDur(ns) {
  const a = Math.abs(ns);
  if (a < 1e3) return `${Math.round(ns)} ns`;
  if (a < 1e6) return `${(ns / 1e3).toPrecision(4)} µs`;
  if (a < 1e9) return `${(ns / 1e6).toPrecision(4)} ms`;
  return `${(ns / 1e9).toPrecision(4)} s`;
}

/** A byte count or rate. */
export function fmtBytes(b) {
  if (b < 1024) return `${b.toFixed(0)} B`;
  if (b < 1 << 20) return `${(b / 1024).toFixed(1)} KiB`;
  if (b < 1 << 30) return `${(b / (1 << 20)).toFixed(1)} MiB`;
  return `${(b / (1 << 30)).toFixed(2)} GiB`;
}

/** State colours (CoSMoS Fig. 7: sending red, receiving green, calculating yellow). */
export const STATE_COLORS = {
  calculating: '#f2cf5b', sending: '#d9453d', receiving: '#3fa34d',
  connecting: '#8e5bd6', accepting: '#2aa5b5', closing: '#888888', other: '#bbbbbb',
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

/** A stable colour per sensor index. */
export function sensorColor(i, light = 0) {
  const h = (i * 137.508 + 200) % 360;
  return `hsl(${h.toFixed(0)}, 55%, ${62 + light}%)`;
}

/** Escapes text for innerHTML. */
export function esc(s) {
  return String(s ?? '').replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}
