// robust.test.mjs — `pinfer serve` under bad input and load, with plain fetch,
// node:http and raw node:net sockets: every bad request gets an OpenAI-style
// error and the server stays up; clients that leave free their slots; 32
// concurrent clients each get the text they get alone; SIGTERM finishes the
// requests in flight and exits 0; under --mem-budget the texts equal pinfer
// run's.
//
//   PI_TEST_PINFER=build/release/pinfer node --test tests/serve/robust.test.mjs
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startServer, runPinfer, needFile, stories } from './server.mjs';

needFile(stories, 'the serve tests drive the TinyStories model stories260K');

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'pinfer-serve-robust-'));
after(() => fs.rmSync(tmp, { recursive: true, force: true }));

// ---- helpers ----

// `pinfer run`: the generated text as run prints it after the prompt (with
// run's final newline: it adds one unless the output already ends in one).
function pinferRun(model, prompt, args) {
  const r = runPinfer(['run', '-m', model, '-p', prompt, ...args]);
  assert.equal(r.status, 0, `pinfer run ${args.join(' ')} failed:\n${r.stderr}`);
  assert.ok(r.stdout.startsWith(prompt), `run's stdout does not start with the prompt: ${JSON.stringify(r.stdout)}`);
  return { prompt, out: r.stdout.slice(prompt.length), stderr: r.stderr };
}
const asRunPrints = (prompt, text) => ((prompt + text).endsWith('\n') ? text : `${text}\n`);
function assertSameAsRun(text, run, what) {
  assert.equal(typeof text, 'string', `${what}: no text`);
  assert.equal(asRunPrints(run.prompt, text), run.out,
    `${what}: the server's text differs from pinfer run's\n server: ${JSON.stringify(text)}\n run:    ${JSON.stringify(run.out)}`);
}

// fetch with a deadline; {status, type, text, json (or undefined)}.
async function call(srv, method, route, body, { headers = {}, timeout = 30000 } = {}) {
  const init = { method, headers: { ...headers }, signal: AbortSignal.timeout(timeout) };
  if (body !== undefined) {
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
    if (!init.headers['Content-Type']) init.headers['Content-Type'] = 'application/json';
  }
  const res = await fetch(`${srv.url}${route}`, init);
  const text = await res.text();
  let json;
  try { json = JSON.parse(text); } catch { json = undefined; }
  return { status: res.status, type: res.headers.get('content-type') ?? '', text, json };
}

// What is wrong with an answer that should be the OpenAI-style error (null: nothing).
function errorProblem(r, status, type) {
  const p = [];
  if (r.status !== status) p.push(`status ${r.status}, expected ${status}`);
  if (!/application\/json/.test(r.type)) p.push(`Content-Type '${r.type}'`);
  const e = r.json?.error;
  if (!e || typeof e !== 'object') p.push('no error object');
  else {
    if (typeof e.message !== 'string' || !e.message) p.push('no error.message');
    if (e.type !== type) p.push(`error.type ${JSON.stringify(e.type)}, expected ${type}`);
    if (e.code !== status) p.push(`error.code ${JSON.stringify(e.code)}, expected ${status}`);
  }
  return p.length ? `${p.join('; ')} — body ${r.text.slice(0, 300)}` : null;
}

// Parse a text/event-stream body: the JSON events and whether [DONE] ended it.
function parseEvents(raw) {
  const events = [];
  let done = false;
  for (const block of raw.split('\n\n')) {
    const line = block.split('\n').find((l) => l.startsWith('data: '));
    if (!line) continue;
    const data = line.slice(6);
    if (data === '[DONE]') { done = true; continue; }
    events.push(JSON.parse(data));
  }
  return { events, done };
}

// A streamed completion by fetch: first resolves at the first event; done to
// {text, finish, done} (the [DONE] seen).
function streamCompletion(srv, body, timeout = 120000) {
  let onFirst;
  const first = new Promise((r) => { onFirst = r; });
  const done = (async () => {
    const res = await fetch(`${srv.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...body, stream: true }), signal: AbortSignal.timeout(timeout),
    });
    assert.equal(res.status, 200, `streamed completion: ${res.status}`);
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/);
    const dec = new TextDecoder();
    let raw = '';
    for await (const chunk of res.body) {
      raw += dec.decode(chunk, { stream: true });
      if (raw.includes('\n\n')) onFirst();
    }
    const { events, done: sawDone } = parseEvents(raw);
    let text = '';
    let finish = null;
    for (const ev of events) {
      text += ev.choices?.[0]?.text ?? '';
      finish = ev.choices?.[0]?.finish_reason ?? finish;
    }
    return { text, finish, done: sawDone, events };
  })();
  done.then(onFirst, onFirst);
  return { first, done };
}

// Write bytes on a raw socket and collect what comes back until the server
// closes it or the deadline: {data, closed, error}.
function rawExchange(port, chunks, { timeout = 10000, endAfter = false } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let data = '';
    let error = null;
    const timer = setTimeout(() => { sock.destroy(); resolve({ data, closed: false, error: 'timeout' }); }, timeout);
    sock.on('connect', () => {
      for (const c of chunks) sock.write(c);
      if (endAfter) sock.end();
    });
    sock.on('data', (d) => { data += d.toString('latin1'); });
    sock.on('error', (e) => { error = e.code ?? String(e); });
    sock.on('close', () => { clearTimeout(timer); resolve({ data, closed: true, error }); });
  });
}

// POST a body of `size` bytes (a JSON object with one long string) with
// node:http, with Content-Length or chunked: {status, type, text} when an answer
// came, and the client-side error if the server closed the connection first.
// The headers go first and the body only when no answer came to them within a
// second, so a server that refuses by Content-Length is read deterministically.
function postBig(port, route, size, { chunked = false, timeout = 30000 } = {}) {
  return new Promise((resolve) => {
    let answer = null;
    let settled = false;
    const finish = (extra) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...(answer ?? {}), ...extra });
    };
    const headers = { 'Content-Type': 'application/json' };
    if (!chunked) headers['Content-Length'] = String(size);
    const req = http.request({ host: '127.0.0.1', port, path: route, method: 'POST', headers });
    const timer = setTimeout(() => { req.destroy(); finish({ error: 'timeout' }); }, timeout);
    let answered;
    const gotAnswer = new Promise((r) => { answered = r; });
    const closed = new Promise((r) => req.once('close', r));
    req.on('response', (res) => {
      answer = { status: res.statusCode, type: res.headers['content-type'] ?? '', text: '' };
      answered();
      res.setEncoding('utf8');
      res.on('data', (d) => { answer.text += d; });
      res.on('end', () => finish({}));
      res.on('error', (e) => finish({ error: e.code ?? String(e) }));
      res.on('aborted', () => finish({ error: 'aborted' }));
    });
    req.on('error', (e) => { if (!answer) finish({ error: e.code ?? String(e) }); });
    closed.then(() => { if (!answer) finish({ error: 'closed' }); });
    (async () => {
      req.flushHeaders();
      await Promise.race([gotAnswer, closed, sleep(1000)]);
      const head = '{"prompt":"';
      const tail = '"}';
      const block = Buffer.alloc(64 * 1024, 'a');
      let left = size - head.length - tail.length;
      if (answer || settled) return;
      req.write(head);
      while (left > 0 && !answer && !req.destroyed && !settled) {
        const n = Math.min(left, block.length);
        left -= n;
        if (!req.write(block.subarray(0, n))) {
          await Promise.race([new Promise((r) => req.once('drain', r)), closed, gotAnswer]);
        }
      }
      if (!answer && !req.destroyed && !settled) req.end(tail);
    })().catch(() => {});
  });
}

async function health(srv) {
  const r = await call(srv, 'GET', '/health', undefined, { timeout: 10000 });
  assert.equal(r.status, 200, `/health: ${r.status} ${r.text}`);
  return r.json;
}

async function stopServer(srv) {
  if (!srv) return;
  const r = await srv.stop();
  assert.deepEqual(r, { code: 0, sig: null }, `the server did not exit 0 on SIGTERM:\n${srv.log().slice(-4000)}`);
}

const completion = async (srv, body, timeout = 60000) => {
  const r = await call(srv, 'POST', '/v1/completions', body, { timeout });
  assert.equal(r.status, 200, `completion ${JSON.stringify(body).slice(0, 200)}: ${r.status} ${r.text.slice(0, 300)}`);
  return r.json;
};

// ---- bad input ----

describe('bad requests get OpenAI-style errors and the server stays up', { timeout: 120000 }, () => {
  let srv;
  let normal;
  before(async () => {
    normal = pinferRun(stories, 'Once upon a time', ['-n', '16', '--temp', '0']);
    srv = await startServer(['-np', '2', '-c', '1024']);
  }, { timeout: 60000 });
  after(() => stopServer(srv), { timeout: 40000 });

  async function stillServes(what) {
    assert.equal(srv.proc.exitCode, null, `the server exited after ${what}:\n${srv.log().slice(-3000)}`);
    const res = await completion(srv, { prompt: 'Once upon a time', max_tokens: 16, temperature: 0 });
    assertSameAsRun(res.choices[0].text, normal, `a normal request after ${what}`);
    const h = await health(srv);
    assert.equal(h.status, 'ok');
  }

  test('malformed bodies, wrong types and impossible values: 400', { timeout: 60000 }, async () => {
    // a prompt of more than 1000 tokens: the slot holds 512 (-c 1024 over -np 2)
    const long = 'Once upon a time there was a little girl named Lily who loved to play. '.repeat(80);
    const tok = await call(srv, 'POST', '/tokenize', { content: long });
    assert.equal(tok.status, 200, tok.text);
    assert.ok(tok.json.tokens.length > 1000, `the long prompt is only ${tok.json.tokens.length} tokens`);
    const C = '/v1/completions';
    const K = '/v1/chat/completions';
    const msgs = [{ role: 'user', content: 'Hello' }];
    const cases = [
      ['malformed JSON', C, '{"prompt": "Once", "max_tokens": '],
      ['malformed JSON (chat)', K, '{"messages": [{"role": "user", "content": "hi"}'],
      ['trailing garbage', C, '{"prompt": "Once", "max_tokens": 4} xyz'],
      ['trailing garbage (chat)', K, '{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2} [1'],
      ['JSON array', C, '[1, 2, 3]'],
      ['JSON string', C, '"Once upon a time"'],
      ['JSON number', C, '5'],
      ['JSON null', C, 'null'],
      ['JSON array (chat)', K, '[{"role": "user", "content": "hi"}]'],
      ['empty body', C, ''],
      ['empty body (chat)', K, ''],
      ['prompt: 5', C, { prompt: 5 }],
      ['prompt: object', C, { prompt: { text: 'x' } }],
      ['prompt: mixed array', C, { prompt: [1, 'a'] }],
      ['prompt: token id out of the vocabulary', C, { prompt: [1, 99999], max_tokens: 4 }],
      ['prompt: negative token id', C, { prompt: [1, -5], max_tokens: 4 }],
      ['messages: "x"', K, { messages: 'x' }],
      ['messages: [5]', K, { messages: [5] }],
      ['messages: content 5', K, { messages: [{ role: 'user', content: 5 }] }],
      ['messages missing', K, { prompt: 'hi' }],
      ['temperature: "hot"', C, { prompt: 'Once', temperature: 'hot' }],
      ['temperature: "hot" (chat)', K, { messages: msgs, temperature: 'hot' }],
      ['top_p: "x"', C, { prompt: 'Once', top_p: 'x' }],
      ['seed: "abc"', C, { prompt: 'Once', seed: 'abc' }],
      ['stream: "yes"', C, { prompt: 'Once', stream: 'yes' }],
      ['stop: 7', C, { prompt: 'Once', stop: 7 }],
      ['stop: [7]', C, { prompt: 'Once', stop: [7] }],
      ['stop: 17 strings', C, { prompt: 'Once', stop: Array.from({ length: 17 }, (_, i) => `s${i}`) }],
      ['max_tokens: 1.5', C, { prompt: 'Once', max_tokens: 1.5 }],
      ['max_tokens: "8"', C, { prompt: 'Once', max_tokens: '8' }],
      ['max_tokens: -2', C, { prompt: 'Once', max_tokens: -2 }],
      ['max_tokens: -100', K, { messages: msgs, max_tokens: -100 }],
      ['max_tokens: 1e12', C, { prompt: 'Once', max_tokens: 1e12 }],
      ['max_tokens: 1e12 (literal)', C, '{"prompt": "Once", "max_tokens": 1e12}'],
      ['max_tokens: 600 (slot holds 512)', C, { prompt: 'Once', max_tokens: 600 }],
      ['max_completion_tokens: 1e12', K, { messages: msgs, max_completion_tokens: 1e12 }],
      ['n: 2', C, { prompt: 'Once', n: 2, max_tokens: 4 }],
      ['prompt of >1000 tokens', C, { prompt: long, max_tokens: 4 }],
      ['prompt of >1000 tokens, streamed', C, { prompt: long, max_tokens: 4, stream: true }],
      ['message of >1000 tokens', K, { messages: [{ role: 'user', content: long }], max_tokens: 4 }],
      ['tokenize: content 5', '/tokenize', { content: 5 }],
      ['tokenize: malformed', '/tokenize', '{"content": '],
      ['tokenize: trailing garbage', '/tokenize', '{"content": "hi"}}}'],
      ['detokenize: tokens "x"', '/detokenize', { tokens: 'x' }],
    ];
    const problems = [];
    for (const [what, route, body] of cases) {
      const r = await call(srv, 'POST', route, body);
      const p = errorProblem(r, 400, 'invalid_request_error');
      if (p) problems.push(`POST ${route} ${what}: ${p}`);
      if (srv.proc.exitCode !== null) { problems.push(`the server exited after ${what}`); break; }
    }
    assert.deepEqual(problems, [], `\n${problems.join('\n')}`);
    await stillServes('the bad requests');
  });

  test('edge values that are fine: max_tokens -1, the alias, unknown fields, a prompt of token ids', { timeout: 60000 }, async () => {
    // -1: until the end of text or the slot's context (512)
    // (pinfer run -n -1 -c 512 the same: the last token needs no room in the cache)
    const whole = pinferRun(stories, 'Once upon a time', ['-n', '-1', '--temp', '0', '-c', '512']);
    const all = await completion(srv, { prompt: 'Once upon a time', max_tokens: -1, temperature: 0 });
    assertSameAsRun(all.choices[0].text, whole, 'max_tokens -1');
    assert.equal(all.usage.completion_tokens, Number(/generated (\d+) tokens/.exec(whole.stderr)[1]), JSON.stringify(all.usage));
    assert.equal(all.choices[0].finish_reason, /end of text/.test(whole.stderr) ? 'stop' : 'length');
    // max_completion_tokens is max_tokens; unknown fields are ignored
    const alias = await call(srv, 'POST', '/v1/chat/completions',
      { messages: [{ role: 'user', content: 'Hi' }], max_completion_tokens: 5, temperature: 0, frobnicate: { x: [1] }, user: 'u1' });
    assert.equal(alias.status, 200, alias.text);
    assert.equal(alias.json.usage.completion_tokens, 5, alias.text);
    // a prompt given as token ids is that text
    const ids = await call(srv, 'POST', '/tokenize', { content: 'Once upon a time', add_special: true });
    const byIds = await completion(srv, { prompt: ids.json.tokens, max_tokens: 16, temperature: 0 });
    assertSameAsRun(byIds.choices[0].text, normal, 'a prompt of token ids');
    const byList = await completion(srv, { prompt: ['Once upon a time'], max_tokens: 16, temperature: 0 });
    assertSameAsRun(byList.choices[0].text, normal, 'a prompt given as [str]');
  });

  test('unknown routes: 404; known routes, wrong method: 405', { timeout: 30000 }, async () => {
    const cases = [
      ['GET', '/nope', 404, 'not_found_error'],
      ['POST', '/v1/nope', 404, 'not_found_error'],
      ['GET', '/v1/engines', 404, 'not_found_error'],
      ['POST', '/v2/completions', 404, 'not_found_error'],
      ['GET', '/v1/completions', 405, 'invalid_request_error'],
      ['GET', '/v1/chat/completions', 405, 'invalid_request_error'],
      ['PUT', '/v1/completions', 405, 'invalid_request_error'],
      ['DELETE', '/v1/models', 405, 'invalid_request_error'],
      ['POST', '/health', 405, 'invalid_request_error'],
      ['GET', '/tokenize', 405, 'invalid_request_error'],
    ];
    const problems = [];
    for (const [method, route, status, type] of cases) {
      const body = method === 'POST' || method === 'PUT' ? { prompt: 'Once' } : undefined;
      const r = await call(srv, method, route, body);
      const p = errorProblem(r, status, type);
      if (p) problems.push(`${method} ${route}: ${p}`);
    }
    assert.deepEqual(problems, [], `\n${problems.join('\n')}`);
    await stillServes('404s and 405s');
  });

  test('a 10 MB body: 413 (the connection may close early), the server stays up', { timeout: 60000 }, async () => {
    const check413 = (r, what, mayClose) => {
      if (r.status === undefined) {
        assert.ok(mayClose, `${what}: no answer (${r.error})`);
        // closed while the body was still being sent, before the answer could be read: allowed
        assert.match(String(r.error), /ECONNRESET|EPIPE|closed|aborted/, `${what}: ${JSON.stringify(r)}`);
        console.log(`# ${what}: the connection closed before an answer was read (${r.error})`);
        return;
      }
      let json;
      try { json = JSON.parse(r.text); } catch { json = undefined; }
      assert.equal(errorProblem({ ...r, json }, 413, 'invalid_request_error'), null, what);
    };
    // Content-Length says 10 MB: the answer may come on the headers alone
    check413(await postBig(srv.port, '/v1/completions', 10 * 1024 * 1024), '10 MB body (Content-Length)', true);
    check413(await postBig(srv.port, '/v1/chat/completions', 4 * 1024 * 1024 + 1), '4 MiB + 1 body (Content-Length)', true);
    // chunked: the server has to count what it reads
    check413(await postBig(srv.port, '/v1/completions', 10 * 1024 * 1024, { chunked: true }), '10 MB body (chunked)', true);
    // below the limit the body is read (and this one is a fine request)
    const ok = await call(srv, 'POST', '/v1/completions',
      JSON.stringify({ prompt: 'Once upon a time', max_tokens: 16, temperature: 0, pad: 'x'.repeat(1 << 20) }));
    assert.equal(ok.status, 200, ok.text.slice(0, 300));
    assertSameAsRun(ok.json.choices[0].text, normal, 'a 1 MiB body');
    await stillServes('oversized bodies');
  });

  test('raw sockets: garbage, truncated and abandoned requests', { timeout: 60000 }, async () => {
    const port = srv.port;
    // a request line that is not HTTP: an HTTP error or a close, never a hang or a crash
    const g = await rawExchange(port, ['HELLO THERE\r\n\r\n']);
    assert.ok(g.closed || /^HTTP\/1\.[01] 4\d\d/.test(g.data), `garbage request line: ${JSON.stringify(g)}`);
    if (g.data) assert.match(g.data, /^HTTP\/1\.[01] 4\d\d/, 'garbage request line');
    // binary noise
    const b = await rawExchange(port, [Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 131 + 7) & 255))]);
    assert.ok(b.closed || /^HTTP\/1\.[01] 4\d\d/.test(b.data), `binary noise: ${JSON.stringify(b).slice(0, 300)}`);
    // a body shorter than its Content-Length, then the client leaves
    const t = await rawExchange(port, [
      'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"prom',
    ], { endAfter: true, timeout: 5000 });
    assert.ok(t.closed || t.error === 'timeout', JSON.stringify(t));
    // headers only, never finished, socket dropped
    await new Promise((resolve) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => {
        s.write('POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le');
        setTimeout(() => { s.destroy(); resolve(); }, 100);
      });
      s.on('error', resolve);
    });
    // a whole request by hand (the JSON body and the error are what fetch sees too)
    const body = '{"prompt": 5}';
    const w = await rawExchange(port, [
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    ]);
    assert.match(w.data, /^HTTP\/1\.[01] 400/, JSON.stringify(w));
    assert.match(w.data, /"invalid_request_error"/);
    // two requests on one keep-alive connection, the first a bad one
    const ka = await rawExchange(port, [
      `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
      'GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    ]);
    assert.match(ka.data, /^HTTP\/1\.[01] 400/, JSON.stringify(ka));
    assert.match(ka.data, /HTTP\/1\.[01] 200[^]*"status"\s*:\s*"ok"/, `keep-alive after a 400: ${JSON.stringify(ka)}`);
    await stillServes('raw socket abuse');
  });
});

// ---- clients that leave ----

describe('a client that leaves frees its slot', { timeout: 150000 }, () => {
  // A random-weight model slow enough that generating its whole context
  // takes far longer than the bound on the next request (measured below).
  const slow = path.join(tmp, 'slow.gguf');
  const PROMPT = 'Tom';
  let srv;
  let msPerToken = 0;
  before(async () => {
    const g = runPinfer(['gen-model', '--preset', 'tiny', '--dim', '512', '--n-head', '8', '--n-head-kv', '4',
      '--ffn', '2048', '--layers', '8', '--ctx', '4096', '--vocab', stories, '-t', '2', '-o', slow]);
    assert.equal(g.status, 0, g.stderr);
    srv = await startServer(['-np', '1', '-c', '4096', '-t', '1'], { model: slow });
    // the decode speed at a context of ~1000 tokens: attention grows with the
    // context, so generating 4000 tokens takes longer than 4000 times this
    const w = await completion(srv, { prompt: 'Tom went to the park. '.repeat(100), max_tokens: 16, temperature: 0 });
    assert.ok(w.usage.prompt_tokens > 900, JSON.stringify(w.usage));
    msPerToken = w.timings?.predicted_per_token_ms ?? 0;
  }, { timeout: 90000 });
  after(() => stopServer(srv), { timeout: 40000 });

  // the next request must not wait for the abandoned generation
  const BOUND_MS = 4000;
  async function nextIsPrompt(what) {
    const t0 = Date.now();
    const r = await completion(srv, { prompt: 'The cat', max_tokens: 8, temperature: 0 }, BOUND_MS + 30000);
    const ms = Date.now() - t0;
    assert.ok(r.choices[0].text.length > 0);
    assert.ok(ms < BOUND_MS, `${what}: the next request took ${ms} ms (a whole generation is about ${Math.round(4000 * msPerToken)} ms or more)`);
    let h = await health(srv);
    for (let i = 0; i < 50 && h.slots_idle !== 1; i++) { await sleep(100); h = await health(srv); }
    assert.deepEqual([h.slots_idle, h.slots_processing], [1, 0], `${what}: /health ${JSON.stringify(h)}`);
    return ms;
  }

  test('the whole context would take long (precondition of the checks below)', { timeout: 5000 }, () => {
    const est = 4000 * msPerToken;
    // (28 s through the server at -t 1 on a 2-core x86 machine, release build)
    console.log(`# slow model: ${msPerToken.toFixed(3)} ms/token at a context of 1000; 4000 tokens > ${Math.round(est)} ms`);
    assert.ok(msPerToken > 0, 'no timings.predicted_per_token_ms');
    if (est < 2 * BOUND_MS) console.log('# warning: the model is fast here: a slot that is not freed could go unnoticed');
  });

  test('mid-stream: the socket destroyed after two chunks', { timeout: 40000 }, async () => {
    await new Promise((resolve, reject) => {
      const req = http.request({
        host: '127.0.0.1', port: srv.port, path: '/v1/completions', method: 'POST',
        headers: { 'Content-Type': 'application/json' },
      });
      const timer = setTimeout(() => { req.destroy(); reject(new Error('no chunks within 20 s')); }, 20000);
      req.on('response', (res) => {
        if (res.statusCode !== 200) { clearTimeout(timer); req.destroy(); reject(new Error(`status ${res.statusCode}`)); return; }
        let raw = '';
        res.on('data', (d) => {
          raw += d;
          if (raw.split('\n\n').length > 2) {
            // two events: valid JSON, then leave
            const { events } = parseEvents(raw.slice(0, raw.lastIndexOf('\n\n') + 2));
            clearTimeout(timer);
            req.destroy();
            if (events.length >= 2 && events.every((e) => e.object === 'text_completion')) resolve();
            else reject(new Error(`odd first events: ${raw.slice(0, 500)}`));
          }
        });
        res.on('error', () => {});
      });
      req.on('error', () => {});
      req.end(JSON.stringify({ prompt: PROMPT, max_tokens: 4000, temperature: 0, stream: true }));
    });
    await nextIsPrompt('a stream abandoned after two chunks');
  });

  test('a non-streamed request abandoned while generating', { timeout: 40000 }, async () => {
    const ac = new AbortController();
    const p = fetch(`${srv.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, signal: ac.signal,
      body: JSON.stringify({ prompt: PROMPT, max_tokens: 4000, temperature: 0 }),
    }).then(() => 'answered', (e) => e.name);
    // wait until it holds the slot
    let h = await health(srv);
    for (let i = 0; i < 100 && h.slots_processing !== 1; i++) { await sleep(50); h = await health(srv); }
    assert.equal(h.slots_processing, 1, `the long request never took the slot: ${JSON.stringify(h)}`);
    await sleep(200);
    ac.abort();
    assert.equal(await p, 'AbortError', 'the long request finished before it was abandoned (the model is too fast)');
    await nextIsPrompt('a non-streamed request abandoned while generating');
  });

  test('a request abandoned while waiting in line, then the one holding the slot', { timeout: 40000 }, async () => {
    const holder = new AbortController();
    const waiter = new AbortController();
    const body = (n) => JSON.stringify({ prompt: PROMPT, max_tokens: n, temperature: 0, stream: true });
    const h1 = fetch(`${srv.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: body(4000), signal: holder.signal })
      .then(async (res) => { for await (const _ of res.body) { /* drain */ } return 'finished'; }).catch((e) => e.name);
    let h = await health(srv);
    for (let i = 0; i < 100 && h.slots_processing !== 1; i++) { await sleep(50); h = await health(srv); }
    assert.equal(h.slots_processing, 1, JSON.stringify(h));
    const w1 = fetch(`${srv.url}/v1/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: body(4000), signal: waiter.signal })
      .then(async (res) => { for await (const _ of res.body) { /* drain */ } return 'finished'; }).catch((e) => e.name);
    await sleep(300);
    waiter.abort();
    assert.equal(await w1, 'AbortError');
    await sleep(100);
    holder.abort();
    assert.equal(await h1, 'AbortError', 'the slot holder finished before it was abandoned (the model is too fast)');
    await nextIsPrompt('a queued request and then the slot holder abandoned');
  });
});

// ---- 32 concurrent clients ----

describe('32 concurrent clients on -np 2', { timeout: 150000 }, () => {
  const subjects = ['a little girl', 'a big dog', 'a red ball', 'a small cat', 'a tall tree', 'a happy boy', 'a blue bird',
    'a funny frog', 'a kind king', 'a shy fish', 'a brave bear', 'a sleepy owl', 'a fast car', 'a old man', 'a pretty flower',
    'a hungry duck', 'a lost toy', 'a green box', 'a wise mom', 'a silly pig', 'a tiny ant', 'a loud lion', 'a soft bunny',
    'a yellow sun', 'a cold ice', 'a warm cake', 'a sad girl', 'a new friend', 'a magic hat', 'a big ship', 'a long road',
    'a dark cave'];
  const prompts = subjects.map((s, i) => (i % 2 ? `Once upon a time, there was ${s}` : `One day, ${s}`));
  const N = 40;
  let srv;
  let expected;
  before(async () => {
    expected = prompts.map((p) => pinferRun(stories, p, ['-n', String(N), '--temp', '0']));
    srv = await startServer(['-np', '2', '-c', '1024']);
  }, { timeout: 90000 });
  after(() => stopServer(srv), { timeout: 40000 });

  test('each of 32 parallel greedy completions equals its text alone', { timeout: 90000 }, async () => {
    const t0 = Date.now();
    const answers = await Promise.all(prompts.map((prompt, i) => (i % 4 === 3
      ? streamCompletion(srv, { prompt, max_tokens: N, temperature: 0 }, 80000).done.then((r) => r.text)
      : completion(srv, { prompt, max_tokens: N, temperature: 0 }, 80000).then((r) => r.choices[0].text))));
    const ms = Date.now() - t0;
    console.log(`# 32 concurrent completions of ${N} tokens on 2 slots: ${ms} ms`);
    const wrong = [];
    answers.forEach((text, i) => {
      if (asRunPrints(prompts[i], text) !== expected[i].out)
        wrong.push(`${JSON.stringify(prompts[i])}${i % 4 === 3 ? ' (streamed)' : ''}:\n  server ${JSON.stringify(text)}\n  alone  ${JSON.stringify(expected[i].out)}`);
    });
    assert.deepEqual(wrong, [], `\n${wrong.join('\n')}`);
    const h = await health(srv);
    assert.deepEqual([h.slots_idle, h.slots_processing], [2, 0], JSON.stringify(h));
  });
});

// ---- SIGTERM ----

describe('SIGTERM while requests are in flight', { timeout: 150000 }, () => {
  const N = 1000;
  const prompts = ['Once upon a time', 'One day, a little dog', 'The sun was'];
  let srv;
  let expected;
  before(async () => {
    expected = prompts.map((p) => pinferRun(stories, p, ['-n', String(N), '--temp', '0', '-c', '2048']));
    srv = await startServer(['-np', '2', '-c', '4096', '-t', '1']);
  }, { timeout: 90000 });
  after(async () => { if (srv && srv.proc.exitCode === null) await srv.stop('SIGKILL'); }, { timeout: 40000 });

  test('in-flight and queued requests finish whole, new connections are refused, exit 0', { timeout: 120000 }, async () => {
    const body = (i) => ({ prompt: prompts[i], max_tokens: N, temperature: 0 });
    // the first holds a slot, the second takes the other, the third waits in line
    const s0 = streamCompletion(srv, body(0));
    await s0.first;
    const r1 = completion(srv, body(1), 120000);
    const s2 = streamCompletion(srv, body(2));
    // give the server time to have read both further requests
    await sleep(250);
    const stillRunning = srv.proc.exitCode === null;
    const unfinished = [s0.done, r1, s2.done].map((p) => {
      const st = { done: false };
      p.then(() => { st.done = true; }, () => { st.done = true; });
      return st;
    });
    await sleep(0);
    const inFlight = unfinished.filter((u) => !u.done).length;
    srv.proc.kill('SIGTERM');
    await sleep(200);
    // a new connection after the shutdown began: refused, or answered 503
    const probe = await rawExchange(srv.port, ['GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'], { timeout: 10000 });
    const refused = probe.error === 'ECONNREFUSED' && !probe.data;
    const unavailable = /^HTTP\/1\.[01] 503/.test(probe.data);
    assert.ok(refused || unavailable, `a new connection after SIGTERM: ${JSON.stringify(probe).slice(0, 500)}`);
    if (unavailable) assert.match(probe.data, /"unavailable_error"/);
    console.log(`# a new connection after SIGTERM: ${refused ? 'refused' : '503'}; ${inFlight} of 3 requests unfinished at SIGTERM`);
    assert.ok(inFlight > 0, 'every request had finished before SIGTERM: the model is too fast here for this test');
    const [a, b, c] = await Promise.all([s0.done, r1, s2.done]);
    assertSameAsRun(a.text, expected[0], 'streamed request in flight at SIGTERM');
    assert.equal(a.done, true, 'no [DONE] at the end of the stream');
    assertSameAsRun(b.choices[0].text, expected[1], 'whole request in flight at SIGTERM');
    assertSameAsRun(c.text, expected[2], 'streamed request in flight or in line at SIGTERM');
    assert.equal(c.done, true, 'no [DONE] at the end of the stream');
    const ex = await Promise.race([srv.exited, sleep(60000, undefined, { ref: false }).then(() => 'still running')]);
    assert.deepEqual(ex, { code: 0, sig: null }, `exit after SIGTERM:\n${srv.log().slice(-3000)}`);
    assert.ok(stillRunning);
    assert.match(srv.log(), /SIGTERM/);
  });
});

// ---- under --mem-budget ----

describe('under --mem-budget the texts equal pinfer run', { timeout: 180000 }, () => {
  const plain = path.join(tmp, 'relu.gguf');
  const bundle = path.join(tmp, 'relu.bundle.gguf');
  const mib = (s) => Number(/minimum of ([\d.]+) MiB/.exec(s)?.[1]);
  let budget1;
  let budget2;
  const reqs = [
    { prompt: 'Once upon a time', seed: 7 },
    { prompt: 'The little dog ran', seed: 11 },
  ];
  before(async () => {
    const g = runPinfer(['gen-model', '--preset', 'tiny', '--act', 'relu', '--active', '0.1', '--predictor', '--vocab', stories,
      '-t', '2', '-o', plain, '--bundle-out', bundle]);
    assert.equal(g.status, 0, g.stderr);
    const size = fs.statSync(bundle).size;
    // the minimum for np slots of ctx/np tokens, as the server's error for a
    // too small budget names it: for one slot pinfer run's, for more above it
    const minFor = async (ctx, np) => {
      const r = runPinfer(['run', '-m', bundle, '--mem-budget', '1M', '-c', String(ctx / np), '-p', 'x', '-n', '1']);
      const base = mib(r.stderr);
      assert.ok(Number.isFinite(base), `pinfer run names no minimum budget:\n${r.stderr}`);
      let s;
      try {
        s = await startServer(['--mem-budget', '1M', '-c', String(ctx), '-np', String(np)], { model: bundle, timeout: 30000 });
      } catch (e) {
        const msg = String(e.message), min = mib(msg);
        if (np === 1) assert.equal(min, base, `the server's minimum differs from pinfer run's: ${msg}`);
        else assert.ok(min > base && msg.includes(`for ${np} sessions`), `the server's error for a too small budget with ${np} slots: ${msg}`);
        return min;
      }
      await s.stop();
      assert.fail('the server started under a 1 MiB budget');
    };
    const min1 = await minFor(512, 1);
    const min2 = await minFor(1024, 2);
    assert.ok(Number.isFinite(min1) && Number.isFinite(min2), `no minimum budget found (${min1}, ${min2})`);
    // half a MiB above the minimum keeps only part of the FFN resident
    budget1 = `${(min1 + 0.5).toFixed(2)}M`;
    budget2 = `${(min2 + 0.5).toFixed(2)}M`;
    for (const b of [min1 + 0.5, min2 + 0.5]) assert.ok(b * 1048576 < size, `budget ${b} MiB is not below the bundle's ${size} bytes`);
    console.log(`# bundle ${size} bytes; minimum ${min1} MiB (1 slot of 512), ${min2} MiB (2 slots); budgets ${budget1}, ${budget2}`);
  }, { timeout: 120000 });

  const runFor = (req, budget) => pinferRun(bundle, req.prompt,
    ['--mem-budget', budget, '-c', '512', '-s', String(req.seed), '--temp', '0.8', '-n', '32']);
  function checkOffload(res, what) {
    const o = res.timings?.offload;
    assert.ok(o && typeof o === 'object', `${what}: timings.offload is ${JSON.stringify(o)}`);
    for (const k of ['neurons_resident', 'neurons_cached', 'neurons_read', 'reads', 'mb_read', 'io_wait_ms', 'io_hidden_pct'])
      assert.ok(typeof o[k] === 'number' && o[k] >= 0, `${what}: timings.offload.${k} is ${JSON.stringify(o[k])}`);
    assert.ok(o.neurons_read > 0, `${what}: no neuron read from flash under a budget below the FFN: ${JSON.stringify(o)}`);
  }

  test('one slot: temperature 0.8, seed 7 equals pinfer run --mem-budget', { timeout: 60000 }, async () => {
    const want = runFor(reqs[0], budget1);
    const srv = await startServer(['--mem-budget', budget1, '-np', '1', '-c', '512'], { model: bundle });
    try {
      const models = await call(srv, 'GET', '/v1/models');
      assert.equal(models.json?.data?.[0]?.meta?.offloaded, true, models.text);
      assert.ok(models.json.data[0].meta.mem_budget > 0, models.text);
      const res = await completion(srv, { prompt: reqs[0].prompt, max_tokens: 32, temperature: 0.8, seed: reqs[0].seed });
      assertSameAsRun(res.choices[0].text, want, `--mem-budget ${budget1}, one slot`);
      checkOffload(res, 'one slot');
      // a streamed one: the same text, offload figures in its chunks
      const st = streamCompletion(srv, { prompt: reqs[0].prompt, max_tokens: 32, temperature: 0.8, seed: reqs[0].seed });
      const sr = await st.done;
      assert.equal(sr.text, res.choices[0].text, 'streamed under --mem-budget');
      checkOffload(sr.events[sr.events.length - 1], 'the last streamed chunk');
    } finally {
      await stopServer(srv);
    }
  });

  test('two slots, two concurrent requests: each equals its pinfer run', { timeout: 60000 }, async () => {
    const want = reqs.map((r) => runFor(r, budget2));
    assert.notEqual(want[0].out, want[1].out, 'precondition: the two requests have the same text');
    const srv = await startServer(['--mem-budget', budget2, '-np', '2', '-c', '1024'], { model: bundle });
    try {
      const res = await Promise.all(reqs.map((r) => completion(srv,
        { prompt: r.prompt, max_tokens: 32, temperature: 0.8, seed: r.seed })));
      res.forEach((r, i) => {
        assertSameAsRun(r.choices[0].text, want[i], `--mem-budget ${budget2}, two slots, request ${i}`);
        checkOffload(r, `two slots, request ${i}`);
      });
    } finally {
      await stopServer(srv);
    }
  });
});
