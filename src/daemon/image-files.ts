/**
 * The deployment images under the daemon's root, by content digest:
 *
 *   <root>/images/<sha256>.elf     the uploaded bytes, written once (temp file, fsync, rename,
 *                                  fsync of the directory), never modified
 *
 * Which name serves which image is recorded in the runtime's store (src/store/store.ts
 * DeploymentStore), not here: a deploy is acknowledged once its image file is durable and its
 * record committed, so after a crash (even SIGKILL mid-write) every acknowledged deploy has its
 * record and a whole image; a half-written image only ever exists under a temporary name, which
 * {@link ImageFiles.open} deletes. Images are verified against their digest when loaded, so a
 * damaged file is never served. An image no record uses is deleted (./deployments.ts says when).
 *
 * Earlier versions kept the records here too, as `<root>/deployments.json` (the whole index
 * rewritten on every deploy); {@link readLegacyIndex} and {@link retireLegacyIndex} move such a
 * root over to the store.
 */
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** A name's image and when it was deployed, as the legacy index held it. */
export interface LegacyEntry {
  /** lowercase hex sha256 of the ELF bytes */
  digest: string;
  /** ms since the Unix epoch of the deploy that installed this digest under this name */
  deployed_at: number;
}

/** The index file of earlier versions, under the images' root. */
export const LEGACY_INDEX = 'deployments.json';
const TMP_PREFIX = '.tmp-';

/** Lowercase hex sha256 of `bytes`. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** fsync the directory `dir` (a rename or unlink in it is then durable). */
function syncDir(dir: string): void {
  const dfd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(dfd);
  } finally {
    fs.closeSync(dfd);
  }
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
  syncDir(dir);
}

/**
 * The entries of the legacy index `<root>/deployments.json`, or null when there is none.
 * @throws Error naming the file when it exists but is not that index's JSON
 */
export function readLegacyIndex(root: string): Map<string, LegacyEntry> | null {
  const file = path.join(root, LEGACY_INDEX);
  if (!fs.existsSync(file)) return null;
  let doc: { version?: unknown; deployments?: Record<string, LegacyEntry> };
  try {
    doc = JSON.parse(fs.readFileSync(file, 'utf8')) as typeof doc;
  } catch (e) {
    throw new Error(`${file} is not valid JSON (${(e as Error).message}); restore it or move it away`);
  }
  if (doc.version !== 1 || typeof doc.deployments !== 'object' || doc.deployments === null) {
    throw new Error(`${file} is not a version 1 deployment index; restore it or move it away`);
  }
  const out = new Map<string, LegacyEntry>();
  for (const [name, e] of Object.entries(doc.deployments)) {
    if (typeof e?.digest === 'string' && /^[0-9a-f]{64}$/.test(e.digest)) {
      out.set(name, { digest: e.digest, deployed_at: Number(e.deployed_at) || 0 });
    }
  }
  return out;
}

/** Delete the legacy index durably (its entries are in the store by then). */
export function retireLegacyIndex(root: string): void {
  removeDurably(path.join(root, LEGACY_INDEX));
}

/** Delete `file` (a no-op when it is absent) and fsync its directory, so the deletion is durable. */
export function removeDurably(file: string): void {
  fs.rmSync(file, { force: true });
  syncDir(path.dirname(file));
}

/** Images by digest, on disk under one root directory. */
export class ImageFiles {
  private constructor(readonly root: string) {}

  /**
   * Open (creating if needed) the images under `root` and delete leftover temporary files of
   * interrupted writes.
   */
  static open(root: string): ImageFiles {
    const s = new ImageFiles(root);
    fs.mkdirSync(s.imagesDir, { recursive: true, mode: 0o700 });
    for (const dir of [root, s.imagesDir]) {
      for (const n of fs.readdirSync(dir)) if (n.startsWith(TMP_PREFIX)) fs.rmSync(path.join(dir, n));
    }
    return s;
  }

  /** The folder of the images, `<root>/images`. */
  get imagesDir(): string {
    return path.join(this.root, 'images');
  }

  /** Path of the image with `digest`. */
  imagePath(digest: string): string {
    return path.join(this.imagesDir, `${digest}.elf`);
  }

  /**
   * Delete every stored image whose digest `used` does not hold (a crash between a record's
   * change and the deletion, or an older version that never deleted).
   * @returns the digests deleted
   */
  removeUnused(used: ReadonlySet<string>): string[] {
    const removed: string[] = [];
    for (const n of fs.readdirSync(this.imagesDir)) {
      const m = /^([0-9a-f]{64})\.elf$/.exec(n);
      if (m && !used.has(m[1]!)) {
        fs.rmSync(path.join(this.imagesDir, n), { force: true });
        removed.push(m[1]!);
      }
    }
    return removed;
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

  /** Delete the image with `digest` (a no-op when it is not stored). */
  remove(digest: string): void {
    fs.rmSync(this.imagePath(digest), { force: true });
  }
}
