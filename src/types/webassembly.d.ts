// The WebAssembly JS API as Node 20 provides it. @types/node 20 leaves it to lib.dom, which a
// Node program should not pull in; this declares the part berm uses (WebAssembly JS API spec).
declare namespace WebAssembly {
  interface MemoryDescriptor {
    initial: number;
    maximum?: number;
    shared?: boolean;
  }
  class Memory {
    constructor(descriptor: MemoryDescriptor);
    readonly buffer: ArrayBuffer;
    grow(delta: number): number;
  }
  interface ModuleExportDescriptor {
    name: string;
    kind: 'function' | 'table' | 'memory' | 'global';
  }
  interface ModuleImportDescriptor {
    module: string;
    name: string;
    kind: 'function' | 'table' | 'memory' | 'global';
  }
  class Module {
    constructor(bytes: BufferSource);
    static exports(module: Module): ModuleExportDescriptor[];
    static imports(module: Module): ModuleImportDescriptor[];
  }
  type ExportValue = ((...args: never[]) => unknown) | Global | Memory | unknown;
  class Instance {
    constructor(module: Module, importObject?: Record<string, Record<string, unknown>>);
    readonly exports: Record<string, ExportValue>;
  }
  interface GlobalDescriptor {
    value: 'i32' | 'i64' | 'f32' | 'f64';
    mutable?: boolean;
  }
  class Global {
    constructor(descriptor: GlobalDescriptor, value?: number | bigint);
    value: number | bigint;
  }
  class CompileError extends Error {}
  class LinkError extends Error {}
  class RuntimeError extends Error {}
  function validate(bytes: BufferSource): boolean;
  function compile(bytes: BufferSource): Promise<Module>;
}
