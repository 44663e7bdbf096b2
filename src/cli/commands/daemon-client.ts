/**
 * The CLI's HTTP client of bermd (the client verbs never import src/daemon). It speaks the
 * daemon's control API (upstream-compatible shapes):
 *
 *   GET /harnesses                      -> [harness...]  (or {"harnesses": [...]})
 *   GET|PUT|DELETE /harnesses/{name}    -> {name, digest, usage, tools, deps, granted?}; DELETE 204
 *   POST /harnesses/{name}/tools/{tool} -> 200 {"done": ..} | {"failed": ..}; 500 trap; with
 *                                          Accept: text/event-stream, `log` events then `result`
 *   POST /wakes, GET /wakes, DELETE /wakes/{id}
 *
 * Every refusal is `{"error": "..."}`; this client turns refusals and connection failures into
 * {@link CliError}s whose message is the server's own, plus the fix where there is one
 * (bermd not running, token missing or wrong).
 *
 * Target: `--host URL` (a bare `host:port` means http), else `$BERM_HOST`, else
 * http://127.0.0.1:7777. Token: `--token-file FILE` (first line), else `$BERMD_TOKEN`; sent as
 * `Authorization: Bearer`.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Dispatcher } from 'undici';
import type { DeadWakeInfo, HarnessInfo, WakeInfo, WakeList } from '../../contract/index.js';
import { CliError, ExitCode, type ExitCodeValue } from '../context.js';

type Undici = typeof import('undici');
let undiciModule: Undici | null = null;
/** undici, loaded on the first request (CLI commands that talk to no server never load it). */
function undici(): Undici {
  return (undiciModule ??= createRequire(import.meta.url)('undici') as Undici);
}

/** Where bermd listens when neither --host nor BERM_HOST says otherwise. */
export const DEFAULT_HOST = 'http://127.0.0.1:7777';

/**
 * Most bytes of one answer the client reads from bermd (64 MiB; an event stream counts as one
 * answer). Far above what bermd sends (a tool's result is at most 4 MiB, 24 MiB as escaped JSON), so
 * only a server that is not bermd, or a broken one, reaches it: the client then stops reading
 * instead of growing until it dies.
 */
export const MAX_ANSWER_BYTES = 64 << 20;

/** Counts the bytes of one answer; throws CliError (exit 2) past {@link MAX_ANSWER_BYTES}. */
class AnswerBound {
  private n = 0;
  constructor(
    private readonly base: string,
    private readonly body: { destroy(): unknown },
  ) {}
  add(bytes: number): void {
    this.n += bytes;
    if (this.n > MAX_ANSWER_BYTES) {
      this.body.destroy();
      throw new CliError(
        `the answer from ${this.base} is over ${MAX_ANSWER_BYTES} bytes (refused): is ${this.base} bermd?`,
      );
    }
  }
}

/** The body of an answer as UTF-8, at most {@link MAX_ANSWER_BYTES}. */
async function readAnswer(base: string, body: Dispatcher.ResponseData['body']): Promise<string> {
  const bound = new AnswerBound(base, body);
  const chunks: Buffer[] = [];
  for await (const c of body) {
    bound.add((c as Buffer).length);
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Options every client verb takes. */
export interface DaemonFlags {
  host?: string;
  tokenFile?: string;
}

/** A resolved daemon address and token. */
export interface DaemonTarget {
  /** `http(s)://host:port` without a trailing slash */
  base: string;
  token: string | null;
  /** where the token came from (`--token-file FILE`, `BERMD_TOKEN`), for messages */
  tokenSource: string | null;
}

/**
 * Normalize a `--host` value: `http://h:p`, `https://h:p` or a bare `h:p` (http). A path, query or
 * credentials in the URL are refused.
 * @throws CliError naming the expected form
 */
export function parseHost(text: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new CliError(`--host '${text}' is not a URL (expected http://HOST:PORT)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new CliError(`--host '${text}': only http and https are spoken`);
  }
  if (
    url.username ||
    url.password ||
    url.search ||
    url.hash ||
    (url.pathname !== '/' && url.pathname !== '')
  ) {
    throw new CliError(`--host '${text}' must be just scheme, host and port (e.g. http://127.0.0.1:7777)`);
  }
  return url.origin;
}

/**
 * Resolve the daemon target from flags and environment.
 * @throws CliError for a bad --host, an unreadable or empty token file
 */
export function resolveTarget(flags: DaemonFlags, env: Record<string, string | undefined>): DaemonTarget {
  const base = parseHost(flags.host ?? (env.BERM_HOST || DEFAULT_HOST));
  if (flags.tokenFile !== undefined) {
    let text: string;
    try {
      text = readFileSync(flags.tokenFile, 'utf8');
    } catch (e) {
      throw new CliError(
        `--token-file ${flags.tokenFile}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
      );
    }
    const token = (text.split(/\r?\n/)[0] ?? '').trim();
    if (!token) throw new CliError(`--token-file ${flags.tokenFile}: the first line is empty`);
    return { base, token, tokenSource: `--token-file ${flags.tokenFile}` };
  }
  // BERM_TOKEN is the index's credential (berm publish), never sent to bermd
  const token = env.BERMD_TOKEN?.trim();
  return token ? { base, token, tokenSource: 'BERMD_TOKEN' } : { base, token: null, tokenSource: null };
}

export type { DeadWakeInfo, HarnessInfo, WakeInfo, WakeList };

/** How an invocation ended, from the daemon's answer. */
export type InvokeResult =
  | { status: 'ok'; result: string; body: Record<string, unknown> }
  | { status: 'failed'; message: string; body: Record<string, unknown> }
  /** a trap (500 with `trap`), refusal (429) or other error: `error` is the server's message */
  | { status: 'error'; httpStatus: number; error: string; body: Record<string, unknown> };

interface Answer {
  status: number;
  json: unknown;
  text: string;
}

/**
 * How long, in all, a request waits out `503` answers that carry `Retry-After` (bermd restoring
 * its deployments after a restart, a full connection table) before the 503 is reported: a deploy
 * or tool call a CI job sends right after a restart then goes through instead of failing.
 */
export const RETRY_503_MS = 60_000;

/** The wait a `Retry-After` asks for, in ms (its seconds form; 0.1 s to 5 s), or null without one. */
export function retryAfterMs(header: string | string[] | undefined): number | null {
  const v = Array.isArray(header) ? header[0] : header;
  if (v === undefined || !/^\s*\d+\s*$/.test(v)) return null;
  return Math.min(5000, Math.max(100, Number(v) * 1000));
}

/** An HTTP client of one bermd. */
export class DaemonClient {
  private readonly dispatcher: Dispatcher;

  /**
   * @param target the daemon and its token
   * @param retry503Ms how long, in all, to wait out 503 answers with Retry-After (0: never)
   */
  constructor(
    readonly target: DaemonTarget,
    private readonly retry503Ms = RETRY_503_MS,
  ) {
    // a deploy translates before it answers and a tool may run long: generous bounds, but never
    // an unbounded wait on a daemon that stopped answering
    this.dispatcher = new (undici().Agent)({
      connectTimeout: 10_000,
      headersTimeout: 600_000,
      bodyTimeout: 600_000,
    });
  }

  /** Release connections. */
  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { accept: 'application/json', ...extra };
    if (this.target.token) h.authorization = `Bearer ${this.target.token}`;
    return h;
  }

  private unreachable(e: unknown): CliError {
    const err = e as NodeJS.ErrnoException;
    const why = err.code ?? err.message;
    return new CliError(
      `cannot reach bermd at ${this.target.base} (${why}): is bermd running at ${this.target.base}?`,
    );
  }

  /**
   * One request, sent again after the wait a `503` with `Retry-After` asks for, for up to
   * `retry503Ms` in all (a 503 means the request was not handled, so sending it again is safe).
   * @throws CliError when bermd cannot be reached
   */
  private async request(
    method: 'GET' | 'PUT' | 'POST' | 'DELETE',
    path: string,
    headers: Record<string, string>,
    body?: Uint8Array | string,
  ): Promise<Dispatcher.ResponseData> {
    const t0 = Date.now();
    const payload = typeof body === 'string' ? body : body === undefined ? undefined : Buffer.from(body);
    for (;;) {
      let res: Dispatcher.ResponseData;
      try {
        res = await undici().request(this.target.base + path, {
          dispatcher: this.dispatcher,
          method,
          headers,
          body: payload,
        });
      } catch (e) {
        throw this.unreachable(e);
      }
      const wait = res.statusCode === 503 ? retryAfterMs(res.headers['retry-after']) : null;
      if (wait === null || Date.now() - t0 + wait > this.retry503Ms) return res;
      await res.body.dump();
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  private async send(
    method: 'GET' | 'PUT' | 'POST' | 'DELETE',
    path: string,
    body?: Uint8Array | string,
    extraHeaders: Record<string, string> = {},
  ): Promise<Answer> {
    const res = await this.request(method, path, this.headers(extraHeaders), body);
    let text: string;
    try {
      text = await readAnswer(this.target.base, res.body);
    } catch (e) {
      if (e instanceof CliError) throw e;
      throw new CliError(`bermd at ${this.target.base} broke off its answer: ${(e as Error).message}`);
    }
    let json: unknown = undefined;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON; refusal() reports the status and the text
    }
    return { status: res.statusCode, json, text };
  }

  /** The CliError of a refusal: the server's `error`, with the fix for 401. */
  refusal(a: { status: number; json: unknown; text: string }, what: string): CliError {
    const err = (a.json as { error?: unknown } | undefined)?.error;
    const msg = typeof err === 'string' ? err : a.text.trim().slice(0, 200) || `status ${a.status}`;
    if (a.status === 401) {
      const fix = this.target.token
        ? `the token from ${this.target.tokenSource} was refused; check it matches bermd's token`
        : "set BERMD_TOKEN (or --token-file FILE) to the token bermd was started with (BERM_TOKEN is the index's token and is not sent to bermd)";
      return new CliError(`${what}: bermd at ${this.target.base} answered 401 (${msg}): ${fix}`);
    }
    const code: ExitCodeValue = a.status >= 500 ? ExitCode.Internal : ExitCode.BadInput;
    return new CliError(
      `${what}: ${msg}${a.status === 404 || a.status === 400 ? '' : ` (HTTP ${a.status})`}`,
      code,
    );
  }

  private expect(a: Answer, ok: number[], what: string): unknown {
    if (!ok.includes(a.status)) throw this.refusal(a, what);
    return a.json;
  }

  /** `GET /health`: true when the daemon answers `{"status":"ok"}`. */
  async health(): Promise<boolean> {
    const a = await this.send('GET', '/health');
    return a.status === 200 && (a.json as { status?: unknown } | undefined)?.status === 'ok';
  }

  /** `GET /harnesses` (accepts a bare array, upstream's shape, or `{"harnesses": [...]}`). */
  async list(): Promise<HarnessInfo[]> {
    const j = this.expect(await this.send('GET', '/harnesses'), [200], 'ls');
    const arr = Array.isArray(j) ? j : (j as { harnesses?: unknown } | undefined)?.harnesses;
    if (!Array.isArray(arr))
      throw new CliError(`ls: bermd at ${this.target.base} answered something that is not a harness list`);
    return arr as HarnessInfo[];
  }

  /** `GET /harnesses/{name}`. */
  async get(name: string): Promise<HarnessInfo> {
    return this.expect(
      await this.send('GET', `/harnesses/${encodeURIComponent(name)}`),
      [200],
      `inspect ${name}`,
    ) as HarnessInfo;
  }

  /** `PUT /harnesses/{name}` with the ELF bytes. */
  async deploy(name: string, elf: Uint8Array): Promise<HarnessInfo> {
    const a = await this.send('PUT', `/harnesses/${encodeURIComponent(name)}`, elf, {
      'content-type': 'application/octet-stream',
    });
    return this.expect(a, [200, 201], `deploy ${name}`) as HarnessInfo;
  }

  /** `DELETE /harnesses/{name}`. */
  async remove(name: string): Promise<void> {
    this.expect(
      await this.send('DELETE', `/harnesses/${encodeURIComponent(name)}`),
      [200, 204],
      `rm ${name}`,
    );
  }

  /**
   * `POST /harnesses/{name}/tools/{tool}`. With `onLog`, asks for `text/event-stream` and hands
   * each `log` event's line to it while the tool runs; the `result` event carries the outcome.
   * 404 (unknown harness or tool) and 400 (bad arguments) throw; a trap (500), a refusal (429)
   * and other errors come back as `status: 'error'` with the server's message.
   */
  async invoke(
    name: string,
    tool: string,
    args: string,
    onLog?: (line: string) => void,
  ): Promise<InvokeResult> {
    const path = `/harnesses/${encodeURIComponent(name)}/tools/${encodeURIComponent(tool)}`;
    const what = `invoke ${name} ${tool}`;
    if (!onLog)
      return this.outcome(await this.send('POST', path, args, { 'content-type': 'application/json' }), what);
    const res = await this.request(
      'POST',
      path,
      this.headers({ 'content-type': 'application/json', accept: 'text/event-stream' }),
      args,
    );
    const type = String(res.headers['content-type'] ?? '');
    if (!type.startsWith('text/event-stream')) {
      // a refusal before the stream started (401, 404, 400, 413...) is ordinary JSON
      const text = await readAnswer(this.target.base, res.body);
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
      return this.outcome({ status: res.statusCode, json, text }, what);
    }
    let result: Answer | null = null;
    const parser = new SseParser((event, data) => {
      if (event === 'log') onLog(data);
      else if (event === 'result') {
        let json: unknown;
        try {
          json = JSON.parse(data);
        } catch {
          json = undefined;
        }
        // the result event carries the HTTP status the plain answer would have had
        const obj = (json ?? {}) as Record<string, unknown>;
        const st = obj.status;
        if (typeof st === 'number') delete obj.status;
        result = { status: typeof st === 'number' ? st : 200, json, text: data };
      }
    });
    const bound = new AnswerBound(this.target.base, res.body);
    try {
      for await (const chunk of res.body) {
        bound.add((chunk as Buffer).length);
        parser.push((chunk as Buffer).toString('utf8'));
      }
    } catch (e) {
      if (e instanceof CliError) throw e;
      throw new CliError(`${what}: the event stream from bermd broke off: ${(e as Error).message}`);
    }
    parser.end();
    if (result === null) throw new CliError(`${what}: bermd's event stream ended without a result`);
    return this.outcome(result, what);
  }

  private outcome(a: Answer, what: string): InvokeResult {
    const body = (a.json ?? {}) as Record<string, unknown>;
    if (a.status === 200 && typeof body.done === 'string') return { status: 'ok', result: body.done, body };
    if (a.status === 200 && typeof body.failed === 'string')
      return { status: 'failed', message: body.failed, body };
    if (a.status === 200) {
      throw new CliError(`${what}: bermd answered 200 without "done" or "failed"`, ExitCode.Internal);
    }
    if (a.status >= 400 && a.status < 500 && a.status !== 429) throw this.refusal(a, what);
    const err = typeof body.error === 'string' ? body.error : a.text.trim() || `status ${a.status}`;
    return { status: 'error', httpStatus: a.status, error: err, body };
  }

  /** `POST /wakes`. */
  async addWake(req: {
    harness: string;
    delay_ms?: number;
    at?: number;
    payload?: string;
    id?: string;
  }): Promise<WakeInfo> {
    const a = await this.send('POST', '/wakes', JSON.stringify(req), { 'content-type': 'application/json' });
    return this.expect(a, [200, 201], `wake add ${req.harness}`) as WakeInfo;
  }

  /**
   * `GET /wakes[?limit=N]` (a bare array or `{"wakes": [...], "pending": N, "truncated"?}`): the
   * earliest wakes, at most `limit` (bermd's default when undefined: 1,000), and how many are
   * pending in all (the list's length when the daemon does not say).
   */
  async listWakes(limit?: number): Promise<WakeList> {
    const query = limit === undefined ? '' : `?limit=${limit}`;
    const j = this.expect(await this.send('GET', `/wakes${query}`), [200], 'wake ls');
    const obj = j as { wakes?: unknown; pending?: unknown } | undefined;
    const arr = Array.isArray(j) ? j : obj?.wakes;
    if (!Array.isArray(arr))
      throw new CliError(`wake ls: bermd at ${this.target.base} answered something that is not a wake list`);
    const pending =
      !Array.isArray(j) && typeof obj?.pending === 'number' && obj.pending >= arr.length
        ? obj.pending
        : arr.length;
    return { wakes: arr as WakeInfo[], pending };
  }

  /** `DELETE /wakes/{id}`. */
  async removeWake(id: string): Promise<void> {
    this.expect(await this.send('DELETE', `/wakes/${encodeURIComponent(id)}`), [200, 204], `wake rm ${id}`);
  }

  /** `GET /wakes/dead[?limit=N]`: the oldest dead-letter entries and how many there are. */
  async listDead(limit?: number): Promise<{ dead: DeadWakeInfo[]; count: number }> {
    const query = limit === undefined ? '' : `?limit=${limit}`;
    const j = this.expect(await this.send('GET', `/wakes/dead${query}`), [200], 'wake ls --dead') as
      { dead?: unknown; count?: unknown } | undefined;
    if (!Array.isArray(j?.dead))
      throw new CliError(
        `wake ls --dead: bermd at ${this.target.base} answered something that is not a dead-letter list`,
      );
    const count = typeof j.count === 'number' ? j.count : j.dead.length;
    return { dead: j.dead as DeadWakeInfo[], count };
  }

  /** `POST /wakes/dead/{id}/retry`: the wake armed again. */
  async retryDead(id: string): Promise<WakeInfo> {
    const a = await this.send('POST', `/wakes/dead/${encodeURIComponent(id)}/retry`);
    return this.expect(a, [200, 201], `wake retry ${id}`) as WakeInfo;
  }

  /** `DELETE /wakes/dead/{id}`. */
  async dropDead(id: string): Promise<void> {
    this.expect(
      await this.send('DELETE', `/wakes/dead/${encodeURIComponent(id)}`),
      [200, 204],
      `wake drop ${id}`,
    );
  }
}

/**
 * An incremental parser of `text/event-stream` (WHATWG HTML, "server-sent events"): events are
 * separated by blank lines; `event:` names one (default `message`), each `data:` line adds a line
 * to its data; lines starting with ':' are comments; one space after the colon is dropped.
 */
export class SseParser {
  private buf = '';
  private pending: string[] = [];
  private event = '';
  private data: string[] = [];

  constructor(private readonly onEvent: (event: string, data: string) => void) {}

  /** Feed text as it arrives. */
  push(text: string): void {
    // chunks without a line end wait in a list, joined once a line end comes: a long line arriving
    // in many chunks then costs time linear in its length, not quadratic
    if (!/[\r\n]/.test(text) && !this.buf.endsWith('\r')) {
      this.pending.push(text);
      return;
    }
    this.buf += this.pending.join('') + text;
    this.pending = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buf);
      if (!m) break;
      // a lone '\r' at the end may be the first half of '\r\n': wait for more
      if (m[0] === '\r' && m.index === this.buf.length - 1) break;
      const line = this.buf.slice(0, m.index);
      this.buf = this.buf.slice(m.index + m[0].length);
      this.line(line);
    }
  }

  /** The stream ended: a last event without its blank line is dispatched too. */
  end(): void {
    this.buf += this.pending.join('');
    this.pending = [];
    if (this.buf) this.line(this.buf);
    this.buf = '';
    this.line('');
  }

  private line(line: string): void {
    if (line === '') {
      if (this.data.length > 0 || this.event) this.onEvent(this.event || 'message', this.data.join('\n'));
      this.event = '';
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    let value = i < 0 ? '' : line.slice(i + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
  }
}
