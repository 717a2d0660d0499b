// server.mjs — start `pinfer serve` for a test and stop it.
//
// The binary is $PI_TEST_PINFER (build/release/pinfer by default), run
// natively (test_serve skips under an emulator). The server listens on a free loopback port
// (--port 0) and announces it on stderr: "serve: listening on http://HOST:PORT".
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fs from 'node:fs';

const here = path.dirname(fileURLToPath(import.meta.url));
export const root = path.resolve(here, '../..');
export const pinfer = path.resolve(root, process.env.PI_TEST_PINFER || 'build/release/pinfer');
export const shared = path.resolve(root, '../shared/models');
export const stories = path.join(shared, 'stories260K.gguf');

// Skip (exit 77, as the C tests do) when a fixture is missing.
export function needFile(file, why) {
  if (!fs.existsSync(file)) {
    console.log(`SKIP: ${file} is absent (${why})`);
    process.exit(77);
  }
}

// Run the pinfer binary to completion: {status, stdout, stderr}.
export function runPinfer(args, opts = {}) {
  const r = spawnSync(pinfer, args, { encoding: 'utf8', timeout: opts.timeout ?? 120000, maxBuffer: 1 << 26 });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

// Start `pinfer serve -m model ...args`; resolves to {url, port, proc, log(), stop(signal)}.
export function startServer(args, { model = stories, timeout = 60000 } = {}) {
  const argv = ['serve', '-m', model, '--host', '127.0.0.1', '--port', '0', ...args];
  const proc = spawn(pinfer, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, sig) => resolve({ code, sig })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { proc.kill('SIGKILL'); reject(new Error(`server did not start:\n${log}`)); }, timeout);
    const check = () => {
      const m = /serve: listening on (http:\/\/[^\s:]+:(\d+))/.exec(log);
      if (!m) return;
      clearTimeout(timer);
      proc.stderr.off('data', check);
      resolve({
        url: m[1], port: Number(m[2]), proc, exited,
        log: () => log,
        // SIGTERM (or another signal); resolves to {code, sig}; SIGKILL after 30 s
        stop: async (signal = 'SIGTERM') => {
          if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
          const t = setTimeout(() => proc.kill('SIGKILL'), 30000);
          const r = await exited;
          clearTimeout(t);
          return r;
        },
      });
    };
    proc.stderr.on('data', check);
    proc.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited (${code}) before listening:\n${log}`)); });
  });
}
