// A burst of clients that ask bermd for a large result and never read it, with /health probed
// through the burst, from a process of its own: so that neither the clients' work nor a probe's
// own timing runs on the daemon's serving thread (a probe timed from inside a blocked process
// starts late and looks fast). Usage:
//   node reply-burst.mjs PORT PID CLIENTS PATH BODY PROBES INTERVAL_MS
// After a line on stdin: CLIENTS connections at once, each POSTing BODY to PATH and reading only
// the first chunk of the reply, and PROBES GET /health INTERVAL_MS apart, each on a new connection,
// none waiting for another. Once every client has its first chunk and every probe its reply, prints
// one JSON line {heads, probes}: each client's first chunk (up to 2,000 bytes, latin1), and per
// probe in ms the wall time from its start to its reply's end and the CPU time the main thread of
// process PID (the daemon's serving thread) took meanwhile (Linux schedstat: time on a core, which
// the machine's load does not stretch). The clients' connections stay open, unread, until stdin ends.
import * as http from 'node:http';
import { connect } from 'node:net';
import { readFileSync } from 'node:fs';

const [port, pid, clients, path, body, probes, interval] = process.argv.slice(2);
const cpu = () => Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
const sockets = [];

/** One client: resolves with the first chunk of its reply. */
function client() {
  return new Promise((resolve, reject) => {
    const s = connect(Number(port), '127.0.0.1');
    sockets.push(s);
    s.on('error', reject);
    s.once('connect', () =>
      s.write(
        `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      ),
    );
    s.once('data', (c) => {
      s.pause();
      resolve(c.subarray(0, 2000).toString('latin1'));
    });
  });
}

/** One probe: its wall and CPU times, ms. */
function probe() {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const c0 = cpu();
    const req = http.get({ host: '127.0.0.1', port: Number(port), path: '/health', agent: false }, (res) => {
      res.resume();
      res.on('end', () =>
        res.statusCode === 200
          ? resolve({ wall: performance.now() - t0, cpu: cpu() - c0 })
          : reject(new Error(`/health answered ${res.statusCode}`)),
      );
    });
    req.on('error', reject);
  });
}

process.stdin.once('data', async () => {
  const timed = Array.from({ length: Number(probes) }, (_, i) =>
    new Promise((r) => setTimeout(r, i * Number(interval))).then(probe),
  );
  const heads = await Promise.all(Array.from({ length: Number(clients) }, client));
  process.stdout.write(JSON.stringify({ heads, probes: await Promise.all(timed) }) + '\n');
  process.stdin.once('end', () => process.exit(0));
  process.stdin.resume();
});
