//! A minimal JSON reader for flat objects (the wake and notify records of docs/wakes.md): string
//! and integer members are decoded, members of any other type are skipped, so the runtime may add
//! fields. Harnesses that need real JSON use serde_json (it works in `no_std` + `alloc`).
use alloc::string::String;

/// A decoded member value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// a JSON string, decoded
    Str(String),
    /// a JSON integer (a fraction is truncated; an exponent is refused)
    Int(i64),
    /// anything else (skipped)
    Other,
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> P<'a> {
    fn ws(&mut self) {
        while self.i < self.s.len() && matches!(self.s[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn hex4(&mut self) -> Option<u32> {
        let h = self.s.get(self.i..self.i + 4)?;
        self.i += 4;
        u32::from_str_radix(core::str::from_utf8(h).ok()?, 16).ok()
    }
    fn string(&mut self) -> Option<String> {
        if self.peek()? != b'"' {
            return None;
        }
        self.i += 1;
        let mut out: alloc::vec::Vec<u8> = alloc::vec::Vec::new();
        loop {
            let c = self.peek()?;
            self.i += 1;
            match c {
                b'"' => return String::from_utf8(out).ok(),
                b'\\' => {
                    let e = self.peek()?;
                    self.i += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let u = self.hex4()?;
                            let cp = if (0xd800..0xdc00).contains(&u) {
                                if self.s.get(self.i..self.i + 2)? != b"\\u" {
                                    return None;
                                }
                                self.i += 2;
                                let lo = self.hex4()?;
                                if !(0xdc00..0xe000).contains(&lo) {
                                    return None;
                                }
                                0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00)
                            } else {
                                u
                            };
                            char::from_u32(cp)?
                        }
                        _ => return None,
                    };
                    let mut b = [0u8; 4];
                    out.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
                }
                c if c < 0x20 => return None,
                c => out.push(c),
            }
        }
    }
    fn integer(&mut self) -> Option<i64> {
        let st = self.i;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let d = self.i;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.i += 1;
        }
        if self.i == d {
            return None;
        }
        let v: i64 = core::str::from_utf8(&self.s[st..self.i]).ok()?.parse().ok()?;
        if self.peek() == Some(b'.') {
            self.i += 1;
            while matches!(self.peek(), Some(b'0'..=b'9')) {
                self.i += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            return None;
        }
        Some(v)
    }
    fn skip(&mut self) -> Option<()> {
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                let mut depth = 0usize;
                loop {
                    match self.peek()? {
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                self.i += 1;
                                return Some(());
                            }
                        }
                        _ => {}
                    }
                    self.i += 1;
                }
            }
            _ => {
                let st = self.i;
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.i += 1;
                }
                (self.i > st).then_some(())
            }
        }
    }
}

/// Read the members of a flat JSON object, calling `f(key, value)` for each. `None` when the text
/// is not one JSON object (trailing bytes included).
pub fn object(text: &[u8], mut f: impl FnMut(&str, Value)) -> Option<()> {
    let mut p = P { s: text, i: 0 };
    p.ws();
    if p.peek()? != b'{' {
        return None;
    }
    p.i += 1;
    p.ws();
    if p.peek()? == b'}' {
        p.i += 1;
    } else {
        loop {
            p.ws();
            let key = p.string()?;
            p.ws();
            if p.peek()? != b':' {
                return None;
            }
            p.i += 1;
            p.ws();
            let v = match p.peek()? {
                b'"' => Value::Str(p.string()?),
                b'-' | b'0'..=b'9' => Value::Int(p.integer()?),
                _ => {
                    p.skip()?;
                    Value::Other
                }
            };
            f(&key, v);
            p.ws();
            match p.peek()? {
                b',' => p.i += 1,
                b'}' => {
                    p.i += 1;
                    break;
                }
                _ => return None,
            }
        }
    }
    p.ws();
    (p.i == p.s.len()).then_some(())
}

/// Append `s` to `out` as a JSON string literal.
pub fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                use core::fmt::Write;
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
