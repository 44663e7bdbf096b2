/**
 * The page's only way to the daemon: same-origin HTTP. Every mutating request carries the
 * session's CSRF proof in `X-Berm-CSRF`; the session itself is an HttpOnly cookie the page never
 * sees. The token is sent once, in the body of the login request, and kept nowhere.
 */

/** A refusal of the daemon: its status and its `{"error"}` text, verbatim. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly body: unknown = null,
  ) {
    super(message);
  }
}

let csrf: string | null = null;
let onUnauthorized: () => void = () => {};

/** Remember the session's CSRF proof (null after logout). */
export function setCsrf(value: string | null): void {
  csrf = value;
}

/** Called when the daemon answers 401 to a request of a logged-in page (the session ended). */
export function setUnauthorizedHandler(f: () => void): void {
  onUnauthorized = f;
}

function headers(method: string, extra: Record<string, string> = {}): Record<string, string> {
  const h: Record<string, string> = { ...extra };
  if (method !== 'GET' && method !== 'HEAD' && csrf !== null) h['x-berm-csrf'] = csrf;
  return h;
}

async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text();
  let body: unknown = text;
  let message = text || `${res.status} ${res.statusText}`;
  try {
    body = JSON.parse(text);
    if (body && typeof body === 'object' && typeof (body as { error?: unknown }).error === 'string')
      message = (body as { error: string }).error;
  } catch {
    // not JSON: the text as it came
  }
  return new ApiError(res.status, message, body);
}

/**
 * One request. A plain object body is sent as JSON; a string or bytes as they are.
 * @returns the parsed JSON reply (null for 204)
 * @throws ApiError with the daemon's `error` text on a non-2xx reply
 */
export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  let payload: BodyInit | undefined;
  const extra: Record<string, string> = {};
  if (body instanceof Uint8Array || typeof body === 'string' || body instanceof Blob)
    payload = body as BodyInit;
  else if (body !== undefined) {
    payload = JSON.stringify(body);
    extra['content-type'] = 'application/json';
  }
  const res = await fetch(path, {
    method,
    headers: headers(method, extra),
    body: payload ?? null,
    credentials: 'same-origin',
  });
  if (!res.ok) {
    const e = await errorOf(res);
    if (res.status === 401 && path !== '/session') onUnauthorized();
    throw e;
  }
  if (res.status === 204) return null as T;
  const type = res.headers.get('content-type') ?? '';
  return (type.includes('json') ? await res.json() : await res.text()) as T;
}

/** What `GET /session` answers. */
export interface SessionState {
  auth: 'token' | 'open';
  session: boolean;
  csrf?: string;
}

/** Log in with the daemon's token (or open a session when it has none). */
export async function login(token: string | null): Promise<void> {
  const r = await api<{ csrf: string }>('POST', '/session', token === null ? {} : { token });
  setCsrf(r.csrf);
}

/** End the session on the daemon. */
export async function logout(): Promise<void> {
  await api('DELETE', '/session');
  setCsrf(null);
}

/** One tool call streamed: berm.log lines as they come, then the final reply. */
export interface InvokeResult {
  /** HTTP status of the outcome as the non-streamed call would answer it */
  status: number;
  reply: Record<string, unknown>;
}

/** Split an SSE text into complete events; returns them and the unfinished rest. */
export function parseSse(buffer: string): { events: { event: string; data: string }[]; rest: string } {
  const events: { event: string; data: string }[] = [];
  let rest = buffer.replace(/\r\n?/g, '\n');
  let end: number;
  while ((end = rest.indexOf('\n\n')) !== -1) {
    const block = rest.slice(0, end);
    rest = rest.slice(end + 2);
    let event = 'message';
    const data: string[] = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
    if (data.length > 0) events.push({ event, data: data.join('\n') });
  }
  return { events, rest };
}

/**
 * Call a tool through the daemon's streamed invocation (`Accept: text/event-stream`): `onLog`
 * gets each berm.log line while the guest runs.
 * @throws ApiError when the call is refused before it runs (bad arguments, unknown tool)
 */
export async function invokeStreamed(
  harness: string,
  tool: string,
  argsJson: string,
  onLog: (line: string) => void,
): Promise<InvokeResult> {
  const res = await fetch(`/harnesses/${encodeURIComponent(harness)}/tools/${encodeURIComponent(tool)}`, {
    method: 'POST',
    headers: headers('POST', { accept: 'text/event-stream', 'content-type': 'application/json' }),
    body: argsJson,
    credentials: 'same-origin',
  });
  if (!res.ok || !(res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    if (res.ok) return { status: res.status, reply: (await res.json()) as Record<string, unknown> };
    const e = await errorOf(res);
    if (res.status === 401) onUnauthorized();
    throw e;
  }
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    const { events, rest } = parseSse(buffer + value);
    buffer = rest;
    for (const ev of events) {
      if (ev.event === 'log') onLog(ev.data);
      else if (ev.event === 'result') {
        const r = JSON.parse(ev.data) as Record<string, unknown> & { status: number };
        const { status, ...reply } = r;
        return { status, reply };
      }
    }
  }
  throw new ApiError(0, 'the stream ended before the result');
}

/**
 * PUT an ELF with upload progress (fetch reports none).
 * @param onProgress fraction of the bytes sent, 0..1; 1 means the daemon is translating
 */
export function deployElf(
  name: string,
  bytes: Blob,
  onProgress: (fraction: number) => void,
): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('PUT', `/harnesses/${encodeURIComponent(name)}`);
    if (csrf !== null) xhr.setRequestHeader('x-berm-csrf', csrf);
    xhr.setRequestHeader('content-type', 'application/octet-stream');
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    };
    xhr.upload.onload = () => onProgress(1);
    xhr.onerror = () => reject(new ApiError(0, 'the connection to bermd failed'));
    xhr.onload = () => {
      let body: unknown = xhr.responseText;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        // keep the text
      }
      if (xhr.status >= 200 && xhr.status < 300) resolve(body as Record<string, unknown>);
      else {
        const msg =
          body && typeof body === 'object' && typeof (body as { error?: unknown }).error === 'string'
            ? (body as { error: string }).error
            : String(xhr.responseText || xhr.status);
        if (xhr.status === 401) onUnauthorized();
        reject(new ApiError(xhr.status, msg, body));
      }
    };
    xhr.send(bytes);
  });
}
