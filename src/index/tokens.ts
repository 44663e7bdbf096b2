/**
 * Publisher identity for `berm-indexd --tokens FILE`: each non-blank line not starting with `#` is
 *
 *   <sha256 hex of the token> <publisher name> [operator]
 *
 * so the file holds no token itself (`printf %s "$TOKEN" | sha256sum` gives the hash). A request's
 * `Authorization: Bearer <token>` is hashed and looked up; `operator` marks who may take entries
 * down. Comparison is by hash (a map lookup over SHA-256 digests leaks nothing useful about a
 * token's bytes through timing).
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';

/** Who a token belongs to. */
export interface Publisher {
  name: string;
  operator: boolean;
}

/** The lowercase hex SHA-256 of a token as the tokens file lists it. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * Read a tokens file.
 * @throws Error naming the file and line of a malformed line, or why the file cannot be read
 */
export function loadTokens(file: string): Map<string, Publisher> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`cannot read the tokens file ${file} (${(e as NodeJS.ErrnoException).code ?? e})`);
  }
  const out = new Map<string, Publisher>();
  text.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    const [hash, name, role, ...rest] = line.split(/\s+/);
    if (
      !/^[0-9a-f]{64}$/.test(hash ?? '') ||
      !name ||
      rest.length > 0 ||
      (role !== undefined && role !== 'operator')
    ) {
      throw new Error(
        `${file}:${i + 1}: expected "<sha256 hex of the token> <publisher> [operator]" (the hash in lowercase hex)`,
      );
    }
    out.set(hash!, { name, operator: role === 'operator' });
  });
  return out;
}

/** The publisher an `Authorization` header names, `null` when absent, `undefined` when unknown. */
export function publisherOf(
  authorization: string | undefined,
  tokens: Map<string, Publisher>,
): Publisher | null | undefined {
  if (authorization === undefined) return null;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!m) return undefined;
  return tokens.get(tokenHash(m[1]!));
}
