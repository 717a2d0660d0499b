// client.test.mjs — the official `openai` npm client against `pinfer serve`.
//
// Every text the server returns is checked against what `pinfer run` prints
// for the same prompt and sampling (stdout: the prompt, the generated text,
// then a newline when the output does not already end in one), or against
// another answer of the server that must be equal (streamed against whole,
// the same seed twice). The model is the real TinyStories stories260K.
//
//   PI_TEST_PINFER=build/release/pinfer node --test tests/serve/client.test.mjs
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import OpenAI from 'openai';
import { startServer, runPinfer, needFile, stories } from './server.mjs';

needFile(stories, 'the serve tests drive the TinyStories model stories260K');

const KEY = 'sk-pinfer-test-5f2c9a';
const PROMPT = 'Once upon a time';
const N = 48;

// `pinfer run` of a prompt: the text it generated (stdout after the prompt,
// still with run's final newline), how many tokens and why it stopped.
function pinferRun(prompt, args) {
  const r = runPinfer(['run', '-m', stories, '-p', prompt, ...args]);
  assert.equal(r.status, 0, `pinfer run ${args.join(' ')} failed:\n${r.stderr}`);
  assert.ok(r.stdout.startsWith(prompt), `run's stdout does not start with the prompt: ${JSON.stringify(r.stdout)}`);
  const m = /generated (\d+) tokens/.exec(r.stderr);
  assert.ok(m, `no "generated N tokens" in run's stderr:\n${r.stderr}`);
  return { prompt, out: r.stdout.slice(prompt.length), generated: Number(m[1]), eos: /run: end of text/.test(r.stderr) };
}

// The text as `pinfer run` would print it after the prompt: run adds a newline
// unless the output so far (prompt and text) ends in one (tools/cmd_run.c).
function asRunPrints(prompt, text) {
  return (prompt + text).endsWith('\n') ? text : `${text}\n`;
}

function assertSameAsRun(text, run, what) {
  assert.equal(typeof text, 'string', `${what}: the text is not a string`);
  assert.equal(asRunPrints(run.prompt, text), run.out,
    `${what}: the server's text differs from pinfer run's\n server: ${JSON.stringify(text)}\n run:    ${JSON.stringify(run.out)}`);
}

describe('openai client against pinfer serve', { timeout: 120000 }, () => {
  let srv;
  let client;
  let model;
  const runs = {};

  before(async () => {
    runs.greedy = pinferRun(PROMPT, ['-n', String(N), '--temp', '0']);
    runs.s42 = pinferRun(PROMPT, ['-n', String(N), '--temp', '0.9', '-s', '42']);
    runs.s43 = pinferRun(PROMPT, ['-n', String(N), '--temp', '0.9', '-s', '43']);
    const tok = runPinfer(['tokenize', '-m', stories, '--ids', PROMPT]);
    assert.equal(tok.status, 0, tok.stderr);
    runs.promptIds = tok.stdout.trim().split(/\s+/).map(Number);
    srv = await startServer(['--api-key', KEY, '-np', '2', '-c', '1024']);
    client = new OpenAI({ apiKey: KEY, baseURL: `${srv.url}/v1`, maxRetries: 0, timeout: 30000 });
    const list = await client.models.list();
    model = list.data[0]?.id;
  }, { timeout: 90000 });

  after(async () => {
    if (srv) {
      const r = await srv.stop();
      assert.deepEqual(r, { code: 0, sig: null }, `the server did not exit cleanly on SIGTERM:\n${srv.log().slice(-4000)}`);
    }
  }, { timeout: 40000 });

  const authed = (extra = {}) => ({ Authorization: `Bearer ${KEY}`, ...extra });
  async function postJson(route, body) {
    const res = await fetch(`${srv.url}${route}`, {
      method: 'POST', headers: authed({ 'Content-Type': 'application/json' }), body: JSON.stringify(body),
      signal: AbortSignal.timeout(20000),
    });
    const text = await res.text();
    assert.equal(res.status, 200, `POST ${route} ${JSON.stringify(body)} -> ${res.status} ${text}`);
    return JSON.parse(text);
  }

  test('models.list lists the one model; /health answers ok', { timeout: 20000 }, async () => {
    const list = await client.models.list();
    assert.equal(list.data.length, 1, JSON.stringify(list.data));
    const m = list.data[0];
    assert.equal(m.id, path.basename(stories));
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'pinfer');
    assert.equal(typeof m.created, 'number');
    assert.equal(m.meta?.n_slots, 2, JSON.stringify(m.meta));
    assert.equal(m.meta?.n_ctx_slot, 512, JSON.stringify(m.meta));
    assert.equal(m.meta?.n_vocab, 512, JSON.stringify(m.meta));
    assert.equal(typeof m.meta?.n_params, 'number');
    assert.equal(m.meta?.offloaded, false);
    // /health needs no key
    const res = await fetch(`${srv.url}/health`, { signal: AbortSignal.timeout(10000) });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    const h = await res.json();
    assert.equal(h.status, 'ok');
    assert.equal(h.slots_idle, 2, JSON.stringify(h));
    assert.equal(h.slots_processing, 0, JSON.stringify(h));
  });

  test('/tokenize and /detokenize agree with pinfer tokenize', { timeout: 20000 }, async () => {
    const withBos = await postJson('/tokenize', { content: PROMPT, add_special: true });
    assert.deepEqual(withBos.tokens, runs.promptIds);
    const bare = await postJson('/tokenize', { content: PROMPT });
    assert.deepEqual(bare.tokens, runs.promptIds.slice(runs.promptIds[0] === 1 ? 1 : 0));
    const pieces = await postJson('/tokenize', { content: PROMPT, with_pieces: true });
    assert.deepEqual(pieces.tokens.map((t) => t.id), bare.tokens);
    assert.equal(pieces.tokens.map((t) => t.piece).join('').trim(), PROMPT);
    const back = await postJson('/detokenize', { tokens: bare.tokens });
    assert.equal(back.content.trim(), PROMPT);
  });

  test('a greedy completion equals pinfer run --temp 0; usage counts the tokens', { timeout: 30000 }, async () => {
    const res = await client.completions.create({ model, prompt: PROMPT, max_tokens: N, temperature: 0 });
    assert.equal(res.object, 'text_completion');
    assert.match(res.id, /^cmpl-/);
    assert.equal(res.model, model);
    assert.equal(res.choices.length, 1);
    const c = res.choices[0];
    assertSameAsRun(c.text, runs.greedy, 'greedy');
    assert.equal(c.index, 0);
    assert.equal(c.finish_reason, runs.greedy.eos ? 'stop' : 'length');
    assert.equal(res.usage.prompt_tokens, runs.promptIds.length, `usage ${JSON.stringify(res.usage)}`);
    assert.equal(res.usage.completion_tokens, runs.greedy.generated, `usage ${JSON.stringify(res.usage)}`);
    assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
    // the server's own tokenizer says the same of the prompt
    const tok = await postJson('/tokenize', { content: PROMPT, add_special: true });
    assert.equal(tok.tokens.length, res.usage.prompt_tokens);
    const t = res.timings;
    assert.ok(t && typeof t === 'object', `no timings: ${JSON.stringify(res)}`);
    for (const k of ['prompt_n', 'prompt_ms', 'prompt_per_second', 'predicted_n', 'predicted_ms',
      'predicted_per_token_ms', 'predicted_per_second'])
      assert.equal(typeof t[k], 'number', `timings.${k}: ${JSON.stringify(t)}`);
    assert.equal(t.predicted_n, res.usage.completion_tokens, JSON.stringify(t));
    assert.equal(t.offload, null, 'timings.offload without --mem-budget');
  });

  test('a sampled completion equals pinfer run --temp 0.9 -s SEED; a seed repeats, another differs', { timeout: 30000 }, async () => {
    assert.notEqual(runs.s42.out, runs.s43.out, 'precondition: seeds 42 and 43 give the same text in pinfer run');
    const ask = (seed) => client.completions.create({ model, prompt: PROMPT, max_tokens: N, temperature: 0.9, seed });
    const a = await ask(42);
    const b = await ask(42);
    const c = await ask(43);
    assertSameAsRun(a.choices[0].text, runs.s42, 'seed 42');
    assert.equal(b.choices[0].text, a.choices[0].text, 'the same seed twice gives different texts');
    assertSameAsRun(c.choices[0].text, runs.s43, 'seed 43');
    assert.notEqual(c.choices[0].text, a.choices[0].text);
    assert.equal(a.usage.completion_tokens, runs.s42.generated);
  });

  test('a streamed completion reassembles to the whole one', { timeout: 30000 }, async () => {
    const stream = await client.completions.create({ model, prompt: PROMPT, max_tokens: N, temperature: 0, stream: true });
    let text = '';
    let finish = null;
    let chunks = 0;
    let lastTimings = null;
    for await (const ch of stream) {
      chunks++;
      assert.equal(ch.object, 'text_completion');
      assert.equal(ch.choices.length, 1, JSON.stringify(ch));
      text += ch.choices[0].text ?? '';
      assert.equal(typeof ch.timings?.predicted_n, 'number', `a chunk without timings: ${JSON.stringify(ch)}`);
      lastTimings = ch.timings;
      if (ch.choices[0].finish_reason) {
        assert.equal(finish, null, 'two chunks carry a finish_reason');
        finish = ch.choices[0].finish_reason;
      }
    }
    assert.ok(chunks > 1, `only ${chunks} chunk(s)`);
    assertSameAsRun(text, runs.greedy, 'streamed greedy');
    assert.equal(lastTimings.predicted_n, runs.greedy.generated, `the last chunk's timings: ${JSON.stringify(lastTimings)}`);
    assert.equal(finish, runs.greedy.eos ? 'stop' : 'length');
  });

  test('a streamed chat completion reassembles to the non-streamed one', { timeout: 30000 }, async () => {
    const req = {
      model, max_tokens: 40, temperature: 0,
      messages: [{ role: 'system', content: 'You tell short stories.' }, { role: 'user', content: 'Tell me a story about a cat.' }],
    };
    const whole = await client.chat.completions.create(req);
    assert.equal(whole.object, 'chat.completion');
    assert.match(whole.id, /^chatcmpl-/);
    assert.equal(whole.choices.length, 1);
    const msg = whole.choices[0].message;
    assert.equal(msg.role, 'assistant');
    assert.equal(typeof msg.content, 'string');
    assert.ok(msg.content.length > 0, 'empty chat answer');
    assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));
    assert.ok(whole.usage.completion_tokens > 0 && whole.usage.completion_tokens <= 40, JSON.stringify(whole.usage));

    const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
    let content = '';
    let finish = null;
    let first = true;
    let usage = null;
    for await (const ch of stream) {
      assert.equal(ch.object, 'chat.completion.chunk');
      if (ch.choices.length === 0) {
        assert.ok(ch.usage, `a chunk without choices and without usage: ${JSON.stringify(ch)}`);
        usage = ch.usage;
        continue;
      }
      assert.equal(usage, null, 'a chunk with choices after the usage chunk');
      const d = ch.choices[0].delta ?? {};
      if (first) assert.equal(d.role, 'assistant', `first chunk: ${JSON.stringify(ch)}`);
      first = false;
      content += d.content ?? '';
      if (ch.choices[0].finish_reason) {
        assert.equal(finish, null, 'two chunks carry a finish_reason');
        finish = ch.choices[0].finish_reason;
        assert.deepEqual(d, {}, `the last chunk's delta: ${JSON.stringify(ch)}`);
        assert.equal(ch.timings?.predicted_n, whole.usage.completion_tokens, `the last chunk's timings: ${JSON.stringify(ch)}`);
      }
    }
    assert.equal(content, msg.content, 'streamed chat content differs from the whole answer');
    assert.equal(finish, whole.choices[0].finish_reason);
    assert.deepEqual(usage, whole.usage, 'include_usage: the usage chunk differs from the whole answer\'s usage');

    // content as an array of text parts is the same request
    const parts = await client.chat.completions.create({
      ...req, messages: req.messages.map((m) => ({ role: m.role, content: [{ type: 'text', text: m.content }] })),
    });
    assert.equal(parts.choices[0].message.content, msg.content, 'content parts give another answer');
  });

  test('stop strings cut the text before their first match', { timeout: 40000 }, async () => {
    const g = runs.greedy.out.replace(/\n$/, '');
    // a word of the greedy text, and a piece from its middle that likely spans tokens
    const word = ['Lily', 'park', 'girl', 'play', 'day', 'was'].find((w) => g.indexOf(w) > 0);
    assert.ok(word, `no stop word candidate in the greedy text ${JSON.stringify(g)}`);
    const mid = g.slice(Math.floor(g.length / 2), Math.floor(g.length / 2) + 6);
    const cut = (stops) => {
      const at = Math.min(...stops.map((s) => g.indexOf(s)).filter((i) => i >= 0));
      return g.slice(0, at);
    };
    const cases = [
      ['string', word],
      ['array', ['zzqx', mid, word]],
      ['array (cross-token)', [mid]],
    ];
    for (const [what, stop] of cases) {
      const stops = Array.isArray(stop) ? stop : [stop];
      const want = cut(stops);
      const res = await client.completions.create({ model, prompt: PROMPT, max_tokens: N, temperature: 0, stop });
      assert.equal(res.choices[0].text, want, `stop ${what} ${JSON.stringify(stop)}`);
      assert.equal(res.choices[0].finish_reason, 'stop', `stop ${what} ${JSON.stringify(stop)}`);
      assert.ok(res.usage.completion_tokens <= runs.greedy.generated);
      const stream = await client.completions.create({ model, prompt: PROMPT, max_tokens: N, temperature: 0, stop, stream: true });
      let text = '';
      let finish = null;
      for await (const ch of stream) {
        text += ch.choices[0]?.text ?? '';
        finish = ch.choices[0]?.finish_reason ?? finish;
      }
      assert.equal(text, want, `streamed, stop ${what} ${JSON.stringify(stop)}`);
      assert.equal(finish, 'stop', `streamed, stop ${what} ${JSON.stringify(stop)}`);
    }
    // a stop string that never occurs changes nothing
    const res = await client.completions.create({ model, prompt: PROMPT, max_tokens: N, temperature: 0, stop: ['zzqx'] });
    assertSameAsRun(res.choices[0].text, runs.greedy, 'stop that never matches');
    assert.equal(res.choices[0].finish_reason, runs.greedy.eos ? 'stop' : 'length');
  });

  test('a wrong api key gets AuthenticationError (401)', { timeout: 20000 }, async () => {
    const bad = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${srv.url}/v1`, maxRetries: 0, timeout: 10000 });
    await assert.rejects(bad.completions.create({ model, prompt: PROMPT, max_tokens: 4 }),
      (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    // no key at all: the OpenAI-style error body
    const res = await fetch(`${srv.url}/v1/models`, { signal: AbortSignal.timeout(10000) });
    assert.equal(res.status, 401);
    assert.match(res.headers.get('content-type') ?? '', /application\/json/);
    const body = await res.json();
    assert.equal(body.error?.type, 'authentication_error', JSON.stringify(body));
    assert.equal(typeof body.error?.message, 'string');
    // the page and /health need no key
    const page = await fetch(`${srv.url}/`, { signal: AbortSignal.timeout(10000) });
    assert.equal(page.status, 200);
    assert.match(page.headers.get('content-type') ?? '', /text\/html/);
    await page.text();
  });
});
