/**
 * The sections of a Wasm module around its code (WebAssembly core specification 2.0, 5.5): types,
 * imports (functions, one memory, globals, one table), functions, a table, globals, exports,
 * active element segments, code and the custom "name" section. ByteModule (bytes.ts) gathers
 * the parts and writes the code; this file lays them out in the order the format requires.
 */
import { uleb } from '../util/leb.js';
import { Bytes, name, Op, sleb32 } from './wasm-encoding.js';

/** funcref (5.3.4) */
const FUNCREF = 0x70;

/** Everything of a module but its code, with indices resolved. */
export interface ModuleParts {
  /** signatures `[params, results]` as value type codes */
  types: readonly (readonly [readonly number[], readonly number[]])[];
  /** function imports, in index order */
  functionImports: readonly { module: string; base: string; type: number }[];
  /** the imported memory: pages, and whether it is shared (threads proposal: limits flag 3) */
  memoryImport: { module: string; base: string; pages: [number, number]; shared: boolean } | null;
  /** global imports, in index order (before every defined global) */
  globalImports: readonly { module: string; base: string; type: number; mutable: boolean }[];
  /** an imported funcref table of at least `min` entries */
  tableImport: { module: string; base: string; min: number } | null;
  /** the type index of each defined function */
  functionTypes: readonly number[];
  /** a defined funcref table of `size` entries (fixed) */
  table: { size: number } | null;
  /** active element segments of table 0 (imported or defined): entry offset + k = function k */
  elements: readonly { offset: number; functions: readonly number[] }[];
  /** defined globals: type, mutability and the encoded constant initialiser (without `end`) */
  globals: readonly { type: number; mutable: boolean; init: readonly number[] | Uint8Array }[];
  /** exports: kind 0 function, 1 table, 3 global */
  exports: readonly { name: string; kind: number; index: number }[];
  /** the code section's body */
  code: Uint8Array;
  /** every function's name by index (imports first), for the name section */
  functionNames: readonly string[];
}

/** The module's bytes (5.5.16: sections in id order, the custom name section last). */
export function writeModule(p: ModuleParts): Uint8Array {
  const out = new Bytes(p.code.length + 1024);
  out.append([0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]);
  const section = (id: number, body: Uint8Array | number[]) => {
    out.push(id);
    uleb(out, body.length);
    out.append(body);
  };
  const types: number[] = [];
  uleb(types, p.types.length);
  for (const [params, results] of p.types) {
    types.push(0x60);
    uleb(types, params.length);
    types.push(...params);
    uleb(types, results.length);
    types.push(...results);
  }
  section(1, types);

  const imports: number[] = [];
  const count =
    p.functionImports.length + (p.memoryImport ? 1 : 0) + p.globalImports.length + (p.tableImport ? 1 : 0);
  uleb(imports, count);
  for (const i of p.functionImports) {
    name(imports, i.module);
    name(imports, i.base);
    imports.push(0x00);
    uleb(imports, i.type);
  }
  if (p.memoryImport) {
    const mi = p.memoryImport;
    name(imports, mi.module);
    name(imports, mi.base);
    imports.push(0x02, mi.shared ? 0x03 : 0x01);
    uleb(imports, mi.pages[0]);
    uleb(imports, mi.pages[1]);
  }
  for (const g of p.globalImports) {
    name(imports, g.module);
    name(imports, g.base);
    imports.push(0x03, g.type, g.mutable ? 1 : 0);
  }
  if (p.tableImport) {
    name(imports, p.tableImport.module);
    name(imports, p.tableImport.base);
    imports.push(0x01, FUNCREF, 0x00);
    uleb(imports, p.tableImport.min);
  }
  section(2, imports);

  const funcs: number[] = [];
  uleb(funcs, p.functionTypes.length);
  for (const t of p.functionTypes) uleb(funcs, t);
  section(3, funcs);
  if (p.table) {
    const tables: number[] = [1, FUNCREF, 0x01];
    uleb(tables, p.table.size);
    uleb(tables, p.table.size);
    section(4, tables);
  }
  const globals: number[] = [];
  uleb(globals, p.globals.length);
  for (const g of p.globals) {
    globals.push(g.type, g.mutable ? 1 : 0);
    for (const b of g.init) globals.push(b);
    globals.push(Op.end);
  }
  section(6, globals);

  const exps: number[] = [];
  uleb(exps, p.exports.length);
  for (const e of p.exports) {
    name(exps, e.name);
    exps.push(e.kind);
    uleb(exps, e.index);
  }
  section(7, exps);
  if (p.elements.length > 0) {
    // active segments for table 0 (5.5.12, flags 0: offset expression, function indices)
    const elems: number[] = [];
    uleb(elems, p.elements.length);
    for (const e of p.elements) {
      elems.push(0x00, Op.i32_const);
      sleb32(elems, e.offset);
      elems.push(Op.end);
      uleb(elems, e.functions.length);
      for (const f of e.functions) uleb(elems, f);
    }
    section(9, elems);
  }
  section(10, p.code);

  // custom "name" section, function names subsection (spec appendix 7.4)
  const names = new Bytes(p.functionNames.length * 12 + 16);
  uleb(names, p.functionNames.length);
  p.functionNames.forEach((n, k) => {
    uleb(names, k);
    name(names, n);
  });
  const custom = new Bytes(names.length + 16);
  name(custom, 'name');
  custom.push(0x01);
  uleb(custom, names.length);
  custom.append(names.bytes());
  section(0, custom.bytes());
  return out.bytes().slice();
}
