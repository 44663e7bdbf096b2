/**
 * `berm compile FILE...`: translate ELFs into the Wasm cache ahead of time. A progress bar on a
 * terminal; one line per file otherwise; `--json` prints one JSON object for CI pipelines.
 * Every file is attempted; the exit code is the worst one (2 when some file is malformed). A file
 * that translates but is not a harness a deploy accepts (no valid `.berm.abi`, declared tools and
 * exports that disagree: a raw ELF for `berm exec`) is cached all the same and reported: a warning
 * line and `"harness": false` with the reason, so a pipeline warming bermd's cache learns it now,
 * not at the deploy.
 */
import { createRequire } from 'node:module';
import type { Command } from 'commander';
import type { CompileInfo } from '../../engine/engine.js';
import {
  describeCompile,
  engineFor,
  exitCodeOf,
  ExitCode,
  labelCacheEntry,
  readInputFile,
  type ExitCodeValue,
} from '../context.js';
import type { CliContext } from '../program.js';
import { harnessAbi } from './harness-abi.js';
import { monotonicMs } from '../../util/clock.js';

/** One file's outcome in `compile --json`. */
export type CompileResult =
  | ({
      file: string;
      ok: true;
      /** whether a deploy would accept it (see harness-abi.ts) */
      harness: boolean;
      /** why not, when `harness` is false */
      notHarness?: string;
    } & CompileInfo)
  | { file: string; ok: false; error: string; message: string; exitCode: number };

/** The `compile --json` document. */
export interface CompileReport {
  cacheDir: string | null;
  files: CompileResult[];
  /** counts */
  compiled: number;
  cached: number;
  failed: number;
  totalMs: number;
}

/** Register `compile`. */
export function registerCompile(program: Command, ctx: CliContext): void {
  program
    .command('compile')
    .description('translate ELFs into the Wasm cache (progress bar on a terminal, --json for CI)')
    .argument('<files...>', 'ELF files')
    .action((files: string[], _opts: unknown, cmd: Command) =>
      ctx.run(cmd, async () => {
        const g = ctx.globals(cmd);
        const { io } = ctx;
        const engine = engineFor(g, 'optimized');
        const t0 = monotonicMs();
        // the progress bar's module (CommonJS) is loaded only when there is a terminal to draw on
        const cliProgress =
          !g.json && io.stderrIsTTY
            ? (createRequire(import.meta.url)('cli-progress') as typeof import('cli-progress'))
            : null;
        const multi =
          cliProgress !== null
            ? new cliProgress.MultiBar(
                {
                  stream: io.progressStream,
                  format: 'compiling [{bar}] {value}/{total} {file}',
                  hideCursor: true,
                  clearOnComplete: true,
                },
                cliProgress.Presets.shades_classic,
              )
            : null;
        const bar = multi?.create(files.length, 0, { file: '' }) ?? null;
        const results: CompileResult[] = [];
        // lines printed once the progress bar is gone (MultiBar.log drops lines written late)
        const deferred: string[] = [];
        let code: ExitCodeValue = ExitCode.Ok;
        try {
          for (const file of files) {
            bar?.update({ file });
            multi?.update();
            try {
              const elf = readInputFile(file);
              const m = await engine.compile(elf);
              labelCacheEntry(engine, m.info.key, file, elf);
              let notHarness: string | undefined;
              try {
                harnessAbi(file, elf);
              } catch (e) {
                notHarness = (e as Error).message.replace(`${file}: `, '');
              }
              results.push({
                file,
                ok: true,
                harness: notHarness === undefined,
                ...(notHarness !== undefined ? { notHarness } : {}),
                ...m.info,
              });
              if (!g.json) {
                const line = `${file}: ${describeCompile(m.info)}\n`;
                if (bar === null) io.out(line);
                else if (g.verbose) deferred.push(line);
              }
              if (notHarness !== undefined) {
                const how = m.info.format === 'wasm' ? 'instrumented' : 'translated';
                const warn = `berm: ${file}: ${how}, but not a harness bermd deploys: ${notHarness}\n`;
                if (bar === null) io.err(warn);
                else deferred.push(warn);
              }
            } catch (e) {
              const c = exitCodeOf(e);
              if (c === ExitCode.Internal && g.debug) throw e;
              code = Math.max(code, c) as ExitCodeValue;
              const err = e instanceof Error ? e : new Error(String(e));
              results.push({ file, ok: false, error: err.name, message: err.message, exitCode: c });
              // a message that already starts with the file's name (a read error) is not prefixed twice
              const line = `berm: ${err.message.startsWith(`${file}: `) ? '' : `${file}: `}${err.message}\n`;
              if (bar === null) io.err(line);
              else deferred.push(line);
            }
            bar?.increment();
          }
        } finally {
          multi?.stop();
          for (const line of deferred) io.err(line);
        }
        const ok = results.filter((r): r is Extract<CompileResult, { ok: true }> => r.ok);
        const report: CompileReport = {
          cacheDir: engine.cache?.dir ?? null,
          files: results,
          compiled: ok.filter((r) => !r.cached).length,
          cached: ok.filter((r) => r.cached).length,
          failed: results.length - ok.length,
          totalMs: monotonicMs() - t0,
        };
        if (g.json) io.out(JSON.stringify(report, null, 2) + '\n');
        else {
          io.err(
            `berm: ${report.compiled} compiled (translated or instrumented), ${report.cached} already cached, ${report.failed} failed` +
              ` in ${(report.totalMs / 1000).toFixed(1)} s${report.cacheDir ? ` (cache ${report.cacheDir})` : ' (no cache)'}\n`,
          );
        }
        return code;
      }),
    );
}
