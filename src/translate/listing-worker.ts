/**
 * Worker-thread entry of code listings for a daemon (src/daemon/code-routes.ts): answers
 * `{ id, digest, path, query }` with `{ id, result }` or `{ id, error: { status, message } }`.
 * `path` is the image file, whose sha256 must be `digest`; `query` is `{ kind: 'functions' }`
 * (the image's functions, read without translating) or `{ kind: 'function', name }` /
 * `{ kind: 'pc', pc }` (that function's listing: the image is translated once per digest). The
 * last few images stay cached here by digest, so the serving thread never reads, translates or
 * prints an image itself.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { readElf } from '../elf/reader.js';
import type { ElfImage, GuestFunction } from '../elf/types.js';
import { CodeListing, type FunctionListing } from './listing.js';

/** What a query asks. */
export type ListingQuery =
  { kind: 'functions' } | { kind: 'function'; name: string } | { kind: 'pc'; pc: number };

/** A function of the list. */
export interface ListedFunction {
  name: string;
  pc: number;
  size: number;
}

/** Images cached at once (each holds its ELF, its module and the module's sections). */
const CACHED = 4;
/** A function longer than this (bytes of code) is not listed: its WAT would be tens of MB. */
export const MAX_LISTED_FUNCTION = 64 * 1024;

interface Entry {
  image: ElfImage;
  listing: Promise<CodeListing> | null;
}
const cache = new Map<string, Entry>();

function entry(digest: string, path: string): Entry {
  let e = cache.get(digest);
  if (e !== undefined) {
    cache.delete(digest);
    cache.set(digest, e); // most recently used last
    return e;
  }
  const bytes = readFileSync(path);
  if (bytes[0] === 0 && bytes[1] === 0x61 && bytes[2] === 0x73 && bytes[3] === 0x6d)
    throw new Failure(422, 'a WebAssembly image has no guest RISC-V code to list');
  const actual = createHash('sha256').update(bytes).digest('hex');
  if (actual !== digest)
    throw new Failure(500, `the stored image ${path} hashes to ${actual}, not ${digest}`);
  e = { image: readElf(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length)), listing: null };
  cache.set(digest, e);
  while (cache.size > CACHED) cache.delete(cache.keys().next().value!);
  return e;
}

class Failure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

async function answer(digest: string, path: string, q: ListingQuery): Promise<unknown> {
  const e = entry(digest, path);
  if (q.kind === 'functions') {
    return e.image.functions.map((f): ListedFunction => ({ name: f.name, pc: f.start, size: f.size }));
  }
  let f: GuestFunction | undefined;
  if (q.kind === 'function') f = e.image.functions.find((x) => x.names.includes(q.name));
  else f = e.image.functions.find((x) => q.pc >= x.start && q.pc < x.start + x.size);
  if (f === undefined) {
    throw new Failure(
      404,
      q.kind === 'function'
        ? `no function named ${q.name} in this image`
        : `no function contains pc 0x${q.pc.toString(16)}`,
    );
  }
  if (f.size > MAX_LISTED_FUNCTION) {
    throw new Failure(413, `${f.name} is ${f.size} bytes of code; listings stop at ${MAX_LISTED_FUNCTION}`);
  }
  e.listing ??= CodeListing.build(e.image);
  const [listed]: FunctionListing[] = (await e.listing).list([f]);
  return listed;
}

parentPort!.on('message', (job: { id: number; digest: string; path: string; query: ListingQuery }) => {
  answer(job.digest, job.path, job.query).then(
    (result) => parentPort!.postMessage({ id: job.id, result }),
    (e: unknown) => {
      const err = e instanceof Error ? e : new Error(String(e));
      const status = e instanceof Failure ? e.status : err.name === 'ElfError' ? 422 : 500;
      // a failed translation is not cached: the next request tries again
      const entryNow = cache.get(job.digest);
      if (entryNow && !(e instanceof Failure)) entryNow.listing = null;
      const message = e instanceof Failure ? err.message : `${err.name}: ${err.message}`;
      parentPort!.postMessage({ id: job.id, error: { status, message } });
    },
  );
});
