// p5 web: the source panel (CoSMoS Fig. 15). Shows the text of a sensor's file as stored in the
// database (so it still works after the tree changed) with the sensor's lines highlighted, and
// edits the next instrumentation selection: functions switched off become `exclude_functions`,
// highlighted line ranges become `[[region]]`s, rendered by the server as p5.select.toml.
import { api, esc, fmtDur } from './util.js';

export class SourcePanel {
  constructor(ctx) {
    this.ctx = ctx;
    this.el = document.querySelector('#source');
    this.code = document.querySelector('#src-code');
    this.excluded = new Set();
    this.regions = [];
    this.mark = null;
    document.querySelector('#src-close').onclick = () => this.close();
    document.querySelector('#add-region').onclick = () => this.addRegion();
    document.querySelector('#sel-download').onclick = () => this.download();
    document.querySelector('#sel-save').onclick = () => this.save();
    window.addEventListener('keydown', (ev) => {
      if (ev.key === 'Escape') this.close();
    });
  }

  reset() {
    this.excluded.clear();
    this.regions = [];
    this.close();
  }

  close() {
    this.el.hidden = true;
  }

  async open(sensorIndex) {
    const s = this.ctx.sensors[sensorIndex];
    if (!s) return;
    let r;
    try {
      r = await api(`/sessions/${this.ctx.sid}/sensors/${s.hex}/source`);
    } catch (e) {
      document.querySelector('#src-info').textContent = `error: ${e.message}`;
      this.el.hidden = false;
      return;
    }
    this.cur = r;
    this.el.hidden = false;
    const path = r.file ? r.file.path : s.file || '(unknown file)';
    document.querySelector('#src-title').textContent = path;
    document.querySelector('#src-info').innerHTML =
      `<b>${esc(s.name)}</b> — ${esc(s.kind || 'sensor')}${s.function ? ` in <code>${esc(s.function)}()</code>` : ''}` +
      `${r.line ? `, line ${r.line}${r.end_line && r.end_line !== r.line ? `–${r.end_line}` : ''}` : ''} <small>${esc(s.hex)}</small>` +
      (r.throttled ? `<div class="throttled">${r.throttled.pinned ? 'Pinned count-only' : 'Throttled'}: ` +
        `${r.throttled.calls} calls in all, ${r.throttled.recorded} recorded while throttled ` +
        `(mean of the timed calls ${fmtDur(r.throttled.mean)}); only the calls before it and the ` +
        `long ones are bars on the Gantt.</div>` : '');
    const first = r.line || 0;
    const last = Math.max(first, r.end_line || first);
    this.mark = first ? [first, first] : null;
    if (r.text === null || r.text === undefined) {
      this.code.innerHTML = '<p style="padding:8px">The database has no text for this file ' +
        '(instrument with p5-instrument so the manifest carries the sources).</p>';
    } else {
      const sensorLines = new Set(r.sensors_in_file.map((x) => x.line));
      this.code.innerHTML = r.text.split('\n').map((t, i) => {
        const n = i + 1;
        const cls = n === first ? 'ln hl main' : n > first && n <= last ? 'ln hl' : 'ln';
        const dot = sensorLines.has(n) ? '<span class="sensor-mark" title="sensor">●</span>' : ' ';
        return `<div class="${cls}" data-line="${n}"><span class="no">${n}</span>${dot}<code>${esc(t)}</code></div>`;
      }).join('');
      for (const ln of this.code.querySelectorAll('.no')) {
        ln.onclick = (ev) => this.pick(Number(ln.parentElement.dataset.line), ev.shiftKey);
      }
      const main = this.code.querySelector('.ln.main');
      if (main) main.scrollIntoView({ block: 'center' });
    }
    document.body.dataset.sourceLine = String(first);
    this.listSensors(r.sensors_in_file);
    this.preview();
  }

  /** Line-number clicks pick the range "Add region" uses (shift extends it). */
  pick(n, extend) {
    this.mark = extend && this.mark ? [Math.min(this.mark[0], n), Math.max(this.mark[1], n)] : [n, n];
    for (const el of this.code.querySelectorAll('.ln')) {
      const k = Number(el.dataset.line);
      el.classList.toggle('hl', k >= this.mark[0] && k <= this.mark[1]);
      el.classList.toggle('main', false);
    }
  }

  listSensors(list) {
    const byFn = new Map();
    for (const x of list) {
      const f = x.function || x.name;
      if (!byFn.has(f)) byFn.set(f, []);
      byFn.get(f).push(x);
    }
    const box = document.querySelector('#src-sensors');
    box.innerHTML = '';
    for (const [f, xs] of byFn) {
      const lines = xs.map((x) => x.line).filter(Boolean);
      const label = document.createElement('label');
      const cb = document.createElement('input');
      cb.type = 'checkbox';
      cb.checked = !this.excluded.has(f);
      cb.onchange = () => {
        if (cb.checked) this.excluded.delete(f);
        else this.excluded.add(f);
        this.preview();
      };
      label.append(cb, ` measure ${f}() — ${xs.length} sensor${xs.length > 1 ? 's' : ''}` +
        (lines.length ? `, line ${Math.min(...lines)}` : ''));
      box.append(label);
    }
  }

  addRegion() {
    if (!this.cur || !this.mark || !this.cur.file) return;
    const input = document.querySelector('#region-name');
    const name = input.value.trim() || `lines ${this.mark[0]}-${this.mark[1]}`;
    this.regions.push({ name, file: this.cur.file.path, lines: [this.mark[0], this.mark[1]] });
    input.value = '';
    this.preview();
  }

  selection() {
    return { exclude_functions: [...this.excluded].sort(), regions: this.regions };
  }

  async toml() {
    return api('/selection/toml', {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify(this.selection()),
    });
  }

  async preview() {
    const save = document.querySelector('#sel-save');
    save.disabled = !(this.ctx.config && this.ctx.config.save_selection);
    save.title = save.disabled ? 'start p5 web with --select-dir DIR to save on the server' : '';
    try {
      document.querySelector('#sel-preview').textContent = await this.toml();
    } catch (e) {
      document.querySelector('#sel-preview').textContent = `error: ${e.message}`;
    }
  }

  async download() {
    const text = await this.toml();
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([text], { type: 'application/toml' }));
    a.download = 'p5.select.toml';
    a.click();
    setTimeout(() => URL.revokeObjectURL(a.href), 1000);
  }

  async save() {
    const status = document.querySelector('#sel-status');
    try {
      const r = await api('/selection', {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify(this.selection()),
      });
      status.textContent = `saved ${r.saved}`;
    } catch (e) {
      status.textContent = `error: ${e.message}`;
    }
  }
}
