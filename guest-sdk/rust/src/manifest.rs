//! The `.berm.abi` manifest, built at compile time: one JSON object
//! `{"abi_version":1,"usage":"…","deps":[…],"tools":[{"name","description","parameters"}]}`
//! (ABI 0: no `deps`), the format src/harness/manifest.ts reads. Strings are JSON-escaped here;
//! a tool's parameters are its JSON Schema text, inserted as given (`""` means
//! `{"type":"object"}`).

/// One declared tool.
#[derive(Clone, Copy, Debug)]
pub struct ToolDecl {
    /// the tool name (export `berm_tool_<name>`)
    pub name: &'static str,
    /// what it does (goes to the model)
    pub description: &'static str,
    /// JSON Schema of the arguments, as JSON text; "" for `{"type":"object"}`
    pub parameters: &'static str,
}

const DEFAULT_PARAMS: &str = "{\"type\":\"object\"}";

/// A byte sink that only counts (`out == None`) or writes.
struct Out<'a> {
    out: Option<&'a mut [u8]>,
    at: usize,
}

impl<'a> Out<'a> {
    const fn byte(&mut self, b: u8) {
        if let Some(o) = &mut self.out {
            o[self.at] = b;
        }
        self.at += 1;
    }
    const fn raw(&mut self, s: &str) {
        let b = s.as_bytes();
        let mut i = 0;
        while i < b.len() {
            self.byte(b[i]);
            i += 1;
        }
    }
    /// `s` as a JSON string literal (quotes, `\"`, `\\`, and `\u00XX` for control characters).
    const fn string(&mut self, s: &str) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let b = s.as_bytes();
        self.byte(b'"');
        let mut i = 0;
        while i < b.len() {
            let c = b[i];
            if c == b'"' || c == b'\\' {
                self.byte(b'\\');
                self.byte(c);
            } else if c < 0x20 {
                self.raw("\\u00");
                self.byte(HEX[(c >> 4) as usize]);
                self.byte(HEX[(c & 15) as usize]);
            } else {
                self.byte(c);
            }
            i += 1;
        }
        self.byte(b'"');
    }
}

const fn emit(o: &mut Out, abi: u32, usage: &str, deps: &[&str], tools: &[ToolDecl]) {
    o.raw(if abi == 0 { "{\"abi_version\":0,\"usage\":" } else { "{\"abi_version\":1,\"usage\":" });
    o.string(usage);
    if abi != 0 {
        o.raw(",\"deps\":[");
        let mut i = 0;
        while i < deps.len() {
            if i > 0 {
                o.byte(b',');
            }
            o.string(deps[i]);
            i += 1;
        }
        o.byte(b']');
    }
    o.raw(",\"tools\":[");
    let mut i = 0;
    while i < tools.len() {
        if i > 0 {
            o.byte(b',');
        }
        o.raw("{\"name\":");
        o.string(tools[i].name);
        o.raw(",\"description\":");
        o.string(tools[i].description);
        o.raw(",\"parameters\":");
        o.raw(if tools[i].parameters.is_empty() { DEFAULT_PARAMS } else { tools[i].parameters });
        o.byte(b'}');
        i += 1;
    }
    o.raw("]}");
}

/// Length in bytes of the manifest [`build`] writes.
pub const fn len(abi: u32, usage: &str, deps: &[&str], tools: &[ToolDecl]) -> usize {
    let mut o = Out { out: None, at: 0 };
    emit(&mut o, abi, usage, deps, tools);
    o.at
}

/// The manifest bytes; `N` must be [`len`] of the same arguments.
pub const fn build<const N: usize>(abi: u32, usage: &str, deps: &[&str], tools: &[ToolDecl]) -> [u8; N] {
    let mut buf = [0u8; N];
    let mut o = Out { out: Some(&mut buf), at: 0 };
    emit(&mut o, abi, usage, deps, tools);
    buf
}

const fn eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Compile-time checks of a declaration (a failed check is a compile error naming it): tool names
/// unique and at most 128 bytes, parameters empty or a JSON object's text.
pub const fn check(tools: &[ToolDecl]) {
    let mut i = 0;
    while i < tools.len() {
        let t = tools[i];
        if t.name.len() > 128 {
            panic!("berm::harness!: a tool name is longer than 128 bytes");
        }
        let p = t.parameters.as_bytes();
        if !p.is_empty() {
            let mut a = 0;
            while a < p.len() && (p[a] == b' ' || p[a] == b'\n' || p[a] == b'\t' || p[a] == b'\r') {
                a += 1;
            }
            let mut z = p.len();
            while z > a && (p[z - 1] == b' ' || p[z - 1] == b'\n' || p[z - 1] == b'\t' || p[z - 1] == b'\r') {
                z -= 1;
            }
            if a == z || p[a] != b'{' || p[z - 1] != b'}' {
                panic!("berm::harness!: a tool's parameters must be the text of a JSON Schema object");
            }
        }
        let mut j = i + 1;
        while j < tools.len() {
            if eq(t.name, tools[j].name) {
                panic!("berm::harness!: a tool is declared twice");
            }
            j += 1;
        }
        i += 1;
    }
}
