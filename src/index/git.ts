/**
 * The real `git` binary, for the two places an index is a git repository: a service whose
 * directory is a work tree commits each publish (author = publisher), and a client keeps a shallow
 * clone of a `.git` URL in berm's cache directory.
 */
import { execFile } from 'node:child_process';

/** A git command that failed: its arguments and what it printed. */
export class GitError extends Error {
  override name = 'GitError';
}

/**
 * Run `git args...` in `cwd`.
 * @returns stdout
 * @throws GitError with git's stderr when it exits non-zero or cannot be started
 */
export function git(cwd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      'git',
      args,
      { cwd, env: { ...env, GIT_TERMINAL_PROMPT: '0' }, maxBuffer: 16 << 20, timeout: 300_000 },
      (err, stdout, stderr) => {
        if (err) {
          const why = (stderr || err.message).trim().split('\n').slice(-3).join('; ');
          reject(new GitError(`git ${args[0]} failed: ${why}`));
        } else resolve(stdout);
      },
    );
  });
}

/** Whether `dir` is the top of a git work tree (has its own `.git`). */
export async function isWorkTree(dir: string): Promise<boolean> {
  try {
    const top = (await git(dir, ['rev-parse', '--show-toplevel'])).trim();
    const { realpathSync } = await import('node:fs');
    return realpathSync(top) === realpathSync(dir);
  } catch {
    return false;
  }
}

/** A name git accepts as an author name (no angle brackets or newlines). */
function authorName(s: string): string {
  return s.replace(/[<>\n\r]/g, '').trim() || 'anonymous';
}

/**
 * Commit `files` (paths relative to `dir`) as one commit by `author`.
 * @throws GitError when git refuses
 */
export async function commitFiles(
  dir: string,
  files: string[],
  message: string,
  author: string,
): Promise<void> {
  const name = authorName(author);
  await git(dir, ['add', '--', ...files]);
  await git(dir, [
    '-c',
    'user.name=berm-indexd',
    '-c',
    'user.email=berm-indexd@localhost',
    '-c',
    'commit.gpgsign=false',
    'commit',
    '--quiet',
    '--no-verify',
    '--author',
    `${name} <${name.replace(/\s+/g, '.')}@berm-index>`,
    '-m',
    message,
    '--',
    ...files,
  ]);
}
