/**
 * Grants of the daemon: the operator's declaration file (`--config`, src/config/declarations.ts)
 * is the only source of capabilities. A harness deployed under a declared name gets exactly the
 * declared capabilities, and only when its bytes hash to the declared sha256; an undeclared name
 * gets none. What a harness's manifest asks for is never granted.
 *
 * The daemon receives images over the API, so a declaration's `source` path is not read here; the
 * sha256 is what binds a grant to bytes. A harness named by reference (`source = "oci:..."`) must
 * be installed (`berm install --config FILE` puts it in the data directory's store): one that is
 * not refuses the boot, since bermd never downloads; one that is gets deployed at boot. The file is read once, when the daemon boots: an edit
 * (a new sha256, another grant) takes effect at the next start, and the 403 says so.
 */
import * as fs from 'node:fs';
import { loadDeclarations, type HarnessDeclaration } from '../config/declarations.js';
import type { DeployGrant } from './backend.js';
import { HttpError } from './http.js';

/** A declaration file that stops the daemon from booting: every problem with its fix. */
export class GrantsError extends Error {
  override name = 'GrantsError';
}

/** The declared grants by harness name. */
export class Grants {
  private constructor(
    /** the declaration file, or null when the daemon runs without one */
    readonly file: string | null,
    private readonly byName: ReadonlyMap<string, HarnessDeclaration>,
  ) {}

  /** No declaration file: every harness runs without capabilities. */
  static none(): Grants {
    return new Grants(null, new Map());
  }

  /**
   * Load a declaration file.
   * @throws GrantsError listing every refused entry (file:line, problem, fix) and every fs/exec
   *   root that is not an existing directory (with the `mkdir -p` that fixes it); DeclarationError
   *   when the file cannot be read or parsed.
   */
  static load(file: string): Grants {
    const decls = loadDeclarations(file, { checkFiles: false });
    const problems = decls.errors.map((e) => e.message);
    for (const d of decls.harnesses) {
      if (d.reference !== undefined && !fs.existsSync(d.source)) {
        problems.push(
          `${d.file}:${d.line}: harness ${JSON.stringify(d.name)} (${d.reference}, sha256 ${d.sha256}): not installed: run berm install --config ${file}`,
        );
      }
      const root = d.grant.root;
      if (root !== undefined && !isDirectory(root)) {
        problems.push(
          `${d.file}:${d.line}: harness ${JSON.stringify(d.name)}: ${d.capabilities
            .filter((c) => c === 'fs' || c === 'exec')
            .join('/')} root ${root} is not an existing directory; fix: mkdir -p ${root} (or correct root)`,
        );
      }
    }
    if (problems.length > 0) {
      throw new GrantsError(`the declaration file ${file} refuses the boot:\n  ${problems.join('\n  ')}`);
    }
    return new Grants(file, new Map(decls.harnesses.map((d) => [d.name, d])));
  }

  /** The declaration of `name`, or undefined. */
  declaration(name: string): HarnessDeclaration | undefined {
    return this.byName.get(name);
  }

  /** Declarations naming their harness by reference (`source = "oci:..."`), in file order. */
  installed(): HarnessDeclaration[] {
    return [...this.byName.values()].filter((d) => d.reference !== undefined);
  }

  /** Declared names, in file order. */
  names(): string[] {
    return [...this.byName.keys()];
  }

  /**
   * The grant for deploying bytes with `digest` as `name`.
   * @throws HttpError 403 when `name` is declared with another sha256 (naming both digests and the
   *   fix: the file is read once, at boot, so an edit needs a restart; the declaration's file and
   *   line go to the log only).
   */
  grantFor(name: string, digest: string): DeployGrant {
    const d = this.byName.get(name);
    if (!d) return { capabilities: [], grant: {} };
    if (d.sha256 !== digest) {
      // the reply names no path of the operator's machine; the log (the operator's) does
      throw new HttpError(
        403,
        `the image hashes to sha256 ${digest} but the operator's declaration file declared ${JSON.stringify(name)} with sha256 ${d.sha256} when bermd started; ` +
          `deploy the declared image, or have the operator set sha256 = "${digest}" there and restart bermd ` +
          '(it reads the declaration file only at boot)',
        {},
        `declared at ${d.file}:${d.line}`,
      );
    }
    return { capabilities: [...d.capabilities], grant: { ...d.grant } };
  }
}

function isDirectory(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}
