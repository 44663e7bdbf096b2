/**
 * bermd's view of an index (`--index SOURCE`, resolved as the CLI resolves one: a directory, a
 * `.git` URL cloned shallow into the cache directory, or an index service URL), for clients that
 * browse and install from it (the workbench's Index view):
 *
 *   GET  /index?q=TERM[&limit=N&cursor=C]   200 JSON array of index entries, each with
 *                                           `"installed": true|false` (a deployed harness has that
 *                                           digest); the next page's cursor in `x-next-cursor`
 *   POST /index/install                     {"reference": "...", "name": "..."}: pull, verify (the
 *                                           layer digest and the index's published digest, the same
 *                                           check as `berm install`), deploy under `name`; answers
 *                                           as PUT /harnesses/{name} does
 *
 * Without `--index` both answer 404 `{"error": "no index configured"}`. Refusals: 400 bad query,
 * body, reference or name; 422 not a berm harness, a tampered blob, a digest other than the
 * index published; 502 registry or index unreachable; a deploy's own refusals as they are.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { CursorError } from '../index/catalog.js';
import { fetchVerified, InstallError } from '../index/install.js';
import { IndexError, type IndexSource } from '../index/source.js';
import { describe, type Deployments } from './deployments.js';
import { checkHarnessName, HttpError, sendJson } from './http.js';

/** What the index routes need of the daemon. */
export interface IndexRoutesOptions {
  /** the opened index, or null without --index */
  source: IndexSource | null;
  deployments: Deployments;
  /** read a request body under the daemon's limits */
  body(req: IncomingMessage): Promise<Buffer>;
  log(line: string): void;
}

/**
 * Serve `/index` and `/index/install` (`parts`: the path split at '/', without the leading empty
 * part; `query` the text after '?').
 * @returns the route label for metrics
 * @throws HttpError for every refusal (see the module comment)
 */
export async function serveIndex(
  o: IndexRoutesOptions,
  method: string,
  parts: string[],
  query: string,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<string> {
  const list = parts.length === 1 || (parts.length === 2 && parts[1] === '');
  const install = parts.length === 2 && parts[1] === 'install';
  if (!list && !install) throw new HttpError(404, `no route ${method} /${parts.join('/')}`);
  const route = list ? '/index' : '/index/install';
  if (o.source === null) throw new HttpError(404, 'no index configured');
  if (list) {
    if (method !== 'GET') throw new HttpError(405, `${method} is not allowed on /index (GET)`);
    const params = new URLSearchParams(query);
    let limit: number | undefined;
    const l = params.get('limit');
    if (l !== null) {
      if (!/^\d{1,6}$/.test(l) || Number(l) < 1)
        throw new HttpError(400, 'limit must be a whole number from 1 to 999999');
      limit = Number(l);
    }
    let page;
    try {
      page = await o.source.search(params.get('q') ?? '', {
        limit,
        cursor: params.get('cursor') ?? undefined,
      });
    } catch (e) {
      if (e instanceof CursorError) throw new HttpError(400, e.message);
      if (e instanceof IndexError)
        throw new HttpError(e.status === 400 ? 400 : 502, `the index: ${e.message}`);
      throw e;
    }
    const deployed = new Set(o.deployments.list().map((d) => `sha256:${d.digest}`));
    if (page.next !== undefined) res.setHeader('x-next-cursor', page.next);
    sendJson(
      res,
      200,
      page.entries.map((e) => ({ ...e, installed: deployed.has(e.digest) })),
    );
    return route;
  }
  if (method !== 'POST') throw new HttpError(405, `${method} is not allowed on /index/install (POST)`);
  let body: unknown;
  try {
    body = JSON.parse((await o.body(req)).toString('utf8'));
  } catch (e) {
    if (e instanceof HttpError) throw e;
    throw new HttpError(
      400,
      'the body is not JSON: send {"reference": "host/repository:tag", "name": "..."}',
    );
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new HttpError(400, 'the body must be a JSON object {"reference", "name"}');
  const b = body as Record<string, unknown>;
  if (typeof b.reference !== 'string') throw new HttpError(400, 'reference is missing or not a string');
  if (typeof b.name !== 'string') throw new HttpError(400, 'name is missing or not a string');
  const name = checkHarnessName(b.name);
  let v;
  try {
    v = await fetchVerified(b.reference, o.source);
  } catch (e) {
    if (e instanceof InstallError) throw new HttpError(e.status, e.message);
    throw e;
  }
  let deployed;
  try {
    deployed = await o.deployments.deploy(name, v.elf);
  } catch (e) {
    if (e instanceof HttpError && e.status === 403) o.log(`refused the install of ${name}: ${e.message}`);
    throw e;
  }
  const { deployment, changed } = deployed;
  if (changed) {
    const caps = deployment.granted.capabilities.join(', ') || 'none';
    o.log(`installed ${name} from ${v.reference} sha256 ${deployment.digest} capabilities: ${caps}`);
  }
  sendJson(res, 200, describe(deployment));
  return route;
}
