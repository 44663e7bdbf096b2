// In-process checks of the CLI's parsers and of the extension point of `call` (no guest is run).
import { InvalidArgumentError } from 'commander';
import t from 'tap';
import { parseGuestInt } from '../src/cli/commands/exec.js';
import { CliError, parseMemorySize, parsePositiveInt, type Io } from '../src/cli/context.js';
import { runCli } from '../src/cli/program.js';
import { caseInt, expected } from './helpers/fixtures.js';

function captureIo(): Io & { stdout: string; stderr: string } {
  const io = {
    stdout: '',
    stderr: '',
    out: (s: string) => void (io.stdout += s),
    err: (s: string) => void (io.stderr += s),
    readStdin: async () => '',
    stderrIsTTY: false,
    progressStream: process.stderr,
  };
  return io;
}

t.test('parseGuestInt reads the integers of cases.json as two’s complement', async (t) => {
  for (const c of expected().raw) {
    for (const a of c.args) t.equal(BigInt.asUintN(64, parseGuestInt(a)), caseInt(a), a);
  }
  t.equal(parseGuestInt('-0x1'), -1n);
  t.equal(parseGuestInt('0xffffffffffffffff'), -1n);
  for (const bad of ['', 'x', '1.5', '0x', '--1', '18446744073709551616', '-9223372036854775809']) {
    t.throws(() => parseGuestInt(bad), CliError, bad);
  }
});

t.test('parseMemorySize takes powers of two from 64K to 1G', async (t) => {
  t.equal(parseMemorySize('64M'), 64 << 20);
  t.equal(parseMemorySize('1M'), 1 << 20);
  t.equal(parseMemorySize('64K'), 65536);
  t.equal(parseMemorySize('1G'), 1 << 30);
  t.equal(parseMemorySize('65536'), 65536);
  t.equal(parseMemorySize('2MiB'), 2 << 20);
  for (const bad of ['3M', '32K', '2G', 'big', '0', '-1M']) {
    t.throws(() => parseMemorySize(bad), InvalidArgumentError, bad);
  }
  t.equal(parsePositiveInt('200'), 200);
  for (const bad of ['0', '-3', '1e3', 'x']) t.throws(() => parsePositiveInt(bad), InvalidArgumentError, bad);
});

t.test('call extensions add options (the hook --config will use)', async (t) => {
  const io = captureIo();
  let configured = 0;
  const code = await runCli(['call', '--help'], {
    io,
    callExtensions: [
      {
        configure: (cmd) => {
          configured++;
          cmd.option('--config <file>', 'capability declarations (harnesses.toml)');
        },
      },
    ],
  });
  t.equal(code, 0);
  t.equal(configured, 1);
  t.match(io.stdout, /--config <file>/);
  t.match(io.stdout, /--no-validate/);
});

t.test("a verb's --help lists the global options it takes (compile --json, --cache-dir)", async (t) => {
  for (const verb of [['compile'], ['invoke'], ['cache', 'ls']]) {
    const io = captureIo();
    t.equal(await runCli([...verb, '--help'], { io }), 0);
    const [own, global] = io.stdout.split('Global Options:');
    t.ok(global, `${verb.join(' ')}: a Global Options section`);
    for (const o of ['--json', '--cache-dir <dir>', '--verbose', '--timeout <ms>'])
      t.match(global, o, verb.join(' '));
    t.notMatch(own!.split('\nOptions:')[1], '--json', 'listed once, under Global Options');
  }
});

t.test('usage errors exit 2 through the injected streams', async (t) => {
  const io = captureIo();
  t.equal(await runCli(['exec'], { io }), 2);
  t.match(io.stderr, /^berm: missing required argument 'file'\nusage: berm exec \[options\] <file>/);
  const sub = captureIo();
  t.equal(await runCli(['wake', 'add'], { io: sub }), 2);
  t.match(
    sub.stderr,
    /^berm: missing required argument 'harness'\nusage: berm wake add \[options\] <harness>/,
  );
  t.notMatch(sub.stderr, /^error:/m, "commander's own prefix is not shown");
  const io2 = captureIo();
  t.equal(await runCli(['--version'], { io: io2 }), 0);
  t.match(io2.stdout, /^\d+\.\d+\.\d+/);
});
