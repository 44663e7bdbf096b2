/**
 * The harness registry: which harnesses are deployed, with which grant and module, on this
 * runtime. Deploying compiles in a worker, publishes the module to every worker and persists the
 * deployment in the store's deployments (unless the declaration file is its source).
 */
import { createHash } from 'node:crypto';
import type { Grant } from '../capabilities/types.js';
import { capabilityNames } from '../capabilities/index.js';
import type { Declarations } from '../config/declarations.js';
import { readImage } from '../engine/image.js';
import type { Manifest, ToolDecl } from '../harness/manifest.js';
import { ArmError } from './arming.js';
import { ON_NOTIFY, ON_WAKE, errorOutcome, type Counters, type Outcome } from './outcome.js';
import type { Compiled, WorkerPool } from './pool.js';
import type { RuntimeStore } from '../store/store.js';

/** A harness in the registry. */
export interface DeployedHarness {
  name: string;
  /** lowercase hex sha256 of the ELF */
  sha256: string;
  capabilities: string[];
  grant: Grant;
  manifest: Manifest;
  tools: ToolDecl[];
  /** exports on_wake / on_notify (the export table is the registration) */
  onWake: boolean;
  onNotify: boolean;
  /**
   * how the module was obtained (cache hit, timings); replaced by the optimised tier's once that
   * was swapped in (a module first compiled on the baseline tier)
   */
  compile: Compiled['info'];
  deployedAt: number;
}

/** The deployed harnesses by name; emits 'deploy' and 'undeploy' through `emit`. */
export class HarnessRegistry {
  private readonly byName = new Map<string, DeployedHarness>();

  constructor(
    private readonly pool: WorkerPool,
    private readonly store: RuntimeStore,
    private readonly counters: Counters,
    private readonly emit: (event: string, ...args: unknown[]) => void,
  ) {}

  /**
   * Deploy (or replace) a harness: compile in a worker, check its manifest, publish to every
   * worker, persist the deployment. Re-deploying the same bytes and grant is cheap (disk cache).
   * @param grant granted capability names and their arguments (from the operator, never the harness)
   * @throws ArmError for a bad name or an unknown capability; ElfError / ManifestError /
   *   HarnessError (by name) for a bad image; DeployRefused when the workers cannot make an
   *   instance of it (nothing changed then).
   */
  async deploy(
    name: string,
    elf: Uint8Array,
    grant: { capabilities: string[]; grant?: Grant },
    opts: { persist?: boolean } = {},
  ): Promise<DeployedHarness> {
    if (!/^[A-Za-z0-9_-]+$/.test(name))
      throw new ArmError(
        `harness name ${JSON.stringify(name)} must be letters, digits, '_' or '-' (no dots)`,
      );
    const names = capabilityNames();
    for (const c of grant.capabilities) {
      if (!names.includes(c))
        throw new ArmError(`unknown capability ${JSON.stringify(c)}; use one of ${names.join(', ')}`);
    }
    readImage(elf); // a malformed image is refused here, before a worker is bothered
    const compiled = await this.pool.compile(elf);
    if (compiled.info.cached) this.counters.cached++;
    else this.counters.translated++;
    const capabilities = [...new Set(grant.capabilities)].sort();
    const g = grant.grant ?? {};
    await this.pool.deploy(name, elf, compiled, capabilities, g);
    const d: DeployedHarness = {
      name,
      sha256: createHash('sha256').update(elf).digest('hex'),
      capabilities,
      grant: g,
      manifest: compiled.manifest,
      tools: compiled.manifest.tools,
      onWake: compiled.exports.includes(ON_WAKE),
      onNotify: compiled.exports.includes(ON_NOTIFY),
      compile: compiled.info,
      deployedAt: Date.now(),
    };
    this.byName.set(name, d);
    if (opts.persist ?? true) {
      this.store.deployments.put({
        name,
        sha256: d.sha256,
        elf,
        capabilities,
        grant: g as Record<string, unknown>,
        deployedAt: d.deployedAt,
      });
    }
    this.emit('deploy', d);
    return d;
  }

  /**
   * Remove a harness; its pending wakes stay in the due-set (they fail if it never returns). With
   * `persist` false its record in the store is left alone (the caller keeps the records, as bermd).
   */
  undeploy(name: string, opts: { persist?: boolean } = {}): boolean {
    const had = this.byName.delete(name);
    this.pool.undeploy(name);
    if (opts.persist ?? true) this.store.deployments.remove(name);
    if (had) this.emit('undeploy', name);
    return had;
  }

  /**
   * Deploy every accepted harness of a declaration file with exactly its grant (not persisted as
   * deployments: the file is their source). Refused entries are skipped (they are in decls.errors).
   * @throws what {@link deploy} throws for the first harness that cannot be deployed.
   */
  async loadDeclarations(decls: Declarations): Promise<DeployedHarness[]> {
    const out: DeployedHarness[] = [];
    for (const d of decls.harnesses) {
      if (!d.elf) throw new ArmError(`harness ${d.name}: the declaration was parsed without reading its ELF`);
      out.push(
        await this.deploy(
          d.name,
          d.elf,
          { capabilities: d.capabilities, grant: d.grant },
          { persist: false },
        ),
      );
    }
    return out;
  }

  /**
   * Re-deploy what the store holds (a daemon's restart). No guest runs. A record without its bytes
   * (a bermd's, whose images are files under its root) is left to that daemon.
   */
  async restoreDeployments(): Promise<DeployedHarness[]> {
    const out: DeployedHarness[] = [];
    for (const d of this.store.deployments.list()) {
      if (d.elf === null) continue;
      out.push(
        await this.deploy(
          d.name,
          d.elf,
          { capabilities: d.capabilities, grant: d.grant as Grant },
          { persist: false },
        ),
      );
    }
    return out;
  }

  /** Every deployed harness, by name. */
  list(): DeployedHarness[] {
    return [...this.byName.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** A deployed harness, or undefined. */
  get(name: string): DeployedHarness | undefined {
    return this.byName.get(name);
  }

  /** The deployed harnesses' names, in deployment order. */
  names(): IterableIterator<string> {
    return this.byName.keys();
  }

  /** How many harnesses are deployed. */
  get size(): number {
    return this.byName.size;
  }

  /** The module `from` was replaced by its optimised tier: what its harnesses' instances now run. */
  optimized(from: string, info: Compiled['info']): void {
    for (const d of this.byName.values()) if (d.compile.key === from) d.compile = info;
  }

  /**
   * The outcome of an invocation of a harness that is not deployed. It names no other harness: the
   * caller may be an agent or a guest that must not learn what else this runtime serves.
   */
  notFound(harness: string): Outcome {
    return errorOutcome('unknown-harness', `no harness named ${harness} is deployed`);
  }
}
