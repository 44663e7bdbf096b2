/**
 * Harness images: a RISC-V ELF (translated) or a WebAssembly module (instrumented), told apart by
 * their first four bytes here and nowhere else. Both read into a {@link GuestImage} with the same
 * two things every layer above the engine uses: the manifest bytes and the guest functions (the
 * exported ones marked global, so `berm_tool_<name>` exports are found alike).
 */
import { ElfError, readElf } from '../elf/reader.js';
import type { ElfImage, GuestFunction } from '../elf/types.js';
import { checkHarnessModule, WasmImageError, type WasmHarnessImage } from '../wasm/reader.js';

export { WasmImageError } from '../wasm/reader.js';

/** The kind of image the bytes hold, by their magic: `\0asm` (Wasm) or `\x7fELF`; null for neither. */
export function imageKind(bytes: Uint8Array): 'elf' | 'wasm' | null {
  if (bytes.length >= 4 && bytes[0] === 0x00 && bytes[1] === 0x61 && bytes[2] === 0x73 && bytes[3] === 0x6d)
    return 'wasm';
  if (bytes.length >= 4 && bytes[0] === 0x7f && bytes[1] === 0x45 && bytes[2] === 0x4c && bytes[3] === 0x46)
    return 'elf';
  return null;
}

/** A Wasm harness image as the engine and the harness layer see it. */
export interface WasmImage {
  kind: 'wasm';
  /** the `berm.abi` custom section with trailing NULs removed, or null when absent */
  manifest: Uint8Array | null;
  /**
   * One entry per defined function, ascending by its place in the module: `start` is the offset of
   * its body, `size` the body's bytes, `names` its export names (then its `name`-section name),
   * `global` whether it is exported.
   */
  functions: GuestFunction[];
  /** the module's structure and ABI facts (src/wasm/reader.ts) */
  module: WasmHarnessImage;
}

/** An image of either kind. */
export type GuestImage = ElfImage | WasmImage;

/** Whether `image` is a Wasm image. */
export function isWasmImage(image: GuestImage): image is WasmImage {
  return (image as WasmImage).kind === 'wasm';
}

/**
 * Read a Wasm harness image (checked against the harness ABI, see src/wasm/reader.ts).
 * @param memoryLimit the configured guest memory limit, bytes
 * @throws WasmImageError naming what is wrong and the fix
 */
export function readWasmImage(bytes: Uint8Array, memoryLimit: number): WasmImage {
  const module = checkHarnessModule(bytes, memoryLimit);
  const { info, exportNames } = module;
  const functions = info.bodies.map((b): GuestFunction => {
    const exported = exportNames.get(b.index) ?? [];
    const own = info.names.get(b.index);
    const names = [...exported, ...(own !== undefined && !exported.includes(own) ? [own] : [])];
    if (names.length === 0) names.push(`func[${b.index}]`);
    return {
      name: names[0]!,
      names,
      start: b.bodyStart,
      size: b.end - b.bodyStart,
      global: exported.length > 0,
    };
  });
  return { kind: 'wasm', manifest: module.manifest, functions, module };
}

/**
 * Read a harness image of either kind, picked by its magic bytes.
 * @param memoryLimit the configured guest memory limit, bytes (a Wasm memory above it is refused)
 * @throws ElfError for a malformed ELF or bytes that are neither (the ELF reader names the magic it
 *   expected); WasmImageError for a Wasm module outside the harness ABI
 */
export function readImage(bytes: Uint8Array, memoryLimit: number = DEFAULT_MEMORY_LIMIT): GuestImage {
  const kind = imageKind(bytes);
  if (kind === 'wasm') return readWasmImage(bytes, memoryLimit);
  if (kind === null && bytes.length >= 4)
    throw new ElfError(
      'not-elf',
      'not an ELF file (bad magic) nor a WebAssembly module: build the harness with the berm guest SDK',
    );
  return readElf(bytes);
}

/** The engine's default guest memory, bytes (64 MiB): the limit a Wasm image is checked against by default. */
export const DEFAULT_MEMORY_LIMIT = 64 * 1024 * 1024;

/** Whether `e` is an error of reading an image (a malformed ELF or a refused Wasm module). */
export function isImageError(e: unknown): boolean {
  return e instanceof WasmImageError || (e instanceof Error && e.name === 'ElfError');
}
