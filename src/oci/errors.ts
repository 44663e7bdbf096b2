/**
 * The one error type of the OCI client. `kind` says what went wrong so that a caller (the CLI)
 * can choose an exit code and tests can assert the reason without matching message text.
 */

/** What an {@link OciError} is about. */
export type OciErrorKind =
  /** the reference text is malformed (host, repository, tag or digest) */
  | 'reference'
  /** the registry or token endpoint could not be reached (connection refused, DNS, timeout) */
  | 'unreachable'
  /** the registry refused our credentials or wants credentials we do not have */
  | 'unauthorized'
  /** the manifest or blob does not exist */
  | 'not-found'
  /** a blob or manifest does not hash to the digest it is addressed by */
  | 'digest-mismatch'
  /** the manifest is not a berm harness artifact (an image index, a container image, ...) */
  | 'not-a-harness'
  /** the registry answered with an error status or a malformed answer */
  | 'registry'
  /** a response exceeded a size bound */
  | 'too-large';

/** An error of the registry client; the message is meant for a person and names the fix if any. */
export class OciError extends Error {
  override name = 'OciError';
  constructor(
    readonly kind: OciErrorKind,
    message: string,
  ) {
    super(message);
  }
}
