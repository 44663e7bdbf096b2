/**
 * The daemon's deployments: what is published under which name, with its manifest and grant.
 * A deploy is checked against the translation bounds (src/daemon/image-bounds.ts) and on the
 * serving thread only as far as reading headers goes (ELF structure, manifest, tool exports:
 * parsing, no translation), then its image is stored durably (src/daemon/image-files.ts), then it
 * is compiled by the runtime on a worker, then its record is committed to the runtime's store (the
 * one record of which name serves which image: src/store/store.ts DeploymentStore, SQLite under
 * --root or the shared PostgreSQL), and only then is it published and acknowledged. Deploys and
 * undeploys of one name are serialised. Listeners of 'changed' (MCP list_changed) hear every
 * publish and removal.
 *
 * An image no record uses is deleted: when a redeploy supersedes it or an undeploy removes it
 * (once the record is gone, unless a deploy of the same bytes is in progress; calls run the
 * compiled module in memory, never the file, so calls of it in flight finish unaffected), and at
 * {@link Deployments.load}, for images a crash left between the record's change and the deletion.
 */
import { EventEmitter } from 'node:events';
import type { ValidateFunction } from 'ajv';
import { ElfError } from '../elf/reader.js';
import { readImage, WasmImageError } from '../engine/image.js';
import { ManifestError, parseManifest, type Manifest } from '../harness/manifest.js';
import { DEFAULT_CALL_LIMITS, describeArgError, Harness, TOOL_PREFIX } from '../harness/harness.js';
import type { HarnessInfo } from '../contract/index.js';
import type { Backend, DeployGrant } from './backend.js';
import type { Grants } from './grants.js';
import { HttpError } from './http.js';
import { checkCodeBounds, checkTableBounds, DEFAULT_IMAGE_BOUNDS, type ImageBounds } from './image-bounds.js';
import { ImageFiles, readLegacyIndex, retireLegacyIndex, sha256Hex } from './image-files.js';
import { readLegacyImports, retireLegacyImports } from './reference-root.js';
import { storeFault, untilStoreAnswers } from '../store/store-fault.js';
import type { DeploymentStore } from '../store/store.js';

/** A published harness. */
export interface Deployment {
  name: string;
  /** lowercase hex sha256 of the ELF */
  digest: string;
  manifest: Manifest;
  granted: DeployGrant;
  /** ms since the Unix epoch */
  deployedAt: number;
}

/** The upstream inspect shape plus the granted set: `{name, digest, usage, tools, deps, granted}`. */
export function describe(d: Deployment): HarnessInfo {
  return {
    name: d.name,
    digest: d.digest,
    usage: d.manifest.usage,
    tools: d.manifest.tools.map((t) => ({
      name: t.name,
      description: t.description,
      parameters: t.parameters,
    })),
    deps: d.manifest.deps,
    granted: { capabilities: d.granted.capabilities, ...d.granted.grant },
    deployed_at: d.deployedAt,
  };
}

/**
 * Check an ELF against the translation bounds (symbols and relocations from the section headers
 * before anything is read, code once read), read its manifest and check that its tools are
 * exported, without translating.
 * @param bounds what the image may cost to translate (src/daemon/image-bounds.ts)
 * @throws HttpError 413 over a bound (naming it and the image's figure); 400 with the ELF
 *   reader's, manifest's or export check's message.
 */
export function inspectImage(bytes: Uint8Array, bounds: ImageBounds = DEFAULT_IMAGE_BOUNDS): Manifest {
  checkTableBounds(bytes, bounds);
  try {
    const image = readImage(bytes);
    checkCodeBounds(image, bounds);
    const manifest = parseManifest(image.manifest);
    const exported = new Set(
      image.functions.flatMap((f) => (f.global ? f.names.filter((n) => n.startsWith(TOOL_PREFIX)) : [])),
    );
    for (const t of manifest.tools) {
      if (!exported.has(TOOL_PREFIX + t.name)) {
        throw new ManifestError(
          `tool ${t.name} is declared in .berm.abi but ${TOOL_PREFIX}${t.name} is not exported`,
        );
      }
    }
    return manifest;
  } catch (e) {
    if (e instanceof ElfError)
      throw new HttpError(400, `not a berm harness: ELF: ${e.message}`, { code: e.code });
    if (e instanceof ManifestError) throw new HttpError(400, `not a berm harness: manifest: ${e.message}`);
    if (e instanceof WasmImageError)
      throw new HttpError(400, `not a berm harness: WebAssembly: ${e.message}`);
    throw e;
  }
}

/** A name's record in the store, as last read or committed. */
interface Stored {
  digest: string;
  /** ms since the Unix epoch */
  deployedAt: number;
}

/** What {@link Deployments.load} found and did, for the boot log. */
export interface LoadReport {
  /** records in the store */
  records: number;
  /** digests of stored images no record uses, deleted */
  removed: string[];
  /** entries of a legacy `deployments.json` moved into the store (null: there was none) */
  migrated: number | null;
  /** entries of a legacy `reference-imports.json` moved into the store (null: there was none) */
  importsMigrated: number | null;
}

/** Published harnesses, their durable record, and argument validators. */
export class Deployments extends EventEmitter<{ changed: [name: string, kind: 'deployed' | 'removed'] }> {
  private readonly published = new Map<string, Deployment>();
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly locks = new Map<string, Promise<unknown>>();
  /** digests with a deploy in progress, and how many */
  private readonly deploying = new Map<string, number>();
  private readonly busy = (digest: string): boolean => this.deploying.has(digest);
  /** progress of a restore in progress, or null */
  private restoring: { done: number; total: number } | null = null;
  /** the store's records by name, as last read or committed (a copy: the store is the record) */
  private readonly stored = new Map<string, Stored>();
  /** how many records name each digest */
  private readonly uses = new Map<string, number>();
  /** bytes a shared store handed {@link load}, until {@link restore} used them */
  private readonly loadedBytes = new Map<string, Uint8Array>();

  /**
   * @param images the image files under --root (`<root>/deployments`)
   * @param records the runtime store's deployments: the record of which name serves which digest
   */
  constructor(
    readonly images: ImageFiles,
    private readonly records: DeploymentStore,
    private readonly backend: Backend,
    private readonly grants: Grants,
    private readonly bounds: ImageBounds = DEFAULT_IMAGE_BOUNDS,
    /** images the store holds at most (--max-images) */
    private readonly maxImages = Infinity,
  ) {
    super();
  }

  /**
   * Read the store's records, first moving the files of earlier versions into the store and
   * deleting each durably (unlinked, its directory fsynced): the legacy index
   * (`<root>/deployments/deployments.json`) and the record of upstream imports
   * (`<root>/deployments/reference-imports.json`, src/daemon/reference-root.ts); then delete the
   * stored images no record uses. A shared store is the truth about every daemon's deployments, so
   * a legacy index (this daemon's local copy) is deleted without being imported. While the store
   * is unreachable (a shared one restarted while the daemon starts) the record of imports and the
   * read are tried again (250 ms doubling to 5 s, a `log` line each time). Call once, before
   * {@link restore}.
   * @throws Error naming the file when a legacy file is not its JSON (nothing is moved then); the
   *   store's error when it is not a store fault
   */
  async load(log: (line: string) => void): Promise<LoadReport> {
    let migrated: number | null = null;
    // both files are read before either is moved, so a damaged one leaves both as they are
    const legacyImports = readLegacyImports(this.images.root);
    const legacy = readLegacyIndex(this.images.root);
    if (legacy !== null) {
      if (!this.records.holdsImages) {
        for (const [name, e] of legacy) {
          const granted = this.grants.grantFor(name, e.digest);
          this.records.put({
            name,
            sha256: e.digest,
            elf: null,
            capabilities: granted.capabilities,
            grant: granted.grant as Record<string, unknown>,
            deployedAt: e.deployed_at,
          });
        }
      }
      retireLegacyIndex(this.images.root);
      migrated = this.records.holdsImages ? 0 : legacy.size;
    }
    if (legacyImports !== null) {
      await untilStoreAnswers(
        () => this.records.recordReferenceImports(legacyImports),
        (why, wait) => log(`the store cannot record upstream imports yet (${why}); again in ${wait} ms`),
      );
      retireLegacyImports(this.images.root);
    }
    const list = await untilStoreAnswers(
      () => this.records.list(),
      (why, wait) => log(`the store's deployments cannot be read yet (${why}); again in ${wait} ms`),
    );
    for (const r of list) {
      this.setStored(r.name, { digest: r.sha256, deployedAt: r.deployedAt });
      if (r.elf !== null) this.loadedBytes.set(r.name, r.elf);
    }
    const removed = this.images.removeUnused(new Set(this.uses.keys()));
    return {
      records: list.length,
      removed,
      migrated,
      importsMigrated: legacyImports === null ? null : legacyImports.size,
    };
  }

  /** How many deployments the store records (after {@link load}). */
  storedCount(): number {
    return this.stored.size;
  }

  /** The digest the store records for `name`, or undefined. */
  storedDigest(name: string): string | undefined {
    return this.stored.get(name)?.digest;
  }

  /**
   * Every name this daemon holds: published, or recorded in its copy of the store's records
   * without being served (not restored at boot, its image refused then), sorted.
   */
  heldNames(): string[] {
    return [...new Set([...this.published.keys(), ...this.stored.keys()])].sort();
  }

  /**
   * Store `bytes` and record them as `name`'s deployment without publishing them (an import at
   * boot, before {@link restore} publishes what the store records).
   * @throws the image write's or the store's error
   */
  importImage(name: string, bytes: Uint8Array): void {
    const digest = this.images.putImage(bytes);
    const granted = this.grants.grantFor(name, digest);
    const superseded = this.stored.get(name)?.digest;
    const deployedAt = Date.now();
    this.putRecord(name, digest, bytes, granted, deployedAt);
    this.setStored(name, { digest, deployedAt });
    if (superseded !== undefined) this.dropIfUnused(superseded);
  }

  /** The store's record of upstream images imported (src/daemon/reference-root.ts): name -> sha256. */
  referenceImports(): Map<string, string> {
    return this.records.referenceImports();
  }

  /** Add `imported` (name -> sha256) to the store's record of upstream imports, durably. */
  recordReferenceImports(imported: ReadonlyMap<string, string>): void {
    this.records.recordReferenceImports(imported);
  }

  /** Commit `name`'s record to the store (its bytes too where the store keeps images). */
  private putRecord(
    name: string,
    digest: string,
    bytes: Uint8Array,
    granted: DeployGrant,
    deployedAt: number,
  ): void {
    this.records.put({
      name,
      sha256: digest,
      elf: this.records.holdsImages ? bytes : null,
      capabilities: granted.capabilities,
      grant: granted.grant as Record<string, unknown>,
      deployedAt,
    });
  }

  private setStored(name: string, s: Stored): void {
    this.deleteStored(name);
    this.stored.set(name, s);
    this.uses.set(s.digest, (this.uses.get(s.digest) ?? 0) + 1);
  }

  private deleteStored(name: string): void {
    const old = this.stored.get(name);
    if (old === undefined) return;
    this.stored.delete(name);
    const n = (this.uses.get(old.digest) ?? 1) - 1;
    if (n > 0) this.uses.set(old.digest, n);
    else this.uses.delete(old.digest);
  }

  /** Delete the image `digest` unless a record uses it or a deploy of it is in progress. */
  private dropIfUnused(digest: string): void {
    if (!this.uses.has(digest) && !this.busy(digest)) this.images.remove(digest);
  }

  /**
   * Republish every deployment in the store (compiling on workers; no guest runs). An image that
   * is damaged, no longer passes the checks, or whose declaration changed is skipped and reported.
   * Up to `concurrency` deployments are in flight at once: each one's work is mostly on a worker
   * (a compile, or a load from the Wasm cache, then an instance slot made in every worker), so one
   * at a time left the other workers and this thread idle, and a restart with many deployments
   * took a sum of round trips. Distinct names are independent, so the order does not matter; the
   * store is only read (nothing is lost across a crash during a restore).
   * @param concurrency deployments in flight at once (>= 1; default 1)
   * @returns the problems, one line each, in the store's order (empty when everything came back)
   */
  async restore(concurrency = 1): Promise<string[]> {
    const entries = [...this.stored.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const problems: (string | null)[] = entries.map(() => null);
    let next = 0;
    const progress = { done: 0, total: entries.length };
    this.restoring = progress;
    const lane = async (): Promise<void> => {
      while (next < entries.length) {
        const i = next++;
        const [name, entry] = entries[i]!;
        try {
          const loaded = this.loadedBytes.get(name);
          this.loadedBytes.delete(name);
          // bytes from a shared store get their local file (what a failed redeploy puts back)
          if (loaded !== undefined && this.images.putImage(loaded) !== entry.digest)
            throw new Error(`the store's image does not hash to ${entry.digest}: it is damaged`);
          const bytes = loaded ?? this.images.readImage(entry.digest);
          const manifest = inspectImage(bytes, this.bounds);
          const granted = this.grants.grantFor(name, entry.digest);
          await this.backend.deploy(name, bytes, granted);
          this.published.set(name, {
            name,
            digest: entry.digest,
            manifest,
            granted,
            deployedAt: entry.deployedAt,
          });
        } catch (e) {
          problems[i] =
            `harness ${name} (sha256 ${entry.digest}) not restored: ${(e as Error).message}; ` +
            `deploy it again (PUT /harnesses/${name}) or remove it (DELETE /harnesses/${name})`;
        }
        progress.done++;
      }
    };
    const lanes = Math.max(1, Math.min(Math.floor(concurrency) || 1, entries.length));
    try {
      await Promise.all(Array.from({ length: lanes }, lane));
    } finally {
      this.restoring = null;
      this.loadedBytes.clear();
    }
    return problems.filter((p): p is string => p !== null);
  }

  /**
   * While {@link restore} runs: the stored deployments it has finished (restored or reported) and
   * how many there are; null otherwise.
   */
  restoreProgress(): { done: number; total: number } | null {
    return this.restoring === null ? null : { ...this.restoring };
  }

  /** Published harnesses, sorted by name. */
  list(): Deployment[] {
    return [...this.published.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  /** The published harness `name`, or undefined. */
  get(name: string): Deployment | undefined {
    return this.published.get(name);
  }

  /**
   * The published harness `name`. @throws HttpError 404 (naming only `name`: the reply of a wrong
   * guess never lists the other harnesses; GET /harnesses does, to whoever may list)
   */
  require(name: string): Deployment {
    const d = this.published.get(name);
    if (!d) throw new HttpError(404, `no harness named ${name} is deployed`);
    return d;
  }

  /**
   * Deploy `bytes` as `name`: acknowledged (resolved) once the image file is durable and the
   * store's record committed.
   * @param opts.recordedAt the deploy time of a record the store already holds (a change another
   *   daemon made to a shared store): the deployment is published without writing it again
   * @returns the deployment and whether anything changed (false when the same bytes with the same
   *   grant were already published under that name: a free re-deploy)
   * @throws HttpError 400 (not a harness; compile failure), 403 (sha256 differs from the declaration),
   *   507 (the workers cannot make an instance of it: no memory left for one)
   *   or (a new image while the store holds --max-images others), 503 (a store fault: the disk is
   *   full, the shared store away; nothing was acknowledged)
   */
  deploy(
    name: string,
    bytes: Uint8Array,
    opts: { recordedAt?: number } = {},
  ): Promise<{ deployment: Deployment; changed: boolean }> {
    return this.serial(name, () => this.deployNow(name, bytes, opts));
  }

  /**
   * Bring `name` in line with the store's record as it is now, for a change another daemon made
   * to a shared store (announced, or found by a comparison after the listener was down): a
   * record this daemon does not serve with its digest is deployed from the record's bytes without
   * writing it again; with no record, whatever this daemon holds under the name goes, without
   * writing. The record is read in the name's turn, after every deploy and undeploy of the name
   * before it: a deploy acknowledged here whose record postdates the change (its own announcement
   * still on the way) is never undone by the older change, and one acknowledged undeploy is never
   * undone by an older put.
   * @returns what was done
   * @throws Error when the record holds no image bytes; else as {@link deploy} and
   *   {@link undeploy}
   */
  follow(name: string): Promise<'deployed' | 'removed' | 'unchanged'> {
    return this.serial(name, async () => {
      const rec = this.records.get(name);
      if (rec) {
        if (this.published.get(name)?.digest === rec.sha256) return 'unchanged';
        // a shared store holds every record's bytes (holdsImages)
        if (rec.elf === null) throw new Error(`the store holds no image for ${name}`);
        await this.deployNow(name, rec.elf, { recordedAt: rec.deployedAt });
        return 'deployed';
      }
      if (!this.published.has(name) && !this.stored.has(name)) return 'unchanged';
      await this.undeployNow(name, { recorded: true });
      return 'removed';
    });
  }

  /** {@link deploy} in the name's turn. */
  private async deployNow(
    name: string,
    bytes: Uint8Array,
    opts: { recordedAt?: number },
  ): Promise<{ deployment: Deployment; changed: boolean }> {
    const digest = sha256Hex(bytes);
    const granted = this.grants.grantFor(name, digest);
    const cur = this.published.get(name);
    if (cur && cur.digest === digest && sameGrant(cur.granted, granted)) {
      return { deployment: cur, changed: false };
    }
    const manifest = inspectImage(bytes, this.bounds);
    this.checkImageCap(name, digest);
    // the image is durable before anything serves it (a full disk refuses the deploy here); while
    // this deploy runs, no undeploy or failed deploy of another name deletes the same image
    this.deploying.set(digest, (this.deploying.get(digest) ?? 0) + 1);
    const release = (): void => {
      const n = (this.deploying.get(digest) ?? 1) - 1;
      if (n > 0) this.deploying.set(digest, n);
      else this.deploying.delete(digest);
    };
    let deployedAt: number;
    try {
      try {
        this.images.putImage(bytes);
      } catch (e) {
        release();
        throw storeWriteError('the image could not be stored', e);
      }
      try {
        await this.backend.deploy(name, bytes, granted);
      } catch (e) {
        release();
        this.dropIfUnused(digest);
        if (e instanceof HttpError) throw e;
        // the workers could not make an instance of it (runtime/pool.ts DeployRefused): not a
        // fault of the image, and nothing was published
        if ((e as Error).name === 'DeployRefused')
          throw new HttpError(507, (e as Error).message, { limit: 'max-instance-memory' });
        throw new HttpError(400, `the image does not compile: ${(e as Error).name}: ${(e as Error).message}`);
      }
      const superseded = this.stored.get(name)?.digest;
      deployedAt = opts.recordedAt ?? Date.now();
      try {
        if (opts.recordedAt === undefined) this.putRecord(name, digest, bytes, granted, deployedAt);
        this.setStored(name, { digest, deployedAt });
      } finally {
        release();
      }
      // the record no longer names the old image: its file goes unless another name (or a
      // deploy in progress) uses it. Calls run the compiled module in memory, never the file, so
      // calls of the old image still in flight finish unaffected
      if (superseded !== undefined && superseded !== digest) this.dropIfUnused(superseded);
    } catch (e) {
      if (e instanceof HttpError) throw e;
      // not recorded, so not acknowledged: put back what the runtime served before, and drop
      // the new image unless something else uses it
      this.dropIfUnused(digest);
      if (cur)
        await this.backend
          .deploy(name, this.images.readImage(cur.digest), cur.granted)
          .catch(() => undefined);
      else await this.backend.undeploy(name).catch(() => undefined);
      throw storeWriteError('the deployment could not be recorded', e);
    }
    const deployment: Deployment = { name, digest, manifest, granted, deployedAt };
    this.published.set(name, deployment);
    for (const k of this.validators.keys()) if (k.startsWith(`${name}\0`)) this.validators.delete(k);
    this.emit('changed', name, 'deployed');
    return { deployment, changed: true };
  }

  /**
   * Refuse a deploy of `digest` as `name` that would make the store hold more than maxImages
   * images: the images other names use, and those of deploys in progress, not counting the one
   * this deploy supersedes (it is deleted once the index no longer names it).
   * @throws HttpError 507 naming the limit
   */
  private checkImageCap(name: string, digest: string): void {
    if (!Number.isFinite(this.maxImages)) return;
    if (this.uses.has(digest) || this.deploying.has(digest)) return;
    // the images records use, less the one this deploy supersedes when only `name` uses it, and
    // those of deploys in progress that no record uses yet
    const own = this.stored.get(name)?.digest;
    let kept = this.uses.size - (own !== undefined && this.uses.get(own) === 1 ? 1 : 0);
    for (const d of this.deploying.keys()) if (!this.uses.has(d)) kept++;
    if (kept < this.maxImages) return;
    throw new HttpError(
      507,
      `refused by limit max-images = ${this.maxImages}: the deployment store holds ${kept} images; undeploy a harness (DELETE /harnesses/{name}) or raise --max-images`,
      { limit: 'max-images' },
    );
  }

  /**
   * Undeploy `name`: a published deployment, or one in the store that was not restored at boot (its
   * image damaged, no longer valid): never served, it is removed from the store all the same, else
   * it could only be cleared by editing the store by hand and would be warned about at every start.
   * Its image is deleted once the record is gone, unless another record or a deploy in progress
   * uses it.
   * @param opts.recorded the store no longer holds it (another daemon removed it from a shared
   *   store): it is unpublished without writing
   * @throws HttpError 404 when it is neither published nor stored; the store's error when the
   *   record could not be removed
   */
  undeploy(name: string, opts: { recorded?: boolean } = {}): Promise<void> {
    return this.serial(name, () => this.undeployNow(name, opts));
  }

  /** {@link undeploy} in the name's turn. */
  private async undeployNow(name: string, opts: { recorded?: boolean }): Promise<void> {
    if (!this.published.has(name) && !this.stored.has(name)) this.require(name);
    if (this.published.has(name)) await this.backend.undeploy(name);
    this.published.delete(name);
    const old = this.stored.get(name);
    if (old !== undefined) {
      if (!opts.recorded) this.records.remove(name);
      this.deleteStored(name);
      this.dropIfUnused(old.digest);
    }
    for (const k of this.validators.keys()) if (k.startsWith(`${name}\0`)) this.validators.delete(k);
    this.emit('changed', name, 'removed');
  }

  /**
   * Check a tool call's arguments against the tool's JSON Schema (on the serving thread: ajv, no
   * guest code).
   * @returns the arguments as JSON text to hand to the runtime
   * @throws HttpError 404 unknown harness or tool; 400 when the text is not JSON or violates the
   *   schema (each violation names the property path)
   */
  checkArgs(harness: string, tool: string, args: string | unknown): string {
    const d = this.require(harness);
    const decl = d.manifest.tools.find((t) => t.name === tool);
    if (!decl) {
      const known = d.manifest.tools.map((t) => t.name).join(', ') || 'none';
      throw new HttpError(404, `harness ${harness} has no tool named ${tool} (tools: ${known})`);
    }
    let json: unknown = args;
    let text: string;
    if (typeof args === 'string') {
      text = args.trim() === '' ? '{}' : args;
      try {
        json = JSON.parse(text);
      } catch (e) {
        throw new HttpError(400, `arguments are not valid JSON: ${(e as Error).message}`);
      }
    } else {
      try {
        text = JSON.stringify(args ?? {});
      } catch (e) {
        throw tooDeep(harness, tool, e);
      }
      json = args ?? {};
    }
    // the guest's own limit, checked here: past it the run would fail as an internal error (500)
    const bytes = Buffer.byteLength(text, 'utf8');
    if (bytes > DEFAULT_CALL_LIMITS.maxArgsBytes) {
      throw new HttpError(
        413,
        `arguments of ${bytes} bytes are over the limit of ${DEFAULT_CALL_LIMITS.maxArgsBytes} bytes of a tool call`,
      );
    }
    const key = `${harness}\0${tool}`;
    let v = this.validators.get(key);
    if (!v) {
      try {
        // the harness's own compiler: patterns run on the linear-time engine, so a guest's
        // schema cannot hang this thread (a plain ajv backtracks on ^(a|a)*$ for ever)
        v = Harness.compileSchema(decl);
      } catch (e) {
        throw new HttpError(400, (e as Error).message);
      }
      this.validators.set(key, v);
    }
    let valid: boolean;
    try {
      valid = v(json);
    } catch (e) {
      throw tooDeep(harness, tool, e);
    }
    if (!valid) {
      const why = (v.errors ?? []).map(describeArgError).join('; ');
      throw new HttpError(400, `arguments do not match the parameters of ${harness}.${tool}: ${why}`);
    }
    return text;
  }

  /** Run `fn` after every earlier operation on `name` settled. */
  private serial<T>(name: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(name) ?? Promise.resolve();
    const run = prev.then(fn, fn);
    const tail = run.catch(() => undefined);
    this.locks.set(name, tail);
    void tail.then(() => {
      if (this.locks.get(name) === tail) this.locks.delete(name);
    });
    return run;
  }
}

/**
 * Arguments whose nesting overflowed the host's stack while they were checked (JSON.parse takes
 * any depth; serialising them or a recursive schema recurses): a 400 naming the problem, not a
 * RangeError's "Maximum call stack size exceeded".
 */
function tooDeep(harness: string, tool: string, e: unknown): Error {
  if (!(e instanceof RangeError)) return e as Error;
  return new HttpError(
    400,
    `the arguments of ${harness}.${tool} nest too deeply to check (${e.message}); flatten them`,
  );
}

function sameGrant(a: DeployGrant, b: DeployGrant): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/**
 * The refusal of a deploy whose write failed: 503 (Retry-After; nothing was acknowledged) for a
 * store fault such as a full disk, naming it; else 500.
 */
function storeWriteError(what: string, e: unknown): HttpError {
  const fault = storeFault(e);
  const message = `${what}${fault === null ? '' : ` (${fault})`}: ${(e as Error).message}`;
  return new HttpError(fault === null ? 500 : 503, message);
}
