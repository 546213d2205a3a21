// Times the Paths tab's pattern list in headless Chromium (issue 20's budget: a list of 10 k
// patterns ≤ 200 ms): fetch, parse and drawing the rows in view, once per sort.
//   cargo bench -p p5-web --bench paths   (with P5_BENCH_DB=/tmp/paths.db)
//   target/release/p5 web --db sqlite:/tmp/paths.db --listen 127.0.0.1:8072 --no-cache &
//   node web/tests/browser/list10k.mjs http://127.0.0.1:8072/
import { chromium } from 'playwright-core';

const url = process.argv[2] || 'http://127.0.0.1:8072/';
const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox'] });
const page = await browser.newPage({ viewport: { width: 1500, height: 900 } });
await page.goto(`${url}#session=1`);
await page.waitForSelector('body[data-ready="1"]');
await page.click('nav button[data-tab="paths"]');
await page.waitForSelector('body[data-path-open]');
const ms = [];
for (const sort of ['count', 'expectation', 'total', 'expectation_per_count', 'expectation_per_sqrt_count', 'count']) {
  await page.selectOption('#path-sort', sort);
  await page.waitForTimeout(1500);
  ms.push(await page.$eval('#paths', (e) => Number(e.dataset.listMs)));
}
const total = await page.$eval('#path-note', (e) => e.textContent);
ms.sort((a, b) => a - b);
console.log(`${total}\nlist drawn in ${ms.map((x) => x.toFixed(1)).join(', ')} ms; median ${ms[ms.length >> 1].toFixed(1)} ms (budget 200 ms)`);
await browser.close();
