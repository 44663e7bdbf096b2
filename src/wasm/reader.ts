/**
 * A WebAssembly harness image, read without instantiating it (WebAssembly core spec, 5.5 "Modules",
 * binary format): its sections, imports, exports, memory, functions and custom sections, checked
 * against the harness ABI for Wasm images:
 * - the one import is `berm.syscall: (i64, i32, i32) -> i64` (the FNV-1a-64 number of a host call,
 *   and the pointer and length an ELF passes in a0/a1);
 * - the module defines one memory and exports it as `memory` (not shared, 32-bit);
 * - every export named `berm_tool_<name>` is a function taking and returning nothing;
 * - no start function (a harness runs only when a tool is called);
 * - the manifest is the custom section `berm.abi` (the JSON an ELF keeps in `.berm.abi`).
 * Any other shape is refused with a {@link WasmImageError} naming what is wrong and the fix.
 */
import { Cursor, WasmImageError } from './cursor.js';

export { WasmImageError } from './cursor.js';

/** The first four bytes of every WebAssembly module: `\0asm`. */
export const WASM_MAGIC = Uint8Array.of(0x00, 0x61, 0x73, 0x6d);

/** The import module and name every host call goes through. */
export const SYSCALL_IMPORT = { module: 'berm', name: 'syscall' } as const;

/** The custom section holding the manifest. */
export const MANIFEST_SECTION = 'berm.abi';

/** The export holding the guest's memory. */
export const MEMORY_EXPORT = 'memory';

/** Bytes of one Wasm page. */
export const WASM_PAGE = 65536;

/** Value types by their binary encoding. */
export const I32 = 0x7f;
export const I64 = 0x7e;

/** One function type: parameter and result value types (their binary encodings). */
export interface FuncType {
  params: number[];
  results: number[];
}

/** One section of the module as it appears in the binary. */
export interface RawSection {
  id: number;
  /** offset of the section's id byte */
  start: number;
  /** offset of its content (after the size) */
  contentStart: number;
  /** offset just past it */
  end: number;
  /** a custom section's name (id 0), else '' */
  name: string;
}

/** A defined function's body in the binary. */
export interface FunctionBody {
  /** the function index (imported functions first) */
  index: number;
  /** offset of the body's size field (the function's place in the module) */
  start: number;
  /** offset of the first local declaration */
  bodyStart: number;
  /** offset just past the body's final `end` */
  end: number;
}

/** What the reader learns of a module. */
export interface WasmModuleInfo {
  sections: RawSection[];
  types: FuncType[];
  imports: { module: string; name: string; kind: number; type: number }[];
  /** type index of each defined function */
  functionTypes: number[];
  importedFunctions: number;
  memory: { min: number; max: number | null; flags: number } | null;
  /** imported memories, tables and globals (each refused) */
  importedOther: number;
  definedGlobals: number;
  exports: { name: string; kind: number; index: number }[];
  hasStart: boolean;
  bodies: FunctionBody[];
  customs: Map<string, Uint8Array>;
  /** function names from the `name` custom section, by function index */
  names: Map<number, string>;
}

/** The export kind of a function, a table, a memory and a global. */
export const ExportKind = { func: 0, table: 1, memory: 2, global: 3 } as const;

const decoder = new TextDecoder('utf-8', { fatal: true });

function readName(c: Cursor, what: string): string {
  const n = c.u32(`${what} length`);
  const bytes = c.bytes(n, what);
  try {
    return decoder.decode(bytes);
  } catch {
    throw new WasmImageError(`the module is malformed: ${what} is not UTF-8 (at offset ${c.pos - n})`);
  }
}

function readLimits(c: Cursor, what: string): { min: number; max: number | null; flags: number } {
  const flags = c.u8(`${what} limits`);
  if (flags > 7)
    throw new WasmImageError(`the module is malformed: ${what} limits flags 0x${flags.toString(16)}`);
  const min = c.u32(`${what} minimum`);
  const max = flags & 1 ? c.u32(`${what} maximum`) : null;
  return { min, max, flags };
}

/** Skip a constant expression (a global's initialiser): up to its `end`. */
function skipConstExpr(c: Cursor): void {
  for (;;) {
    const op = c.u8('constant expression');
    if (op === 0x0b) return;
    if (op === 0x41) c.s64('i32.const');
    else if (op === 0x42) c.s64('i64.const');
    else if (op === 0x43) c.bytes(4, 'f32.const');
    else if (op === 0x44) c.bytes(8, 'f64.const');
    else if (op === 0x23 || op === 0xd2) c.u32('index');
    else if (op === 0xd0) c.u8('reference type');
    else if (op === 0x6a || op === 0x6b || op === 0x6c || op === 0x7c || op === 0x7d || op === 0x7e) continue;
    else
      throw new WasmImageError(
        `the module is malformed: opcode 0x${op.toString(16)} in a constant expression`,
      );
  }
}

/** The `name` custom section's function names (subsection 1), best effort: a bad one gives none. */
function functionNames(payload: Uint8Array): Map<number, string> {
  const names = new Map<number, string>();
  try {
    const c = new Cursor(payload, 0, payload.length);
    while (!c.done()) {
      const id = c.u8('name subsection');
      const size = c.u32('name subsection size');
      const end = c.pos + size;
      if (id === 1) {
        const n = c.u32('function names');
        for (let i = 0; i < n; i++) {
          const index = c.u32('function index');
          names.set(index, readName(c, 'function name'));
        }
      }
      c.pos = end;
    }
  } catch {
    return names;
  }
  return names;
}

/**
 * Read a module's structure (no code is decoded but the function bodies' bounds).
 * @throws WasmImageError when the binary is not a well-formed module of the MVP's section layout
 */
export function readModule(bytes: Uint8Array): WasmModuleInfo {
  if (bytes.length < 8 || WASM_MAGIC.some((b, i) => bytes[i] !== b))
    throw new WasmImageError('not a WebAssembly module (its first four bytes are not \\0asm)');
  if (bytes[4] !== 1 || bytes[5] !== 0 || bytes[6] !== 0 || bytes[7] !== 0)
    throw new WasmImageError('unsupported WebAssembly binary version (berm reads version 1)');
  const info: WasmModuleInfo = {
    sections: [],
    types: [],
    imports: [],
    functionTypes: [],
    importedFunctions: 0,
    memory: null,
    importedOther: 0,
    definedGlobals: 0,
    exports: [],
    hasStart: false,
    bodies: [],
    customs: new Map(),
    names: new Map(),
  };
  const top = new Cursor(bytes, 8, bytes.length);
  let memories = 0;
  while (!top.done()) {
    const start = top.pos;
    const id = top.u8('section id');
    const size = top.u32('section size');
    const contentStart = top.pos;
    const end = contentStart + size;
    if (end > bytes.length)
      throw new WasmImageError(`the module is malformed: section ${id} runs past the end`);
    const c = new Cursor(bytes, contentStart, end);
    let name = '';
    switch (id) {
      case 0: {
        name = readName(c, 'custom section name');
        const payload = bytes.subarray(c.pos, end);
        if (!info.customs.has(name)) info.customs.set(name, payload);
        if (name === 'name') info.names = functionNames(payload);
        break;
      }
      case 1: {
        const n = c.u32('type count');
        for (let i = 0; i < n; i++) {
          const form = c.u8('type form');
          if (form !== 0x60)
            throw new WasmImageError(`the module is malformed: type ${i} is not a function type`);
          const params = Array.from({ length: c.u32('parameter count') }, () => c.u8('parameter type'));
          const results = Array.from({ length: c.u32('result count') }, () => c.u8('result type'));
          info.types.push({ params, results });
        }
        break;
      }
      case 2: {
        const n = c.u32('import count');
        for (let i = 0; i < n; i++) {
          const module = readName(c, 'import module name');
          const field = readName(c, 'import name');
          const kind = c.u8('import kind');
          let type = -1;
          if (kind === 0) {
            type = c.u32('import type');
            info.importedFunctions++;
          } else {
            if (kind === 1) {
              c.u8('table element type');
              readLimits(c, 'table');
            } else if (kind === 2) readLimits(c, 'memory');
            else if (kind === 3) {
              c.u8('global type');
              c.u8('global mutability');
            } else throw new WasmImageError(`the module is malformed: import kind ${kind}`);
            info.importedOther++;
          }
          info.imports.push({ module, name: field, kind, type });
        }
        break;
      }
      case 3: {
        const n = c.u32('function count');
        for (let i = 0; i < n; i++) info.functionTypes.push(c.u32('function type'));
        break;
      }
      case 5: {
        const n = c.u32('memory count');
        for (let i = 0; i < n; i++) {
          const limits = readLimits(c, 'memory');
          if (memories === 0) info.memory = limits;
          memories++;
        }
        break;
      }
      case 6: {
        const n = c.u32('global count');
        for (let i = 0; i < n; i++) {
          c.u8('global type');
          c.u8('global mutability');
          skipConstExpr(c);
        }
        info.definedGlobals = n;
        break;
      }
      case 7: {
        const n = c.u32('export count');
        for (let i = 0; i < n; i++) {
          const exportName = readName(c, 'export name');
          const kind = c.u8('export kind');
          const index = c.u32('export index');
          info.exports.push({ name: exportName, kind, index });
        }
        break;
      }
      case 8:
        info.hasStart = true;
        break;
      case 10: {
        const n = c.u32('function body count');
        for (let i = 0; i < n; i++) {
          const bodyStart = c.pos;
          const bodySize = c.u32('function body size');
          const b = c.pos;
          c.bytes(bodySize, 'function body');
          info.bodies.push({ index: info.importedFunctions + i, start: bodyStart, bodyStart: b, end: c.pos });
        }
        break;
      }
      default:
        if (id > 13) throw new WasmImageError(`the module is malformed: unknown section id ${id}`);
    }
    if (memories > 1)
      throw new WasmImageError('the module defines more than one memory (a harness has exactly one)');
    info.sections.push({ id, start, contentStart, end, name });
    top.pos = end;
  }
  return info;
}

/** What the engine and everything above it need of a Wasm harness image. */
export interface WasmHarnessImage {
  info: WasmModuleInfo;
  /** the `berm.abi` section's bytes with trailing NULs removed, or null when absent */
  manifest: Uint8Array | null;
  /** the names of the exported functions, by function index */
  exportNames: Map<number, string[]>;
  /** function index of each `berm_tool_<name>` export, by export name */
  tools: Map<string, number>;
}

/** Prefix of tool exports (the harness ABI). */
const TOOL_PREFIX = 'berm_tool_';

function typeText(t: FuncType): string {
  const v = (x: number) =>
    ({ 0x7f: 'i32', 0x7e: 'i64', 0x7d: 'f32', 0x7c: 'f64' })[x] ?? `0x${x.toString(16)}`;
  return `(${t.params.map(v).join(', ')}) -> (${t.results.map(v).join(', ')})`;
}

/**
 * Check a module against the harness ABI for Wasm images (see the module comment).
 * @param memoryLimit the largest memory a guest may have, bytes (the engine's configured memory)
 * @throws WasmImageError naming the first violation and its fix
 */
export function checkHarnessModule(bytes: Uint8Array, memoryLimit: number): WasmHarnessImage {
  const info = readModule(bytes);
  for (const imp of info.imports) {
    if (imp.module !== SYSCALL_IMPORT.module || imp.name !== SYSCALL_IMPORT.name || imp.kind !== 0) {
      const kinds = ['function', 'table', 'memory', 'global'];
      throw new WasmImageError(
        `the module imports ${kinds[imp.kind] ?? 'something'} ${imp.module}.${imp.name}: a Wasm harness may ` +
          `import only the function ${SYSCALL_IMPORT.module}.${SYSCALL_IMPORT.name} (every host call goes through it; ` +
          `define memory, tables and globals in the module)`,
      );
    }
    const t = info.types[imp.type];
    if (t === undefined || t.params.join() !== [I64, I32, I32].join() || t.results.join() !== [I64].join()) {
      throw new WasmImageError(
        `the import berm.syscall has the type ${t ? typeText(t) : '?'}: it must be (i64, i32, i32) -> (i64) ` +
          `(the call's number, a pointer and a length; the answer)`,
      );
    }
  }
  if (info.importedFunctions > 1)
    throw new WasmImageError('the module imports berm.syscall more than once: import it once');
  if (info.importedFunctions === 0)
    throw new WasmImageError(
      'the module imports nothing: a Wasm harness answers through the import berm.syscall (berm.done, berm.fail)',
    );
  if (info.hasStart)
    throw new WasmImageError(
      'the module has a start function: a harness runs only when a tool is called (remove it; run setup inside the tools)',
    );
  const memExport = info.exports.find((e) => e.name === MEMORY_EXPORT);
  if (info.memory === null || memExport === undefined || memExport.kind !== ExportKind.memory) {
    throw new WasmImageError(
      `the module does not export its memory as "${MEMORY_EXPORT}": a Wasm harness defines one memory and exports ` +
        `it (wasm-ld does by default; do not pass --import-memory)`,
    );
  }
  const mem = info.memory;
  if (mem.flags & 2)
    throw new WasmImageError('the module defines a shared memory: a harness memory is not shared');
  if (mem.flags & 4)
    throw new WasmImageError('the module defines a 64-bit memory: berm runs 32-bit (wasm32) memories');
  const limitPages = Math.floor(memoryLimit / WASM_PAGE);
  if (mem.max !== null && mem.max > limitPages) {
    throw new WasmImageError(
      `the module's memory maximum of ${mem.max} pages (${mem.max * WASM_PAGE} bytes) is above the configured ` +
        `limit of ${limitPages} pages (${memoryLimit} bytes): link with a smaller --max-memory, or raise the limit`,
    );
  }
  if (mem.min > limitPages) {
    throw new WasmImageError(
      `the module's initial memory of ${mem.min} pages (${mem.min * WASM_PAGE} bytes) is above the configured ` +
        `limit of ${limitPages} pages (${memoryLimit} bytes): link with a smaller --initial-memory or stack, or raise the limit`,
    );
  }
  if (info.bodies.length !== info.functionTypes.length)
    throw new WasmImageError('the module is malformed: its function and code sections disagree');
  const exportNames = new Map<number, string[]>();
  const tools = new Map<string, number>();
  for (const e of info.exports) {
    if (e.kind !== ExportKind.func) {
      if (e.name.startsWith(TOOL_PREFIX))
        throw new WasmImageError(`the export ${e.name} is not a function: a tool export is a function`);
      continue;
    }
    const list = exportNames.get(e.index);
    if (list) list.push(e.name);
    else exportNames.set(e.index, [e.name]);
    if (e.name.startsWith(TOOL_PREFIX)) {
      const def = e.index - info.importedFunctions;
      const t = def < 0 ? undefined : info.types[info.functionTypes[def]!];
      if (t === undefined || t.params.length !== 0 || t.results.length !== 0) {
        throw new WasmImageError(
          `the tool export ${e.name} has the type ${t ? typeText(t) : 'of an import'}: a tool takes and returns ` +
            `nothing (it reads its arguments with berm.args.read and answers with berm.done or berm.fail)`,
        );
      }
      tools.set(e.name, e.index);
    }
  }
  let manifest = info.customs.get(MANIFEST_SECTION) ?? null;
  if (manifest !== null) {
    let n = manifest.length;
    while (n > 0 && manifest[n - 1] === 0) n--;
    manifest = manifest.subarray(0, n);
  }
  return { info, manifest, exportNames, tools };
}
