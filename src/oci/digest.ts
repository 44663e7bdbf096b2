/**
 * Content digests as the OCI image spec writes them (`sha256:` and 64 lowercase hex digits,
 * https://github.com/opencontainers/image-spec/blob/main/descriptor.md#digests). Only sha256 is
 * produced or accepted: it is the one algorithm every registry implements.
 */
import { createHash } from 'node:crypto';
import { OciError } from './errors.js';

/** `sha256:<hex>` of the bytes. */
export function sha256Digest(bytes: Uint8Array): string {
  return 'sha256:' + createHash('sha256').update(bytes).digest('hex');
}

const DIGEST_RE = /^sha256:[a-f0-9]{64}$/;

/** True for a well-formed `sha256:` digest. */
export function isDigest(text: string): boolean {
  return DIGEST_RE.test(text);
}

/**
 * Check that bytes hash to the digest they were fetched by, before anyone uses them.
 * @param what names the object in the error ("layer", "config blob", "manifest")
 * @throws OciError('digest-mismatch') naming both digests
 */
export function verifyDigest(bytes: Uint8Array, want: string, what: string): void {
  const got = sha256Digest(bytes);
  if (got !== want) {
    throw new OciError(
      'digest-mismatch',
      `${what} does not match its digest: the registry advertised ${want} but served bytes hashing to ${got} (refused; the registry's copy is corrupt or was tampered with)`,
    );
  }
}
