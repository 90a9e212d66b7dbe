// The explorer in a real browser: Debian's chromium, headless, driven by puppeteer-core (which
// downloads nothing) against the real `scratchformer serve`.
//
//   cd tests/browser && PUPPETEER_SKIP_DOWNLOAD=1 npm ci        # once: puppeteer-core from package-lock.json
//   node tests/browser/explorer.test.mjs --binary build/release/scratchformer \
//        --config configs/reverse.toml --configs configs [--runs DIR] [--screenshots docs/screenshots]
//
// --runs DIR is copied to a temporary folder first (the test appends to metrics.tsv there).
// Without --runs it trains a tiny run first (the config with train.max_steps=60, a few seconds)
// into a temporary runs folder. It starts `scratchformer serve --port 0`, reads the URL it
// prints, and checks, printing one "ok" / "not ok" line each (exit status 1 if any failed):
//   - every page loads with no console error, no failed request, no error box;
//   - a typed sentence shows the same translation as `scratchformer translate` (greedy, beam 4);
//   - the attention grid shows layers x heads thumbnails for every stack the API returns;
//   - hovering a token changes the highlighted weights, and they are the API's weights;
//   - a Chinese browser gets Chinese; switching to Chinese changes the labels, is remembered
//     after a reload, no label is missing in either language;
//   - the curves grow when rows are appended to metrics.tsv while the page is open;
//   - inside one step (pre-LN vs post-LN) and every quick demo of the Lessons page draw without an error;
//   - an API error (a sentence over the length limit) is shown on the page;
//   - `scratchformer report` of the run opens as a file with the same views, fetching nothing;
//   - `serve` stops on SIGTERM with status 0.
// With --screenshots DIR it saves explorer-PAGE.png of each page (and one in Chinese).
// Waits are bounded (a hang fails, after WAIT_MS), nothing is timed.
import {spawn, spawnSync} from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const WAIT_MS = 60000;        // the longest any one thing may take before it counts as failed
const PAGES = ['runs', 'translate', 'attention', 'step', 'training', 'lessons'];

// ---- arguments and small helpers --------------------------------------------------------------

function parseArgs(argv) {
  const a = {binary: process.env.SCRATCHFORMER_BIN || '', config: '', configs: '', runs: '', screenshots: '',
    chromium: process.env.CHROMIUM || '/usr/bin/chromium', sentence: 'ka zu ra da po mi', keep: false};
  for (let i = 2; i < argv.length; i++) {
    const k = argv[i].replace(/^--/, '');
    if (k === 'keep') { a.keep = true; continue; }
    if (!(k in a) || i + 1 >= argv.length) fail(`explorer.test.mjs: unknown option or missing value: ${argv[i]}`);
    a[k] = argv[++i];
  }
  if (!a.binary) fail('explorer.test.mjs: expected --binary PATH (the scratchformer executable)');
  if (!a.runs && !a.config) fail('explorer.test.mjs: expected --runs DIR (with a trained run) or --config FILE (to train a tiny one)');
  if (!a.configs) a.configs = a.config ? path.dirname(a.config) : 'configs';
  return a;
}

function fail(message) { console.error(message); process.exit(2); }

const results = [];
function check(name, ok, detail = '') {
  results.push({name, ok});
  console.log(`${ok ? 'ok' : 'not ok'} ${results.length} - ${name}${!ok && detail ? '\n    ' + String(detail).replace(/\n/g, '\n    ') : ''}`);
  return ok;
}

async function step(name, fn) {
  try { await fn(); } catch (e) { check(name, false, e && e.stack ? e.stack : e); }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function run_(binary, args, input) {
  const r = spawnSync(binary, args, {input, encoding: 'utf8', maxBuffer: 64 << 20});
  if (r.status !== 0) throw new Error(`${binary} ${args.join(' ')} exited with ${r.status}: ${r.stderr}`);
  return r.stdout;
}

async function loadPuppeteer() {
  try { return (await import('puppeteer-core')).default; } catch (e) {
    fail('explorer.test.mjs: puppeteer-core is not installed; run: cd tests/browser && PUPPETEER_SKIP_DOWNLOAD=1 npm ci');
  }
}

// ---- the run, the server, the browser ---------------------------------------------------------

function trainTinyRun(a, runsRoot) {
  const dir = path.join(runsRoot, 'tiny');
  run_(a.binary, ['train', '--config', a.config, '--set', 'train.max_steps=60', '--set', 'train.log_every=5',
    '--set', 'train.valid_every=30', '--set', `run.dir=${dir}`, '--set', 'run.threads=1']);
  return dir;
}

function pickRun(runsRoot) {
  for (const name of fs.readdirSync(runsRoot).sort()) {
    const dir = path.join(runsRoot, name);
    if (fs.existsSync(path.join(dir, 'checkpoint-best.safetensors')) && fs.existsSync(path.join(dir, 'metrics.tsv'))) return {name, dir};
  }
  fail(`explorer.test.mjs: no run with checkpoint-best.safetensors and metrics.tsv under ${runsRoot}`);
}

// Starts `serve --port 0` and resolves with {proc, url} once it printed its URL.
function startServer(a, runsRoot) {
  const proc = spawn(a.binary, ['serve', '--port', '0', '--runs', runsRoot, '--configs', a.configs], {stdio: ['ignore', 'pipe', 'pipe']});
  let out = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('serve printed no URL within ' + WAIT_MS + ' ms: ' + out)), WAIT_MS);
    const onData = (d) => {
      out += d;
      const m = out.match(/http:\/\/[\w.:[\]-]+:(\d+)\//);
      if (m) { clearTimeout(timer); resolve({proc, url: m[0], output: () => out}); }
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`serve exited with ${code} before printing a URL: ${out}`)); });
  });
}

function stopServer(server) {
  return new Promise((resolve) => {
    if (server.proc.exitCode !== null) { resolve(server.proc.exitCode); return; }
    const timer = setTimeout(() => { server.proc.kill('SIGKILL'); resolve('killed after ' + WAIT_MS + ' ms'); }, WAIT_MS);
    server.proc.removeAllListeners('exit');
    server.proc.on('exit', (code, signal) => { clearTimeout(timer); resolve(code === null ? signal : code); });
    server.proc.kill('SIGTERM');
  });
}

// Every console error, uncaught exception, failed request and HTTP error of the page, since
// the last take().
function watchPage(page) {
  let problems = [];
  const urls = [];
  page.on('request', (r) => urls.push(r.url()));
  page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure() ? r.failure().errorText : ''}`));
  page.on('response', (r) => { if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`); });
  return {take: () => { const p = problems; problems = []; return p; }, urls};
}

async function visibleErrors(page) {
  return page.$$eval('.error', (els) => els.filter((e) => !e.hidden && e.offsetParent !== null).map((e) => e.id + ': ' + e.textContent));
}

async function api(url, route, body) {
  const res = await fetch(url + route.replace(/^\//, ''), body ? {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)} : {});
  const json = await res.json();
  if (!res.ok) throw new Error(`${route}: HTTP ${res.status} ${JSON.stringify(json)}`);
  return json;
}

async function openTab(page, tab) {
  await page.click(`#tabs button[data-tab="${tab}"]`);
  await page.waitForFunction((t) => !document.querySelector(`#page-${t}`).hidden, {timeout: WAIT_MS}, tab);
}

// Waits until no request of the page is in flight (the views fetch when a tab opens).
async function settle(page) {
  await page.waitForNetworkIdle({idleTime: 400, timeout: WAIT_MS});
}

async function screenshot(a, page, name) {
  if (!a.screenshots) return;
  fs.mkdirSync(a.screenshots, {recursive: true});
  // a full-page screenshot would repeat the sticky header in the middle of a long page
  const unstick = await page.addStyleTag({content: 'header.top { position: static !important; }'});
  await page.screenshot({path: path.join(a.screenshots, `explorer-${name}.png`), fullPage: true});
  await unstick.evaluate((e) => e.remove());
}

// ---- the checks -------------------------------------------------------------------------------

// A browser whose language is Chinese gets the Chinese page on its first visit (headless
// chromium ignores --lang here, so navigator.language is set for this page).
async function checkBrowserLanguage(browser, url) {
  const page = await browser.newPage();
  await page.evaluateOnNewDocument(() => {
    Object.defineProperty(navigator, 'language', {get: () => 'zh-CN'});
    Object.defineProperty(navigator, 'languages', {get: () => ['zh-CN', 'zh']});
  });
  await page.goto(url, {waitUntil: 'networkidle0', timeout: WAIT_MS});
  await page.waitForSelector('body[data-ready="1"]', {timeout: WAIT_MS});
  const label = await page.$eval('#tabs button[data-tab="runs"]', (b) => b.textContent);
  const stored = await page.evaluate(() => localStorage.getItem('sf-lang'));
  check('a Chinese browser gets the Chinese page on its first visit (not stored until switched)', label === '训练运行' && stored === null, `${label}, stored ${stored}`);
  await page.close();
}

async function checkPagesLoad(a, page, watch, url) {
  await page.goto(url, {waitUntil: 'networkidle0', timeout: WAIT_MS});
  await page.waitForSelector('body[data-ready="1"]', {timeout: WAIT_MS});
  for (const tab of PAGES) {
    await openTab(page, tab);
    await settle(page);
    const problems = [...watch.take(), ...(await visibleErrors(page))];
    check(`page "${tab}" loads with no console error, failed request or error box`, problems.length === 0, problems.join('\n'));
  }
  const chartSeries = await page.$$eval('#runs-charts path.series', (p) => p.length);
  check('the runs page draws curves of the run', chartSeries > 0, `${chartSeries} series`);
  const foreign = watch.urls.filter((u) => !u.startsWith(url) && !u.startsWith('data:'));
  check('the page fetches nothing but the server\'s own files and API', foreign.length === 0, foreign.join('\n'));
}

async function typeSentence(page, selector, text) {
  await page.click(selector, {clickCount: 3});
  await page.$eval(selector, (e) => { e.value = ''; });
  await page.type(selector, text);
}

async function translateInPage(page, sentence, mode, beam) {
  await page.select('#tr-mode', mode);
  if (mode === 'beam') { await page.$eval('#tr-beam', (e, b) => { e.value = String(b); }, beam); await page.$eval('#tr-lp', (e) => { e.value = '1'; }); }
  const before = await page.$eval('#tr-output', (e) => e.dataset.generation || '0');
  await typeSentence(page, '#tr-text', sentence);
  await page.keyboard.press('Enter');
  await page.waitForFunction((b) => document.querySelector('#tr-output').dataset.generation !== b, {timeout: WAIT_MS}, before);
  return page.$eval('#tr-output', (e) => e.textContent);
}

async function checkTranslate(a, page, watch, runDir) {
  await openTab(page, 'translate');
  await settle(page);
  const checkpoint = path.join(runDir, 'checkpoint-best.safetensors');
  const greedyCli = run_(a.binary, ['translate', '--checkpoint', checkpoint, '--beam', '1'], a.sentence + '\n').trim();
  const greedy = await translateInPage(page, a.sentence, 'greedy', 1);
  check('typing a sentence shows the translation `scratchformer translate --beam 1` prints', greedy === greedyCli,
    `page: "${greedy}"\ncli:  "${greedyCli}"`);
  const cards = await page.$$eval('#tr-tokens .token-card', (cs) => cs.map((c) => c.querySelectorAll('.alt').length));
  check('each output token shows its top alternatives (1 to 5, with bars)', cards.length > 0 && cards.every((n) => n >= 1 && n <= 5), JSON.stringify(cards));
  const beamCli = run_(a.binary, ['translate', '--checkpoint', checkpoint, '--beam', '4', '--length-penalty', '1'], a.sentence + '\n').trim();
  const beam = await translateInPage(page, a.sentence, 'beam', 4);
  check('beam 4 shows the translation `scratchformer translate --beam 4` prints', beam === beamCli, `page: "${beam}"\ncli:  "${beamCli}"`);
  // every finished hypothesis, best first (beam search may finish more than `beam` of them)
  const rows = await page.$$eval('#tr-candidates tbody tr', (rs) => rs.map((r) => ({text: r.cells[1].textContent, score: parseFloat(r.cells[2].textContent)})));
  const sorted = rows.every((r, i) => i === 0 || r.score <= rows[i - 1].score);
  check('beam search lists its candidates with scores, best first, the first one the output', rows.length >= 1 && sorted && rows[0].text === beam,
    JSON.stringify(rows));
  const problems = [...watch.take(), ...(await visibleErrors(page))];
  check('translating gave no console error', problems.length === 0, problems.join('\n'));
  await screenshot(a, page, 'translate');
}

async function checkAttention(a, page, watch, url, run) {
  await page.click('#tr-to-attention');
  await page.waitForSelector('#at-model-view .thumb', {timeout: WAIT_MS});
  await settle(page);
  const answer = await api(url, '/api/attention', {run: run.name, checkpoint: 'checkpoint-best.safetensors', text: a.sentence});
  const grids = await page.$$eval('#at-model-view .model-grid', (gs) => gs.map((g) => ({kind: g.dataset.stack, thumbs: g.querySelectorAll('.thumb').length})));
  const want = answer.stacks.map((s) => ({kind: s.kind, thumbs: s.layers * s.heads}));
  check('the model view shows layers x heads thumbnails for every stack', JSON.stringify(grids) === JSON.stringify(want),
    `page: ${JSON.stringify(grids)}\napi:  ${JSON.stringify(want)}`);
  await checkHover(page, answer);
  // attention beside attribution: every method and every cross-attention head can be shown
  await page.$eval('#ab-go', (b) => b.click());
  await page.waitForFunction(() => !document.querySelector('#ab-result').hidden || !document.querySelector('#ab-error').hidden, {timeout: WAIT_MS});
  const methods = await page.$$eval('#ab-method option', (os) => os.map((o) => o.value));
  let drawn = 0;
  for (const m of methods) {
    await page.select('#ab-method', m);
    drawn += await page.$$eval('#ab-view canvas.heatmap', (cs) => cs.length);
  }
  const heads = answer.stacks.filter((s) => s.kind === 'cross').reduce((n, s) => n + s.layers * s.heads, 0);
  // a column label turned 60 degrees rises w sin 60 and reaches w cos 60 to the right: none is cut
  const cut = await page.$$eval('canvas.heatmap', (cs) => cs.filter((c) => +c.dataset.labelWidth > 0 &&
    (+c.dataset.labelUp < 0.86 * c.dataset.labelWidth || +c.dataset.labelRight < 0.5 * c.dataset.labelWidth - 1)).length);
  const labelled = await page.$$eval('canvas.heatmap', (cs) => cs.filter((c) => +c.dataset.labelWidth > 0).length);
  check('no rotated column label of a heatmap is cut short', labelled > 0 && cut === 0, `${cut} of ${labelled} heatmaps cut`);
  check('attribution: four methods and every cross-attention head drawn, and the ablation bars',
    methods.length === 4 + heads && drawn === methods.length && (await page.$$eval('#ab-ablation rect', (r) => r.length)) === heads,
    `${methods.length} choices, ${drawn} drawn, ${heads} heads`);
  const problems = [...watch.take(), ...(await visibleErrors(page))];
  check('the attention page gave no console error', problems.length === 0, problems.join('\n'));
  await screenshot(a, page, 'attention');
}

// Hovering query token i shades the keys by row i of the shown head (layer 1, head 1 of the
// stack the page opens: cross-attention when there is one).
async function checkHover(page, answer) {
  const stackIndex = Math.max(0, answer.stacks.findIndex((s) => s.kind === 'cross'));
  const s = answer.stacks[stackIndex];
  await page.select('#at-stack', String(stackIndex));
  await page.select('#at-layer', '0');
  await page.select('#at-head', '0');
  const weightsAfterHover = async (i) => {
    await page.hover(`#at-head-view .tok-q[data-index="${i}"] text`);
    return page.$$eval('#at-head-view .tok-k', (ks) => ks.map((k) => parseFloat(k.getAttribute('data-weight'))));
  };
  const rows = [];
  for (let i = 0; i < Math.min(2, s.queries.length); i++) rows.push(await weightsAfterHover(i));
  const close = (got, want) => got.length === want.length && got.every((g, j) => Math.abs(g - want[j]) < 1e-3);
  check('hovering a query token highlights its weights (the API\'s row of that head)', rows.length > 0 && close(rows[0], s.weights[0][0][0]),
    `page: ${JSON.stringify(rows[0])}\napi:  ${JSON.stringify(s.weights[0][0][0])}`);
  if (rows.length > 1) {
    check('hovering another token changes the highlighted weights', close(rows[1], s.weights[0][0][1]) && !close(rows[0], rows[1]),
      `token 0: ${JSON.stringify(rows[0])}\ntoken 1: ${JSON.stringify(rows[1])}`);
  }
  const lit = await page.$$eval('#at-head-view line.att-line', (ls) => ls.filter((l) => parseFloat(l.getAttribute('stroke-opacity')) > 0 && l.classList.contains('hot')).length);
  check('only the hovered token\'s lines stay highlighted', lit > 0 && lit <= s.keys.length, `${lit} lines (keys: ${s.keys.length})`);
}

async function checkChinese(a, page, watch, url) {
  const english = await page.$eval('#tabs button[data-tab="runs"]', (b) => b.textContent);
  await page.click('.lang-switch button[data-lang="zh"]');
  const labels = await page.$$eval('#tabs button', (bs) => bs.map((b) => b.textContent));
  check('switching to Chinese changes the labels', labels[0] === '训练运行' && labels[0] !== english && labels.every((l) => /[\u4e00-\u9fff]/.test(l)), JSON.stringify(labels));
  const lang = await page.evaluate(() => [document.documentElement.lang, localStorage.getItem('sf-lang')]);
  check('the page says lang="zh-CN" and remembers the choice', lang[0] === 'zh-CN' && lang[1] === 'zh', JSON.stringify(lang));
  await page.goto('about:blank');  // a real reload: going to url#attention from url#lessons only changes the hash
  await page.goto(url + '#attention', {waitUntil: 'networkidle0', timeout: WAIT_MS});
  await page.waitForSelector('body[data-ready="1"]', {timeout: WAIT_MS});
  await page.waitForSelector('#at-model-view .thumb', {timeout: WAIT_MS});
  const after = await page.$eval('#tabs button[data-tab="runs"]', (b) => b.textContent);
  check('after a reload the page is still in Chinese', after === '训练运行', after);
  await screenshot(a, page, 'attention-zh');
  for (const tab of PAGES) { await openTab(page, tab); await settle(page); }
  const missing = await page.evaluate(() => [...window.SF_I18N_MISSING]);
  check('no label is missing in either language', missing.length === 0, missing.join(', '));
  const problems = [...watch.take(), ...(await visibleErrors(page))];
  check('the Chinese pages gave no console error', problems.length === 0, problems.join('\n'));
  await page.click('.lang-switch button[data-lang="en"]');
}

// Appends rows to metrics.tsv, as a training in another terminal would, and waits for the
// loss curve's train series to have that many more points.
async function checkCurvesGrow(a, page, watch, run) {
  await openTab(page, 'runs');
  await settle(page);
  const selector = `#runs-charts .chart[data-chart="loss"] path.series[data-series^="${run.name} "]`;
  const count = () => page.$eval(selector, (p) => +p.getAttribute('data-points'));
  const before = await count();
  const file = path.join(run.dir, 'metrics.tsv');
  const lines = fs.readFileSync(file, 'utf8').trim().split('\n');
  const header = lines[0].split('\t');
  const last = lines.slice(1).map((l) => l.split('\t')).filter((c) => c[header.indexOf('kind')] === 'train').pop();
  const added = 3;
  let stepNo = Math.max(...lines.slice(1).map((l) => +l.split('\t')[0]));
  for (let k = 0; k < added; k++) {
    const row = [...last];
    row[header.indexOf('step')] = String(stepNo += 5);
    row[header.indexOf('loss')] = String(+last[header.indexOf('loss')] * (0.9 - 0.1 * k));
    fs.appendFileSync(file, row.join('\t') + '\n');
    await sleep(300);
  }
  await page.waitForFunction((sel, n) => { const p = document.querySelector(sel); return p && +p.getAttribute('data-points') >= n; },
    {timeout: WAIT_MS}, selector, before + added).catch(() => {});
  const after = await count();
  check('the curves grow when metrics.tsv grows (polled every 2 s)', after === before + added, `points before ${before}, after ${after}, rows added ${added}`);
  const problems = [...watch.take(), ...(await visibleErrors(page))];
  check('polling gave no console error', problems.length === 0, problems.join('\n'));
  await screenshot(a, page, 'runs');
}

async function checkStep(a, page, watch) {
  await openTab(page, 'step');
  await page.click('#st-go');
  await page.waitForFunction(() => !document.querySelector('#st-result').hidden || !document.querySelector('#st-error').hidden, {timeout: WAIT_MS * 3});
  const rows = await page.$$eval('#st-tree tr.tree-row', (r) => r.length);
  const charts = await page.$$eval('#st-depth .chart path.series', (p) => p.length);
  check('inside one step shows the module tree and gradient size by depth for A and B', rows > 0 && charts >= 2,
    `${rows} tree rows, ${charts} series; errors: ${(await visibleErrors(page)).join(' ')}`);
  if (rows > 0) {
    await page.click('#st-tree tr.tree-row:nth-child(2)');
    const details = await page.$$eval('#st-tree tr.details svg.hist rect', (r) => r.length);
    check('clicking a module shows its histogram and first values', details > 0, `${details} bars`);
  }
  const problems = [...watch.take(), ...(await visibleErrors(page))];
  check('inside one step gave no console error', problems.length === 0, problems.join('\n'));
  await screenshot(a, page, 'step');
}

// Every quick demo (the slow ones train for up to 90 s: their reports are checked by the C++
// tests) draws each figure of its report, with no error, nothing wider than the window, no raw
// JSON; worked-example steps through its matrices one at a time.
async function checkLessonsAndTraining(a, page, watch) {
  await openTab(page, 'training');
  await settle(page);
  await screenshot(a, page, 'training');
  await openTab(page, 'lessons');
  await page.waitForSelector('#ls-list button[data-demo]', {timeout: WAIT_MS});
  const demos = await page.evaluate(() => fetch('/api/demos').then((r) => r.json()).then((j) => j.demos));
  for (const d of demos.filter((x) => x.seconds <= 1)) {
    await page.$eval(`#ls-list button[data-demo="${d.name}"]`, (b) => b.click());
    await page.waitForFunction((name) => !document.querySelector('#ls-result').hidden && document.querySelector('#ls-running').hidden &&
      document.querySelector('#ls-title').textContent === name, {timeout: WAIT_MS}, d.name);
    const shown = await page.evaluate(() => ({
      figures: document.querySelectorAll('#ls-view figure').length,
      drawn: document.querySelectorAll('#ls-view figure canvas, #ls-view figure svg, #ls-view figure table').length,
      raw: document.querySelectorAll('#ls-view pre').length,
      steps: !document.querySelector('#ls-steps').hidden,
      wider: document.documentElement.scrollWidth - window.innerWidth}));
    const problems = [...watch.take(), ...(await visibleErrors(page))];
    check(`demo "${d.name}" draws every figure of its report with no error`,
      shown.figures > 0 && shown.drawn >= shown.figures && shown.raw === 0 && shown.wider <= 0 && problems.length === 0,
      `${JSON.stringify(shown)}; ${problems.join('\n')}`);
    if (d.name === 'worked-example') {
      let clicks = 0;
      while (!(await page.$eval('#ls-next', (b) => b.disabled)) && clicks < 50) { await page.$eval('#ls-next', (b) => b.click()); clicks++; }
      const label = await page.$eval('#ls-step-label', (e) => e.textContent);
      check('worked-example steps through its matrices one at a time', shown.steps && clicks >= 10 && label.includes(String(clicks + 1)), label);
    }
    if (d.name === 'masks') await screenshot(a, page, 'lessons');
  }
}

// The guided tour of every page: each step shows its own text beside a visible element, Next
// walks to the end and closes it; in Chinese the texts are Chinese.
async function checkTour(page, watch) {
  for (const lang of ['en', 'zh']) {
    await page.$eval(`.lang-switch button[data-lang="${lang}"]`, (b) => b.click());
    for (const tab of PAGES) {
      await openTab(page, tab);
      await page.$eval('#tour-start', (b) => b.click());
      const n = await page.evaluate((t) => TOURS[t].length, tab);
      const texts = [];
      let focused = 0;
      for (let i = 0; i < n && texts.length < 20; i++) {
        texts.push(await page.$eval('#tour-text', (e) => e.textContent));
        focused += await page.$$eval('.tour-focus', (es) => es.filter((e) => e.offsetParent !== null).length);
        await page.$eval('#tour-next', (b) => b.click());
      }
      const closed = await page.$eval('#tour', (e) => e.hidden);
      const ok = n >= 2 && new Set(texts).size === n && texts.every((x) => x.length >= 12 && !x.startsWith('tour.')) &&
        focused === n && closed && (lang === 'en' || texts.every((x) => /[\u4e00-\u9fff]/.test(x)));
      check(`the ${lang} tour of "${tab}" walks ${n} steps, each with its own text beside a visible element, then closes`, ok,
        JSON.stringify({n, texts, focused, closed}));
    }
  }
  await page.$eval('.lang-switch button[data-lang="en"]', (b) => b.click());
  const problems = [...watch.take(), ...(await visibleErrors(page))];
  check('the tours gave no console error', problems.length === 0, problems.join('\n'));
}

async function checkErrorShown(page, watch) {
  await openTab(page, 'translate');
  await page.select('#tr-mode', 'greedy');
  await page.$eval('#tr-text', (e) => { e.value = 'ka '.repeat(400); });
  await page.click('#tr-go');
  await page.waitForFunction(() => !document.querySelector('#tr-error').hidden, {timeout: WAIT_MS}).catch(() => {});
  const text = await page.$eval('#tr-error', (e) => (e.hidden ? '' : e.textContent));
  const problems = watch.take().filter((p) => !/HTTP 400|status of 400/.test(p));
  check('an API error (text over the limit) is shown on the page, and nothing else fails', /1000/.test(text) && problems.length === 0,
    `error box: "${text}"; other problems: ${problems.join('\n')}`);
}

// `scratchformer report` of the run with one sentence, opened as a file: the same views from
// window.SF_REPORT_DATA, the live-only tabs hidden, nothing fetched.
async function checkReport(a, browser, run, tmp) {
  const sentences = path.join(tmp, 'sentences.txt');
  const out = path.join(tmp, 'report.html');
  fs.writeFileSync(sentences, a.sentence + '\n');
  const checkpoint = path.join(run.dir, 'checkpoint-best.safetensors');
  run_(a.binary, ['report', '--run', run.dir, '--out', out, '--sentences', sentences]);
  const page = await browser.newPage();
  await page.setViewport({width: 1400, height: 1000});
  const watch = watchPage(page);
  await page.goto('file://' + out, {waitUntil: 'load', timeout: WAIT_MS});
  await page.waitForSelector('body[data-ready="1"]', {timeout: WAIT_MS});
  const shown = await page.$$eval('#tabs button', (bs) => bs.filter((b) => b.offsetParent !== null).map((b) => b.dataset.tab));
  check('the report shows the runs, translate, attention and over-training tabs only', JSON.stringify(shown) === '["runs","translate","attention","training"]', JSON.stringify(shown));
  const series = await page.$$eval('#runs-charts path.series', (p) => p.length);
  check('the report draws the curves', series > 0, `${series} series`);
  await screenshot(a, page, 'report');
  await openTab(page, 'translate');
  await page.waitForFunction(() => document.querySelector('#tr-output').textContent !== '' || !document.querySelector('#tr-error').hidden, {timeout: WAIT_MS});
  const text = await page.$eval('#tr-output', (e) => e.textContent);
  const cli = run_(a.binary, ['translate', '--checkpoint', checkpoint, '--beam', '1'], a.sentence + '\n').trim();
  check('the report shows the sentence\'s translation (greedy, as the CLI prints it)', text === cli, `report: "${text}"\ncli:    "${cli}"`);
  await page.click('#tr-to-attention');
  await page.waitForSelector('#at-model-view .thumb', {timeout: WAIT_MS});
  await page.$eval('#ab-go', (b) => b.click());
  await page.waitForFunction(() => !document.querySelector('#ab-result').hidden || !document.querySelector('#ab-error').hidden, {timeout: WAIT_MS});
  check('the report shows attention beside attribution from its data', await page.$eval('#ab-result', (e) => !e.hidden),
    await page.$eval('#ab-error', (e) => e.textContent));
  await openTab(page, 'training');
  const foreign = watch.urls.filter((u) => !u.startsWith('file:') && !u.startsWith('data:'));
  const problems = [...watch.take(), ...(await visibleErrors(page))];
  check('the report file loads with no console error and fetches nothing', problems.length === 0 && foreign.length === 0, [...problems, ...foreign].join('\n'));
  await page.close();
}

// ---- main -------------------------------------------------------------------------------------

async function main() {
  const a = parseArgs(process.argv);
  const puppeteer = await loadPuppeteer();
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'sf-explorer-test-'));
  // a copy of --runs: the test appends rows to a metrics.tsv
  const runsRoot = path.join(tmp, 'runs');
  if (a.runs) fs.cpSync(a.runs, runsRoot, {recursive: true}); else trainTinyRun(a, runsRoot);
  const target = pickRun(runsRoot);
  const server = await startServer(a, runsRoot);
  const browser = await puppeteer.launch({executablePath: a.chromium, headless: true,
    args: ['--no-sandbox', '--lang=en-US', '--disable-gpu', '--no-first-run'], env: {...process.env, LANGUAGE: 'en_US'}});
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1400, height: 1000});
    await page.setExtraHTTPHeaders({'Accept-Language': 'en-US,en'});
    const watch = watchPage(page);
    await step('browser language', () => checkBrowserLanguage(browser, server.url));
    await step('pages load', () => checkPagesLoad(a, page, watch, server.url));
    await step('translate', () => checkTranslate(a, page, watch, target.dir));
    await step('attention', () => checkAttention(a, page, watch, server.url, target));
    await step('curves', () => checkCurvesGrow(a, page, watch, target));
    await step('step', () => checkStep(a, page, watch));
    await step('lessons', () => checkLessonsAndTraining(a, page, watch));
    await step('tour', () => checkTour(page, watch));
    await step('chinese', () => checkChinese(a, page, watch, server.url));
    await step('errors', () => checkErrorShown(page, watch));
    await step('report', () => checkReport(a, browser, target, tmp));
  } finally {
    await browser.close();
    const code = await stopServer(server);
    check('serve stops on SIGTERM with status 0', code === 0, `exit: ${code}; output: ${server.output()}`);
    if (!a.keep) fs.rmSync(tmp, {recursive: true, force: true});
  }
  const failed = results.filter((r) => !r.ok).length;
  console.log(`# ${results.length - failed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
}

main().catch((e) => { console.error('explorer.test.mjs: ' + (e && e.stack ? e.stack : e)); process.exit(1); });
