/**
 * The wake resource: `POST /wakes` arms a wake of a deployed harness's on_wake (201 with the
 * wake), `GET /wakes?limit=N` lists the earliest pending ones, `DELETE /wakes/{id}` cancels one
 * (204; 404 when there is none), `GET /wakes/fired` lists the recent firings the change feed saw.
 * The dead-letter set (docs/wakes.md): `GET /wakes/dead?limit=N` lists the oldest entries,
 * `POST /wakes/dead/{id}/retry` arms one again (201 with the wake; 404; 409 while a pending wake
 * holds its id), `DELETE /wakes/dead/{id}` drops one (204; 404).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { WAKE_LIST_LIMIT, type DeadWakeList, type WakeList } from '../../contract/index.js';
import { HttpError, checkHarnessName, readBody, sendJson } from '../http.js';
import type { EventHub } from '../events.js';
import { storeFault } from '../../store/store-fault.js';
import type { RouteContext } from './context.js';
import { parseJson, segment, type Resource } from './router.js';

/**
 * The `limit` query parameter of a list request: a whole number 1..WAKE_LIST_LIMIT.max, default
 * WAKE_LIST_LIMIT.default. A whole due-set in one reply could be gigabytes (millions of wakes of up
 * to 64 KiB of payload), built in memory on the serving thread.
 * @throws HttpError 400 for anything else
 */
function listLimit(url: string): number {
  const q = url.indexOf('?');
  const raw = q === -1 ? null : new URLSearchParams(url.slice(q + 1)).get('limit');
  if (raw === null) return WAKE_LIST_LIMIT.default;
  const n = Number(raw);
  if (!/^[0-9]+$/.test(raw) || n < 1 || n > WAKE_LIST_LIMIT.max)
    throw new HttpError(
      400,
      `limit must be a whole number from 1 to ${WAKE_LIST_LIMIT.max} (got ${JSON.stringify(raw.slice(0, 40))})`,
    );
  return n;
}

/**
 * The wake resource of the route table.
 * @param events the change feed, whose recent firings `GET /wakes/fired` lists
 */
export function wakeRoutes(ctx: RouteContext, events: EventHub): Resource {
  const arm = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = parseJson(await readBody(req, ctx.body()));
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new HttpError(400, 'the body must be a JSON object {"harness", "delay_ms", "payload"?, "id"?}');
    }
    const b = body as Record<string, unknown>;
    if (typeof b.harness !== 'string') throw new HttpError(400, 'harness is missing or not a string');
    const harness = checkHarnessName(b.harness);
    ctx.deployments.require(harness);
    // `at` goes to the runtime as it is: the due instant is exactly `at`. Both are whole ms, as
    // the CLI requires; a JSON null counts as absent (`{"delay_ms": null, "at": N}` is `at` alone)
    const at = b.at ?? undefined;
    const delay = b.delay_ms ?? undefined;
    const shown = (v: unknown): string => (typeof v === 'number' ? String(v) : JSON.stringify(v));
    let when: { at: number } | { delayMs: number };
    if (at !== undefined) {
      if (typeof at !== 'number' || !Number.isSafeInteger(at) || at < 0) {
        throw new HttpError(
          400,
          `at must be a whole number of ms since the Unix epoch, >= 0 (got ${shown(at)})`,
        );
      }
      if (delay !== undefined) throw new HttpError(400, 'give either delay_ms or at, not both');
      when = { at };
    } else {
      if (delay === undefined) {
        throw new HttpError(400, 'give delay_ms (ms from now) or at (ms since the Unix epoch)');
      }
      if (typeof delay !== 'number' || !Number.isSafeInteger(delay) || delay < 0) {
        throw new HttpError(400, `delay_ms must be a whole number of ms >= 0 (got ${shown(delay)})`);
      }
      when = { delayMs: delay };
    }
    if (b.payload !== undefined && typeof b.payload !== 'string')
      throw new HttpError(400, 'payload must be a string');
    if (b.id !== undefined && (typeof b.id !== 'string' || b.id === '' || b.id.length > 128)) {
      throw new HttpError(400, 'id must be a non-empty string of at most 128 characters');
    }
    let wake;
    try {
      wake = await ctx.backend.armWake({
        harness,
        ...when,
        payload: (b.payload as string | undefined) ?? '',
        ...(b.id !== undefined ? { id: b.id as string } : {}),
      });
    } catch (e) {
      const fault = storeFault(e);
      if (fault !== null)
        throw new HttpError(503, `wake not armed: ${fault}: ${(e as Error).message}; retry later`);
      // a limit of the due-set: 413 for a payload over maxPayloadBytes, 429 for a count
      // (harnessApiWakes, maxPendingWakes), 400 else (a delay past maxDelayMs is bad input); the
      // body names the limit as a tool call's refusal does
      const limit = (e as { limit?: unknown }).limit;
      if (typeof limit === 'string') {
        const status =
          limit === 'maxPayloadBytes'
            ? 413
            : limit === 'harnessApiWakes' || limit === 'maxPendingWakes'
              ? 429
              : 400;
        throw new HttpError(status, `wake refused: ${(e as Error).message}`, { limit });
      }
      throw new HttpError(400, `wake refused: ${(e as Error).message}`);
    }
    sendJson(res, 201, wake);
  };

  return {
    routes: [
      {
        path: '/wakes',
        methods: {
          GET: async ({ req, res }) => {
            const { wakes, pending } = await ctx.backend.listWakes(listLimit(req.url ?? ''));
            const reply: WakeList = {
              wakes,
              pending,
              ...(pending > wakes.length ? { truncated: true } : {}),
            };
            sendJson(res, 200, reply);
          },
          POST: ({ req, res }) => arm(req, res),
        },
      },
      {
        path: '/wakes/fired',
        methods: { GET: ({ res }) => sendJson(res, 200, { fired: events.recentFirings() }) },
      },
      {
        path: '/wakes/dead',
        methods: {
          GET: async ({ req, res }) => {
            const limit = listLimit(req.url ?? '');
            const { dead, count } = ctx.backend.listDead
              ? await ctx.backend.listDead(limit)
              : { dead: [], count: 0 };
            const reply: DeadWakeList = { dead, count, ...(count > dead.length ? { truncated: true } : {}) };
            sendJson(res, 200, reply);
          },
        },
      },
      {
        path: '/wakes/dead/{id}/retry',
        methods: {
          POST: async ({ parts, res }) => {
            const id = segment(parts[2]!);
            const r = ctx.backend.retryDead ? await ctx.backend.retryDead(id) : 'missing';
            if (r === 'missing') throw new HttpError(404, `no dead-letter entry with id ${id}`);
            if (r === 'conflict')
              throw new HttpError(
                409,
                `a pending wake holds id ${id} (a recurring schedule re-armed itself?): cancel it (DELETE /wakes/${id}) or drop the entry`,
              );
            sendJson(res, 201, r);
          },
        },
      },
      {
        path: '/wakes/dead/{id}',
        methods: {
          DELETE: async ({ parts, res }) => {
            const id = segment(parts[2]!);
            if (!(ctx.backend.dropDead && (await ctx.backend.dropDead(id))))
              throw new HttpError(404, `no dead-letter entry with id ${id}`);
            res.writeHead(204).end();
          },
        },
      },
      {
        path: '/wakes/{id}',
        methods: {
          DELETE: async ({ parts, res }) => {
            const id = segment(parts[1]!);
            if (!(await ctx.backend.cancelWake(id))) throw new HttpError(404, `no wake with id ${id}`);
            res.writeHead(204).end();
          },
        },
      },
    ],
  };
}
