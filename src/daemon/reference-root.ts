/**
 * Upstream's state root, read by bermd: upstream's daemon keeps each deployed harness as
 * `<root>/harnesses/<name>.elf` (and its engine's code cache under `<root>/cache/`). A bermd
 * started with `--root` on such a directory imports those images into its own deployments (image
 * files under `<root>/deployments/`, beside them; records in the runtime's store) before it restores, so moving from one daemon to the other
 * loses no deployment. Upstream's files are only ever read: never moved, rewritten or deleted.
 *
 * Each import is recorded in the runtime's store (src/store/store.ts DeploymentStore
 * referenceImports, name -> sha256): an image already imported with the same bytes is not
 * imported again, so a harness undeployed from bermd stays undeployed across restarts while its
 * upstream file stays in place; a file whose bytes changed since (upstream deployed it again) is
 * imported again. Earlier versions kept that record as `<root>/deployments/reference-imports.json`
 * (`{"version":1,"imported":{"<name>":"<sha256 hex>"}}`); {@link readLegacyImports} and
 * {@link retireLegacyImports} move it into the store.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { HARNESS_NAME } from './http.js';
import { removeDurably, sha256Hex } from './image-files.js';

/** Upstream's image directory under a state root. */
export const REFERENCE_IMAGES_DIR = 'harnesses';
/** The record of imported upstream images of earlier versions, under `<root>/deployments`. */
export const REFERENCE_IMPORTS_FILE = 'reference-imports.json';

/** Where {@link importReferenceRoot} imports to (src/daemon/deployments.ts Deployments has it). */
export interface ImportTarget {
  /** the digest the store records for `name`, or undefined */
  storedDigest(name: string): string | undefined;
  /** store `bytes` and record them as `name`'s deployment (durably; not published yet) */
  importImage(name: string, bytes: Uint8Array): void;
  /** the store's record of imports: name -> sha256 of the bytes imported */
  referenceImports(): Map<string, string>;
  /** add `imported` (name -> sha256) to the store's record of imports, durably */
  recordReferenceImports(imported: ReadonlyMap<string, string>): void;
}

/** What {@link importReferenceRoot} did. */
export interface ReferenceImport {
  /** names imported into the deployment store now */
  imported: string[];
  /** files skipped, each with the reason (a name that breaks the rule, too large, unreadable) */
  skipped: string[];
}

/**
 * The record of imports an earlier version kept in `<dir>/reference-imports.json` (`dir` is
 * `<root>/deployments`), or null when there is none. Entries whose digest is not sha256 hex are
 * left out (their image is imported again, which changes nothing when the bytes are the same).
 * @throws Error naming the file when it exists but is not that record's JSON
 */
export function readLegacyImports(dir: string): Map<string, string> | null {
  const file = path.join(dir, REFERENCE_IMPORTS_FILE);
  if (!fs.existsSync(file)) return null;
  let doc: { version?: unknown; imported?: unknown };
  try {
    doc = JSON.parse(fs.readFileSync(file, 'utf8')) as typeof doc;
  } catch (e) {
    throw new Error(`${file} is not valid JSON (${(e as Error).message}); restore it or move it away`);
  }
  if (
    doc.version !== 1 ||
    typeof doc.imported !== 'object' ||
    doc.imported === null ||
    Array.isArray(doc.imported)
  )
    throw new Error(`${file} is not a version 1 record of upstream imports; restore it or move it away`);
  const out = new Map<string, string>();
  for (const [name, digest] of Object.entries(doc.imported as Record<string, unknown>))
    if (typeof digest === 'string' && /^[0-9a-f]{64}$/.test(digest)) out.set(name, digest);
  return out;
}

/** Delete the legacy record of imports under `dir` durably (its entries are in the store by then). */
export function retireLegacyImports(dir: string): void {
  removeDurably(path.join(dir, REFERENCE_IMPORTS_FILE));
}

/**
 * Import upstream's `<root>/harnesses/<name>.elf` images into `store`: each regular file whose
 * name is a valid harness name and whose bytes were not imported before is stored by digest and
 * deployed under that name (replacing what bermd had under it: upstream's file is the newer
 * deploy). A file over `maxImageBytes`, a link, a directory or a bad name is skipped and reported.
 * @returns what was imported and skipped (nothing when `<root>/harnesses` does not exist)
 * @throws Error only when the store cannot be read or written (the caller reports it)
 */
export function importReferenceRoot(
  root: string,
  store: ImportTarget,
  maxImageBytes: number,
): ReferenceImport {
  const out: ReferenceImport = { imported: [], skipped: [] };
  const dir = path.join(root, REFERENCE_IMAGES_DIR);
  let names: string[];
  try {
    if (!fs.lstatSync(dir).isDirectory()) return out;
    names = fs.readdirSync(dir).sort();
  } catch {
    return out;
  }
  const record = store.referenceImports();
  const recorded = new Map<string, string>();
  for (const file of names) {
    if (!file.endsWith('.elf')) continue;
    const name = file.slice(0, -'.elf'.length);
    const full = path.join(dir, file);
    if (!HARNESS_NAME.test(name)) {
      out.skipped.push(
        `${full}: '${name}' is not a harness name bermd serves (1 to 64 of a-z, 0-9, _ and -)`,
      );
      continue;
    }
    let bytes: Buffer;
    try {
      const st = fs.lstatSync(full);
      if (!st.isFile()) {
        out.skipped.push(`${full}: not a regular file`);
        continue;
      }
      if (st.size > maxImageBytes) {
        out.skipped.push(`${full}: ${st.size} bytes, over --max-image-bytes ${maxImageBytes}`);
        continue;
      }
      bytes = fs.readFileSync(full);
    } catch (e) {
      out.skipped.push(`${full}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
      continue;
    }
    const digest = sha256Hex(bytes);
    if (record.get(name) === digest) continue;
    if (store.storedDigest(name) !== digest) {
      store.importImage(name, new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.length));
      out.imported.push(name);
    }
    recorded.set(name, digest);
  }
  store.recordReferenceImports(recorded);
  return out;
}
