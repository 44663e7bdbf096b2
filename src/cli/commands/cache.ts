/** `berm cache ls` and `berm cache clear`: the on-disk Wasm cache. */
import type { Command } from 'commander';
import { WasmCache } from '../../cache/cache.js';
import { cacheDirForListing, ExitCode } from '../context.js';
import type { CliContext } from '../program.js';

/** Register `cache ls` and `cache clear`. */
export function registerCache(program: Command, ctx: CliContext): void {
  const cache = program
    .command('cache')
    .description(
      'list or clear the Wasm cache (--cache-dir, else $BERM_CACHE_DIR, else $XDG_CACHE_HOME/berm, else ~/.cache/berm)',
    );
  cache
    .command('ls')
    .description('list cache entries (regular files only), newest first, with the ELF each came from')
    .action((_opts: unknown, cmd: Command) =>
      ctx.run(cmd, () => {
        const g = ctx.globals(cmd);
        const dir = cacheDirForListing(g);
        const entries = new WasmCache(dir).list();
        const total = entries.reduce((n, e) => n + e.bytes, 0);
        if (g.json) {
          const list = entries.map((e) => ({
            key: e.key,
            bytes: e.bytes,
            modified: e.modified.toISOString(),
            ...(e.label ? { source: e.label.source ?? null, elfSha256: e.label.sha256 } : {}),
          }));
          ctx.io.out(JSON.stringify({ dir, entries: list, totalBytes: total }, null, 2) + '\n');
        } else {
          for (const e of entries) {
            // The ELF an entry came from: its path and the start of its sha256 (the path may
            // since hold other bytes); "?" for entries written before labels existed.
            const from = e.label ? `${e.label.source ?? '-'} (sha256 ${e.label.sha256.slice(0, 12)})` : '?';
            ctx.io.out(`${e.key}  ${String(e.bytes).padStart(10)}  ${e.modified.toISOString()}  ${from}\n`);
          }
          ctx.io.err(`berm: ${plural(entries.length, 'entry', 'entries')}, ${total} bytes in ${dir}\n`);
        }
        return ExitCode.Ok;
      }),
    );
  cache
    .command('clear')
    .description('remove every cache entry (unlinks files and links with entry names; never a directory)')
    .action((_opts: unknown, cmd: Command) =>
      ctx.run(cmd, () => {
        const g = ctx.globals(cmd);
        const dir = cacheDirForListing(g);
        const n = new WasmCache(dir).clear();
        if (g.json) ctx.io.out(JSON.stringify({ dir, removed: n }) + '\n');
        else ctx.io.out(`removed ${plural(n, 'entry', 'entries')} from ${dir}\n`);
        return ExitCode.Ok;
      }),
    );
}

/** `1 entry`, `3 entries` */
function plural(n: number, one: string, many: string): string {
  return `${n} ${n === 1 ? one : many}`;
}
