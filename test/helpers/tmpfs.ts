// A small tmpfs the test mounts, for disk-full (ENOSPC) faults: a real file system that runs out of
// space, filled and freed on demand. Mounting needs root (CI's .ci/run runs as root); elsewhere the
// test is skipped with the reason, and under CI=true it fails instead (CI must run it).
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';

/** A mounted tmpfs of a fixed size. */
export interface SmallDisk {
  /** the mount point */
  dir: string;
  /** fill every free byte with a filler file (`fill` under the mount); @returns bytes written */
  fill(): number;
  /** delete the filler: the space is back */
  free(): void;
}

/** Why a tmpfs cannot be mounted here, or null when it can. */
function cannotMount(): string | null {
  if (process.getuid?.() !== 0) return 'mounting a tmpfs needs root (run as root, as CI does)';
  const probe = mkdtempSync(join(tmpdir(), 'berm-tmpfs-probe-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', probe], { stdio: 'pipe' });
    execFileSync('umount', [probe], { stdio: 'pipe' });
    return null;
  } catch (e) {
    return `mount -t tmpfs failed: ${(e as Error).message.split('\n')[0]}`;
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

/**
 * Mount a tmpfs of `bytes` on a fresh directory for `t`, unmounted at its teardown (lazily, after
 * the daemons on it were stopped by earlier teardowns).
 * @returns the disk, or null when none can be mounted (the test was skipped, or failed in CI)
 */
export function smallDisk(t: Test, bytes: number): SmallDisk | null {
  const why = cannotMount();
  if (why !== null) {
    if (process.env.CI === 'true') t.fail(`${why} (CI=true: the disk-full test must run)`);
    else void t.skip(why, () => {});
    return null;
  }
  const dir = mkdtempSync(join(tmpdir(), 'berm-full-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes},mode=0700`, 'tmpfs', dir]);
  const filler = join(dir, 'fill');
  t.teardown(() => {
    execFileSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    dir,
    fill() {
      const fd = openSync(filler, 'a');
      let n = 0;
      try {
        // large writes first, then smaller ones down to a byte: every free byte is taken
        for (const size of [1 << 20, 1 << 16, 1 << 12, 1 << 8, 1]) {
          const chunk = Buffer.alloc(size, 0x78);
          for (;;) {
            try {
              const w = writeSync(fd, chunk);
              n += w;
              if (w < size) break;
            } catch (e) {
              if ((e as NodeJS.ErrnoException).code === 'ENOSPC') break;
              throw e;
            }
          }
        }
      } finally {
        closeSync(fd);
      }
      return n;
    },
    free() {
      rmSync(filler, { force: true });
    },
  };
}
