/**
 * The deployment files under the daemon's root: ELF images by content digest and one index from
 * harness name to digest.
 *
 *   <root>/images/<sha256>.elf     the uploaded bytes, written once (temp file, fsync, rename,
 *                                  fsync of the directory), never modified
 *   <root>/deployments.json        {"version":1,"deployments":{"name":{"digest","deployed_at"}}},
 *                                  replaced atomically the same way
 *
 * A deploy is acknowledged only after both are durable, so after a crash (even SIGKILL mid-write)
 * every acknowledged deploy is in the index and its image is complete; a half-written image only
 * ever exists under a temporary name, which {@link DeploymentFiles.open} deletes. Images are
 * verified against their digest when loaded, so a damaged file is never served.
 *
 * An image no name in the index uses is deleted: when a redeploy supersedes it or an undeploy
 * removes it (after the index is durable without it), and at open, for images a crash left
 * between the index write and the deletion (or an older version never deleted).
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** One deployment in the index. */
export interface DeploymentEntry {
  /** lowercase hex sha256 of the ELF bytes */
  digest: string;
  /** ms since the Unix epoch of the deploy that installed this digest under this name */
  deployed_at: number;
}

/** A stored deployment whose image failed verification at start, with the reason. */
export interface DamagedDeployment {
  name: string;
  digest: string;
  problem: string;
}

const INDEX = 'deployments.json';
const TMP_PREFIX = '.tmp-';

/** Lowercase hex sha256 of `bytes`. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** Write `data` to `file` atomically and durably: temp file in the same directory, fsync, rename, fsync dir. */
export function writeFileAtomic(file: string, data: Uint8Array | string): void {
  const dir = path.dirname(file);
  const tmp = path.join(dir, `${TMP_PREFIX}${path.basename(file)}-${randomBytes(6).toString('hex')}`);
  const fd = fs.openSync(tmp, 'wx', 0o600);
  try {
    fs.writeFileSync(fd, data);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  const dfd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(dfd);
  } finally {
    fs.closeSync(dfd);
  }
}

/** Images by digest and the name → digest index, on disk under one root directory. */
export class DeploymentFiles {
  private readonly index = new Map<string, DeploymentEntry>();

  private constructor(readonly root: string) {}

  /**
   * Open (creating if needed) the store under `root`, delete leftover temporary files of
   * interrupted writes, and read the index.
   * @throws Error when the index exists but is not the store's JSON (the message names the file).
   */
  static open(root: string): DeploymentFiles {
    const s = new DeploymentFiles(root);
    fs.mkdirSync(s.imagesDir, { recursive: true, mode: 0o700 });
    for (const dir of [root, s.imagesDir]) {
      for (const n of fs.readdirSync(dir)) if (n.startsWith(TMP_PREFIX)) fs.rmSync(path.join(dir, n));
    }
    const file = path.join(root, INDEX);
    s.readIndex(file);
    const used = new Set([...s.index.values()].map((e) => e.digest));
    for (const n of fs.readdirSync(s.imagesDir)) {
      const m = /^([0-9a-f]{64})\.elf$/.exec(n);
      if (m && !used.has(m[1]!)) {
        fs.rmSync(path.join(s.imagesDir, n), { force: true });
        s.removedAtOpen.push(m[1]!);
      }
    }
    return s;
  }

  /** Digests of the unreferenced images {@link open} deleted (for the boot log). */
  readonly removedAtOpen: string[] = [];

  private readIndex(file: string): void {
    if (fs.existsSync(file)) {
      let doc: { version?: unknown; deployments?: Record<string, DeploymentEntry> };
      try {
        doc = JSON.parse(fs.readFileSync(file, 'utf8')) as typeof doc;
      } catch (e) {
        throw new Error(`${file} is not valid JSON (${(e as Error).message}); restore it or move it away`);
      }
      if (doc.version !== 1 || typeof doc.deployments !== 'object' || doc.deployments === null) {
        throw new Error(`${file} is not a version 1 deployment index; restore it or move it away`);
      }
      for (const [name, e] of Object.entries(doc.deployments)) {
        if (typeof e?.digest === 'string' && /^[0-9a-f]{64}$/.test(e.digest)) {
          this.index.set(name, { digest: e.digest, deployed_at: Number(e.deployed_at) || 0 });
        }
      }
    }
  }

  /** The folder of the images, `<root>/images`. */
  get imagesDir(): string {
    return path.join(this.root, 'images');
  }

  /** Path of the image with `digest`. */
  imagePath(digest: string): string {
    return path.join(this.imagesDir, `${digest}.elf`);
  }

  /** The deployments in the index, by name (sorted). */
  entries(): [string, DeploymentEntry][] {
    return [...this.index.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** The index entry of `name`, or undefined. */
  get(name: string): DeploymentEntry | undefined {
    return this.index.get(name);
  }

  /**
   * Store the image bytes under their digest (no-op when that image is already stored intact).
   * @returns the digest
   */
  putImage(bytes: Uint8Array): string {
    const digest = sha256Hex(bytes);
    const file = this.imagePath(digest);
    if (!this.hasIntactImage(file, digest, bytes.length)) writeFileAtomic(file, bytes);
    return digest;
  }

  private hasIntactImage(file: string, digest: string, size: number): boolean {
    try {
      if (fs.statSync(file).size !== size) return false;
      return sha256Hex(fs.readFileSync(file)) === digest;
    } catch {
      return false;
    }
  }

  /**
   * Read and verify a stored image.
   * @throws Error naming the file when it is missing or its bytes do not hash to `digest`.
   */
  readImage(digest: string): Uint8Array {
    const file = this.imagePath(digest);
    const bytes = fs.readFileSync(file);
    const actual = sha256Hex(bytes);
    if (actual !== digest)
      throw new Error(`${file} hashes to ${actual}, not ${digest}: the image is damaged`);
    return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length);
  }

  /** Record `name` → `digest` durably (the image must already be stored). */
  setDeployment(name: string, digest: string, now = Date.now()): DeploymentEntry {
    const entry = { digest, deployed_at: now };
    const next = new Map(this.index);
    next.set(name, entry);
    this.writeIndex(next);
    this.index.set(name, entry);
    return entry;
  }

  /**
   * Remove `name` from the index durably, and its image when no other name uses it and `busy`
   * does not claim it.
   * @returns false when `name` was not deployed
   */
  removeDeployment(name: string, busy: (digest: string) => boolean = () => false): boolean {
    const old = this.index.get(name);
    if (!old) return false;
    const next = new Map(this.index);
    next.delete(name);
    this.writeIndex(next);
    this.index.delete(name);
    this.dropIfUnused(old.digest, busy);
    return true;
  }

  /**
   * Delete the image with `digest` when no deployment uses it and `busy(digest)` is false (a deploy
   * of the same bytes under another name is in progress).
   */
  dropIfUnused(digest: string, busy: (digest: string) => boolean = () => false): void {
    if (!busy(digest) && ![...this.index.values()].some((e) => e.digest === digest)) {
      fs.rmSync(this.imagePath(digest), { force: true });
    }
  }

  private writeIndex(index: Map<string, DeploymentEntry>): void {
    const doc = { version: 1, deployments: Object.fromEntries([...index.entries()].sort()) };
    writeFileAtomic(path.join(this.root, INDEX), JSON.stringify(doc, null, 1) + '\n');
  }
}
