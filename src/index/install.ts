/**
 * Installing a published harness: fetch and verify (shared by `berm install` and bermd's
 * `POST /index/install`), store the ELF content-addressed, and write the operator's declaration
 * entry pinned by sha256 with no capabilities granted.
 *
 * Verification, in order: the reference parses; the registry serves a berm artifact whose every
 * blob hashes to its digest (the layer's digest is sha256 of the ELF); the ELF's own `.berm.abi`
 * section is byte for byte the config blob; the manifest is valid; and, when the index lists this
 * exact reference, the layer digest is the one the index published last for it (a registry whose
 * tag now serves other bytes than were published is refused).
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { ElfError } from '../elf/reader.js';
import { readImage, WasmImageError } from '../engine/image.js';
import { ManifestError, parseManifest, type Manifest } from '../harness/manifest.js';
import {
  formatReference,
  OciError,
  parseReference,
  pullHarness,
  type RegistryOptions,
} from '../oci/index.js';
import { defaultDataDir, OCI_SOURCE_PREFIX, storedHarnessPath } from '../util/data-dir.js';
import { ensureDirectory } from '../util/dirs.js';

export { defaultDataDir, storedHarnessPath };
import { IndexError, publishedDigest, type IndexSource } from './source.js';

/** Why an install was refused: `status` is bermd's HTTP answer, the CLI exits 2. */
export class InstallError extends Error {
  override name = 'InstallError';
  /**
   * @param status 400 malformed reference or name, 409 name taken, 422 not a berm harness, a
   *   tampered blob or a digest other than the index published, 502 registry or index unreachable
   */
  constructor(
    readonly status: 400 | 409 | 422 | 502,
    message: string,
  ) {
    super(message);
  }
}

/** A pulled and verified harness. */
export interface VerifiedHarness {
  /** the reference as pulled */
  reference: string;
  elf: Uint8Array;
  /** `sha256:<hex>` of the ELF (the layer digest) */
  digest: string;
  manifestDigest: string;
  manifest: Manifest;
  /** the digest the index published for this reference, when it lists it */
  published?: string;
}

function ociStatus(e: OciError): 400 | 422 | 502 {
  if (e.kind === 'reference') return 400;
  if (e.kind === 'unreachable' || e.kind === 'registry') return 502;
  return 422;
}

/**
 * Pull `referenceText` and verify it (see the module comment).
 * @param index the index to check the digest against, or null to skip that check
 * @throws InstallError naming what failed; nothing is written by this function
 */
export async function fetchVerified(
  referenceText: string,
  index: IndexSource | null,
  opts: RegistryOptions = {},
): Promise<VerifiedHarness> {
  let reference: string;
  try {
    reference = formatReference(parseReference(referenceText));
  } catch (e) {
    if (e instanceof OciError) throw new InstallError(400, e.message);
    throw e;
  }
  let published: string | undefined;
  if (index !== null) {
    try {
      published = await publishedDigest(index, reference);
    } catch (e) {
      if (e instanceof IndexError)
        throw new InstallError(502, `cannot check ${reference} against the index: ${e.message}`);
      throw e;
    }
  }
  let pulled;
  try {
    pulled = await pullHarness(parseReference(reference), opts);
  } catch (e) {
    if (e instanceof OciError) throw new InstallError(ociStatus(e), e.message);
    throw e;
  }
  let manifest: Manifest;
  try {
    const own = readImage(pulled.elf).manifest;
    if (own === null || Buffer.compare(Buffer.from(own), Buffer.from(pulled.abi)) !== 0) {
      throw new InstallError(
        422,
        `${reference}: the artifact's config blob is not the ELF's own .berm.abi section (refused: the artifact was not built by berm push, or was altered)`,
      );
    }
    manifest = parseManifest(own);
  } catch (e) {
    if (e instanceof ElfError || e instanceof WasmImageError || e instanceof ManifestError)
      throw new InstallError(422, `${reference}: not a berm harness: ${e.message}`);
    throw e;
  }
  if (published !== undefined && published !== pulled.digest) {
    throw new InstallError(
      422,
      `${reference}: the registry serves ${pulled.digest} but the index published ${published} for this reference; refused (the tag was re-pushed without publishing, or the registry serves other bytes)`,
    );
  }
  return {
    reference,
    elf: pulled.elf,
    digest: pulled.digest,
    manifestDigest: pulled.manifestDigest,
    manifest,
    ...(published !== undefined ? { published } : {}),
  };
}

/**
 * Store `elf` content-addressed under `dataDir` (atomically: a temporary file, fsync, rename).
 * @returns the stored file's absolute path
 */
export function storeHarness(dataDir: string, digest: string, elf: Uint8Array): string {
  const hex = digest.replace(/^sha256:/, '');
  const file = storedHarnessPath(dataDir, hex);
  if (fs.existsSync(file)) return file;
  ensureDirectory(path.dirname(file));
  const tmp = `${file}.${randomBytes(6).toString('hex')}.tmp`;
  try {
    const fd = fs.openSync(tmp, 'wx', 0o644);
    try {
      fs.writeSync(fd, elf);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(tmp, file);
  } catch (e) {
    fs.rmSync(tmp, { force: true });
    throw e;
  }
  return file;
}

/** The harness name `berm install` picks: the repository's last component, cut to bermd's name rule. */
export function defaultHarnessName(reference: string): string {
  const repo = parseReference(reference).repository;
  const last = repo.slice(repo.lastIndexOf('/') + 1).toLowerCase();
  const name = last.replace(/[^a-z0-9_-]+/g, '-').slice(0, 64);
  return name === '' ? 'harness' : name;
}

/** What the manifest asks to be granted: hosts it dials and harnesses it calls (ABI 1 `deps`). */
export function requestedGrants(m: Manifest): { hosts: string[]; callees: string[] } {
  const hosts = m.deps.filter((d) => d.includes('.') || d.includes(':'));
  const callees = m.deps.filter((d) => !hosts.includes(d));
  return { hosts, callees };
}

/** A TOML basic string. */
function tomlString(s: string): string {
  return JSON.stringify(s);
}

/**
 * Append a `[[harnesses]]` entry for `name` to the declaration file `config` (creating it): source
 * `oci:<reference>`, pinned by `hex`, no capabilities; the ELF is found in the data directory's
 * store by that sha256.
 * @returns false when an entry of that name already names the same sha256 (nothing written)
 * @throws InstallError 409 when `name` is declared with another sha256, 400 for a file that is not
 *   TOML (nothing written)
 */
export function declareInstalled(config: string, name: string, hex: string, reference: string): boolean {
  let text = '';
  if (fs.existsSync(config)) {
    text = fs.readFileSync(config, 'utf8');
    let doc: Record<string, unknown>;
    try {
      doc = parseToml(text) as Record<string, unknown>;
    } catch (e) {
      throw new InstallError(
        400,
        `${config} is not valid TOML (${(e as Error).message.split('\n')[0]}); nothing written`,
      );
    }
    const list = Array.isArray(doc.harnesses) ? (doc.harnesses as Record<string, unknown>[]) : [];
    const same = list.find((h) => h.name === name);
    if (same !== undefined) {
      if (same.sha256 === hex) return false;
      throw new InstallError(
        409,
        `${config} already declares a harness named ${name} (sha256 ${String(same.sha256)}): choose another --name, or remove that entry first`,
      );
    }
  }
  const block = [
    `# installed from ${reference} by berm install; grants nothing until you add capabilities`,
    '[[harnesses]]',
    `name = ${tomlString(name)}`,
    `source = ${tomlString(OCI_SOURCE_PREFIX + reference)}`,
    `sha256 = ${tomlString(hex)}`,
    'capabilities = []',
    '',
  ].join('\n');
  const sep = text === '' || text.endsWith('\n\n') ? '' : text.endsWith('\n') ? '\n' : '\n\n';
  ensureDirectory(path.dirname(path.resolve(config)));
  const tmp = `${config}.${randomBytes(6).toString('hex')}.tmp`;
  fs.writeFileSync(tmp, text + sep + block, { mode: 0o644 });
  fs.renameSync(tmp, config);
  return true;
}
