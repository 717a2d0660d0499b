// page.test.mjs — the chat page of `pinfer serve` (GET /) in headless Chromium.
//
//  - stories260K in memory: the page shows the model's id and meta, a message
//    typed and sent streams a reply into the assistant message (the same text
//    as a non-streamed greedy request), tok/s and tokens generated are filled
//    in and the offload figures read "—"; a second turn sends the whole
//    conversation; user text is shown as text, not markup; a server error
//    (max_tokens above the slot's context) shows the error body's message;
//  - a generated ReLU model with predictors as a bundle file under
//    --mem-budget (a budget a little above the file's minimum, so part of the
//    FFN is read from flash): the per-token offload figures are numbers;
//  - --api-key: without the key the page shows the 401 message; with it typed
//    into the API key field the model loads and a reply streams, the key is
//    sent as a Bearer token and kept across a reload.
// Every server is stopped with SIGTERM and must exit 0.
//
// Run: node --test tests/serve/page.test.mjs (from the repository root;
// PI_TEST_PINFER picks the binary). Skips (exit 77) without /usr/bin/chromium.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startServer, runPinfer, needFile, stories, pinfer } from './server.mjs';

const CHROMIUM = '/usr/bin/chromium';
if (!fs.existsSync(CHROMIUM)) {
  console.log(`SKIP: ${CHROMIUM} is absent (the page is driven in headless Chromium)`);
  process.exit(77);
}
needFile(pinfer, 'the pinfer binary: build it first');
needFile(stories, 'the stories260K model');
const { chromium } = await import('playwright-core');

const MiB = 1 << 20;
const REPLY_MS = 60000;  // a reply, from Send to [DONE]

let browser;
before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'], timeout: 60000 });
}, { timeout: 90000 });
after(async () => {
  await browser?.close();
}, { timeout: 30000 });

// Start a server, run fn(server, page) with a fresh page, then close the page,
// stop the server with SIGTERM and check it exited 0 (unless fn failed: its
// error is the one reported).
async function withPage(args, opts, fn) {
  const srv = await startServer(args, opts);
  const context = await browser.newContext();
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  let failed = true;
  try {
    await fn(srv, page);
    assert.deepEqual(pageErrors, [], 'script errors in the page');
    failed = false;
  } finally {
    await context.close().catch(() => {});
    const r = await srv.stop('SIGTERM');
    if (!failed) assert.deepEqual(r, { code: 0, sig: null }, `server exit after SIGTERM; log:\n${srv.log()}`);
  }
}

async function json(url, init = {}) {
  const res = await fetch(url, init);
  return { status: res.status, body: await res.json() };
}

const text = (page, sel) => page.locator(sel).textContent();
const count = (page, sel) => page.locator(sel).count();

// Type a message, click Send and wait until the reply's stream is finished.
async function sendAndWait(page, message) {
  const before = await count(page, '.msg.assistant[data-done]');
  await page.fill('#input', message);
  await page.click('#send');
  await page.waitForFunction(
    (n) => document.querySelectorAll('.msg.assistant[data-done]').length > n && document.body.dataset.busy === 'false',
    before, { timeout: REPLY_MS });
  return page.locator('.msg.assistant').last();
}

function isNumber(s) {
  return typeof s === 'string' && s.trim() !== '' && Number.isFinite(Number(s));
}

test('page: chat with stories260K in memory', { timeout: 150000 }, async () => {
  await withPage(['-n', '64', '-np', '1', '-t', '1'], {}, async (srv, page) => {
    const models = await json(`${srv.url}/v1/models`);
    assert.equal(models.status, 200);
    const id = models.body.data[0].id;

    const res = await page.goto(`${srv.url}/`);
    assert.equal(res.status(), 200);
    assert.match(res.headers()['content-type'], /^text\/html/);
    await page.waitForFunction((want) => document.getElementById('model-id').textContent === want, id, { timeout: 10000 });
    const meta = await text(page, '#model-meta');
    assert.match(meta, new RegExp(`context ${models.body.data[0].meta.n_ctx_slot} per slot`));
    assert.match(meta, /in memory/);
    for (const sel of ['#input', '#send', '#stop', '#api-key', '#temperature', '#max-tokens']) {
      assert.equal(await count(page, sel), 1, sel);
    }

    // First turn, greedy: markup in the message is shown as text.
    const first = '<b>Once</b> upon a <img src=x onerror="window.pwned=1">time';
    await page.fill('#temperature', '0');
    await page.fill('#max-tokens', '24');
    const sent = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
    const reply1 = await sendAndWait(page, first);
    const req1 = (await sent).postDataJSON();
    assert.equal(req1.stream, true);
    assert.equal(req1.temperature, 0);
    assert.equal(req1.max_tokens, 24);
    assert.deepEqual(req1.messages, [{ role: 'user', content: first }]);
    assert.equal(await text(page, '.msg.user'), first);
    assert.equal(await count(page, '#messages img, #messages b'), 0, 'message text became markup');
    assert.equal(await page.evaluate(() => window.pwned), undefined);

    const out1 = await reply1.textContent();
    assert.ok(out1.length > 0, 'the assistant message is empty');
    assert.match(await text(page, '#status'), /^done/);
    // The streamed pieces add up to the non-streamed greedy reply.
    const plain = await json(`${srv.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: req1.messages, temperature: 0, max_tokens: 24 }),
    });
    assert.equal(plain.status, 200);
    assert.equal(out1, plain.body.choices[0].message.content);

    const tps = Number(await text(page, '#stat-tps'));
    assert.ok(tps > 0, `stat-tps: ${await text(page, '#stat-tps')}`);
    const n = Number(await text(page, '#stat-n'));
    assert.ok(Number.isInteger(n) && n > 0 && n <= 24, `stat-n: ${n}`);
    for (const id of ['stat-resident', 'stat-cached', 'stat-read', 'stat-mb', 'stat-iowait', 'stat-hidden']) {
      assert.equal(await text(page, `#${id}`), '—', id);
    }
    assert.match(await text(page, '#offload-note'), /in memory/);

    // Second turn: the whole conversation goes with it.
    const sent2 = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
    const reply2 = await sendAndWait(page, 'And then?');
    assert.deepEqual((await sent2).postDataJSON().messages, [
      { role: 'user', content: first },
      { role: 'assistant', content: out1 },
      { role: 'user', content: 'And then?' },
    ]);
    assert.ok((await reply2.textContent()).length > 0);
    assert.equal(await count(page, '.msg.user'), 2);
    assert.equal(await count(page, '.msg.assistant'), 2);

    // A request the server refuses: its error.message is shown, the turn is taken back.
    const tooMany = 100000;
    const refused = await json(`${srv.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }], max_tokens: tooMany, stream: true }),
    });
    assert.equal(refused.status, 400);
    await page.fill('#max-tokens', String(tooMany));
    await page.fill('#input', 'too long');
    await page.click('#send');
    await page.locator('.error').waitFor({ state: 'visible', timeout: REPLY_MS });
    const err = await text(page, '.error');
    assert.ok(err.includes(refused.body.error.message), `error shown: ${err}`);
    await page.waitForFunction(() => document.body.dataset.busy === 'false', null, { timeout: REPLY_MS });
    assert.equal(await count(page, '.msg.user'), 2);
    assert.equal(await count(page, '.msg.assistant'), 2);
    assert.equal(await page.inputValue('#input'), 'too long');
  });
});

test('page: offload figures under --mem-budget', { timeout: 240000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pinfer-page-'));
  try {
    // A tiny ReLU model with planted sparsity and predictors, and its bundle file.
    const plainFile = path.join(dir, 'plain.gguf');
    const bundle = path.join(dir, 'bundle.gguf');
    let r = runPinfer(['gen-model', '--preset', 'tiny', '--ffn', '2048', '--act', 'relu', '--active', '0.1',
      '--predictor', '-t', '1', '-o', plainFile, '--bundle-out', bundle]);
    assert.equal(r.status, 0, r.stderr);

    // The file's minimum budget, from the refusal of a budget far below it.
    r = runPinfer(['run', '-m', bundle, '-c', '512', '--mem-budget', '1M', '-p', 'x', '-n', '1', '-t', '1']);
    assert.notEqual(r.status, 0);
    const min = /minimum of ([\d.]+) MiB/.exec(r.stderr);
    assert.ok(min, `no minimum in: ${r.stderr}`);
    // 2 MiB above the minimum: part of the FFN resident, the rest read from flash.
    const budget = Math.ceil(Number(min[1])) + 2;
    const size = fs.statSync(bundle).size;
    assert.ok(budget * MiB < size, `budget ${budget} MiB against a ${size}-byte file`);

    await withPage(['-c', '512', '-np', '1', '-t', '1', '--mem-budget', `${budget}M`], { model: bundle }, async (srv, page) => {
      const models = await json(`${srv.url}/v1/models`);
      assert.equal(models.body.data[0].meta.offloaded, true);
      await page.goto(`${srv.url}/`);
      await page.waitForFunction((want) => document.getElementById('model-id').textContent === want,
        models.body.data[0].id, { timeout: 10000 });
      assert.match(await text(page, '#model-meta'), new RegExp(`offloaded.*budget ${budget}\\.0 MiB`));

      await page.fill('#max-tokens', '16');
      const reply = await sendAndWait(page, 'hello there');
      assert.ok((await reply.textContent()).length > 0, 'the assistant message is empty');
      const figures = {};
      for (const id of ['stat-tps', 'stat-n', 'stat-resident', 'stat-cached', 'stat-read', 'stat-mb', 'stat-iowait', 'stat-hidden']) {
        figures[id] = await text(page, `#${id}`);
      }
      for (const id of ['stat-tps', 'stat-resident', 'stat-read', 'stat-mb']) {
        assert.ok(isNumber(figures[id]), `${id} is not a number: ${JSON.stringify(figures)}`);
      }
      assert.ok(Number(figures['stat-read']) > 0, `nothing read from flash: ${JSON.stringify(figures)}`);
      assert.ok(Number(figures['stat-mb']) > 0, `no MB read: ${JSON.stringify(figures)}`);
      assert.match(await text(page, '#offload-note'), /per decoded token/);
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('page: --api-key', { timeout: 150000 }, async () => {
  const key = 'page-test-key';
  await withPage(['-n', '64', '-np', '1', '-t', '1', '--api-key', key], {}, async (srv, page) => {
    const denied = await json(`${srv.url}/v1/models`);
    assert.equal(denied.status, 401);
    const models = await json(`${srv.url}/v1/models`, { headers: { Authorization: `Bearer ${key}` } });
    const id = models.body.data[0].id;

    const res = await page.goto(`${srv.url}/`);
    assert.equal(res.status(), 200);
    await page.locator('.error').waitFor({ state: 'visible', timeout: 10000 });
    assert.ok((await text(page, '.error')).includes(denied.body.error.message));

    await page.fill('#api-key', key);
    await page.press('#api-key', 'Tab');  // change: stored, and the model reloaded with the key
    await page.waitForFunction((want) => document.getElementById('model-id').textContent === want, id, { timeout: 10000 });
    assert.equal(await page.locator('.error').isVisible(), false);

    await page.fill('#max-tokens', '8');
    const sent = page.waitForRequest((r) => r.url().endsWith('/v1/chat/completions'));
    const reply = await sendAndWait(page, 'hi');
    assert.equal((await sent).headers().authorization, `Bearer ${key}`);
    assert.ok((await reply.textContent()).length > 0);

    // The key is kept in localStorage across a reload.
    await page.reload();
    assert.equal(await page.inputValue('#api-key'), key);
    await page.waitForFunction((want) => document.getElementById('model-id').textContent === want, id, { timeout: 10000 });
  });
});
