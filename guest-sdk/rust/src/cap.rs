//! Capability calls. A request is a list of fields, framed as u32-LE length + bytes; the host
//! stages its reply and returns the staged length in a0 with bit 63 set for an error message and
//! bits 63 and 62 for a refusal (nothing ran); the SDK reads the reply back with
//! `berm.result.read` (docs/capabilities.md, src/wire/fields.ts). Here that becomes a
//! `Result<Vec<u8>, CapError>`: a capability error is an `Err`, never a trap.
use crate::sys::{call2, caps};
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

/// Bit 63 of a staged length: the reply is an error message.
pub const STAGED_ERROR: u64 = 1 << 63;
/// Bit 62 of a staged length (with bit 63): refused by policy, nothing ran.
pub const STAGED_REFUSED: u64 = 1 << 62;
/// The length bits of a staged length.
pub const STAGED_LEN_MASK: u64 = (1 << 62) - 1;

/// Why a capability call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CapError {
    /// refused by policy (not granted, over a limit, malformed request): nothing ran
    Refused(String),
    /// it ran and failed (the host's error message), or the reply could not be read
    Failed(String),
}

impl CapError {
    /// The message, refused or failed.
    pub fn message(&self) -> &str {
        match self {
            CapError::Refused(m) | CapError::Failed(m) => m,
        }
    }
    /// True for a refusal.
    pub fn is_refused(&self) -> bool {
        matches!(self, CapError::Refused(_))
    }
}

impl fmt::Display for CapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CapError::Refused(m) => write!(f, "refused: {}", m),
            CapError::Failed(m) => write!(f, "{}", m),
        }
    }
}

/// The result of a capability call.
pub type CapResult<T> = Result<T, CapError>;

/// Frame `fields` as the wire wants them: for each, its u32-LE length, then its bytes.
pub fn frame(fields: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::with_capacity(fields.iter().map(|f| 4 + f.len()).sum());
    for f in fields {
        out.extend_from_slice(&(f.len() as u32).to_le_bytes());
        out.extend_from_slice(f);
    }
    out
}

/// Split a framed reply into its fields; `None` when the framing is malformed.
pub fn fields(data: &[u8]) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < data.len() {
        let n = u32::from_le_bytes(data.get(at..at + 4)?.try_into().ok()?) as usize;
        at += 4;
        out.push(data.get(at..at.checked_add(n)?)?);
        at += n;
    }
    Some(out)
}

/// Call capability number `cap` (a [`crate::sys::caps`] constant) with `fields`: the staged reply
/// bytes, or the error / refusal message.
pub fn invoke(cap: u64, fields: &[&[u8]]) -> CapResult<Vec<u8>> {
    let req = frame(fields);
    let word = call2(cap, req.as_ptr() as u64, req.len() as u64);
    let n = (word & STAGED_LEN_MASK) as usize;
    let mut buf: Vec<u8> = Vec::new();
    if buf.try_reserve_exact(n).is_err() {
        return Err(CapError::Failed("berm sdk: out of heap for the reply".to_string()));
    }
    let got = call2(caps::RESULT_READ, buf.as_mut_ptr() as u64, n as u64) as usize;
    if got != n {
        return Err(CapError::Failed("berm sdk: berm.result.read length mismatch".to_string()));
    }
    // SAFETY: the host wrote n bytes.
    unsafe { buf.set_len(n) };
    if word & STAGED_REFUSED != 0 {
        Err(CapError::Refused(String::from_utf8_lossy(&buf).into_owned()))
    } else if word & STAGED_ERROR != 0 {
        Err(CapError::Failed(String::from_utf8_lossy(&buf).into_owned()))
    } else {
        Ok(buf)
    }
}

fn text(b: Vec<u8>) -> CapResult<String> {
    String::from_utf8(b).map_err(|_| CapError::Failed("berm sdk: the reply is not UTF-8".to_string()))
}

fn dec(b: &[u8]) -> CapResult<i64> {
    core::str::from_utf8(b)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| CapError::Failed("berm sdk: the reply is not a decimal integer".to_string()))
}

fn with_pairs<'a>(head: &[&'a [u8]], pairs: &[(&'a str, &'a str)]) -> Vec<&'a [u8]> {
    let mut f: Vec<&[u8]> = head.to_vec();
    for (k, v) in pairs {
        f.push(k.as_bytes());
        f.push(v.as_bytes());
    }
    f
}

/// Files under the granted root (`berm.fs.*`).
pub mod fs {
    use super::*;
    pub(crate) fn read_with(cap: u64, path: &str, offset: u64, limit: u64) -> CapResult<Vec<u8>> {
        let (o, l) = (offset.to_string(), limit.to_string());
        invoke(cap, &[path.as_bytes(), o.as_bytes(), l.as_bytes()])
    }
    pub(crate) fn write_with(cap: u64, path: &str, data: &[u8]) -> CapResult<u64> {
        Ok(dec(&invoke(cap, &[path.as_bytes(), data])?)? as u64)
    }
    /// Up to `limit` bytes of `path` from `offset` (limit 0: up to the host's cap).
    pub fn read(path: &str, offset: u64, limit: u64) -> CapResult<Vec<u8>> {
        read_with(caps::FS_READ, path, offset, limit)
    }
    /// Write `data` to `path` (creates parents, truncates): the number of bytes written.
    pub fn write(path: &str, data: &[u8]) -> CapResult<u64> {
        write_with(caps::FS_WRITE, path, data)
    }
    /// Relative paths matching `pattern` (`*`, `?`, `**`, `[..]`, `{a,b}`), sorted.
    pub fn glob(pattern: &str) -> CapResult<Vec<String>> {
        let t = text(invoke(caps::FS_GLOB, &[pattern.as_bytes()])?)?;
        Ok(t.lines().map(String::from).collect())
    }
    /// `path:line:text` lines matching `regex` in files matching `path_glob` ("" = `**`).
    pub fn grep(regex: &str, path_glob: &str) -> CapResult<Vec<String>> {
        let t = text(invoke(caps::FS_GREP, &[regex.as_bytes(), path_glob.as_bytes()])?)?;
        Ok(t.lines().map(String::from).collect())
    }
}

/// Shell commands under the granted root (`berm.exec.run`).
pub mod exec {
    use super::*;
    pub(crate) fn run_with(cap: u64, command: &str, cwd: &str, env: &[(&str, &str)]) -> CapResult<String> {
        text(invoke(cap, &with_pairs(&[command.as_bytes(), cwd.as_bytes()], env))?)
    }
    /// Run `command` with `/bin/sh -c` in `cwd` ("" = the root) with exactly the environment
    /// `env`: the JSON `{"stdout","stderr","exit_code","signal","truncated"}` text.
    pub fn run(command: &str, cwd: &str, env: &[(&str, &str)]) -> CapResult<String> {
        run_with(caps::EXEC_RUN, command, cwd, env)
    }
}

/// HTTP to the granted hosts (`berm.http.fetch`).
pub mod http {
    use super::*;
    /// A response: status, headers (`name: value` lines), body.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Response {
        /// HTTP status code
        pub status: u16,
        /// `name: value\n` lines (repeated headers repeat)
        pub headers: String,
        /// the body
        pub body: Vec<u8>,
    }
    pub(crate) fn fetch_with(
        cap: u64,
        method: &str,
        url: &str,
        body: &[u8],
        headers: &[(&str, &str)],
    ) -> CapResult<Response> {
        let r = invoke(cap, &with_pairs(&[method.as_bytes(), url.as_bytes(), body], headers))?;
        let bad = || CapError::Failed("berm sdk: the http reply is not (status, headers, body)".to_string());
        let f = fields(&r).ok_or_else(bad)?;
        if f.len() != 3 {
            return Err(bad());
        }
        Ok(Response {
            status: u16::try_from(dec(f[0])?).map_err(|_| bad())?,
            headers: String::from_utf8_lossy(f[1]).into_owned(),
            body: f[2].to_vec(),
        })
    }
    /// One request; redirects are returned, not followed.
    pub fn fetch(method: &str, url: &str, body: &[u8], headers: &[(&str, &str)]) -> CapResult<Response> {
        fetch_with(caps::HTTP_FETCH, method, url, body, headers)
    }
}

/// The wall clock (`berm.now`, `berm.clock.offset`).
pub mod clock {
    use super::*;
    /// UTC milliseconds since the Unix epoch.
    pub fn now_ms() -> CapResult<i64> {
        dec(&invoke(caps::NOW, &[])?)
    }
    /// Seconds east of UTC of the host's local zone now.
    pub fn offset_s() -> CapResult<i64> {
        dec(&invoke(caps::CLOCK_OFFSET, &[])?)
    }
}

/// The harness's key-value store (`berm.get`, `berm.set`, `berm.delete`).
pub mod storage {
    use super::*;
    /// The value of `key`, `None` when absent.
    ///
    /// The wire cannot tell an absent key from an empty value (both stage 0 bytes), so an empty
    /// value reads as `None` too.
    pub fn get(key: &str) -> CapResult<Option<Vec<u8>>> {
        let v = invoke(caps::GET, &[key.as_bytes()])?;
        Ok(if v.is_empty() { None } else { Some(v) })
    }
    /// Store `value` under `key`.
    pub fn set(key: &str, value: &[u8]) -> CapResult<()> {
        invoke(caps::SET, &[key.as_bytes(), value]).map(|_| ())
    }
    /// Remove `key`.
    pub fn delete(key: &str) -> CapResult<()> {
        invoke(caps::DELETE, &[key.as_bytes()]).map(|_| ())
    }
}

/// Tools of other harnesses (`berm.call`).
pub mod call {
    use super::*;
    /// Call `tool` of `harness` (a declared callee) with `args_json`: its result, or `Err` with its
    /// failure message (or why it could not run).
    pub fn tool(harness: &str, tool: &str, args_json: &str) -> CapResult<String> {
        text(invoke(caps::CALL, &[harness.as_bytes(), tool.as_bytes(), args_json.as_bytes()])?)
    }
}

/// The `crabtalk.*` capabilities: the same fields and replies as their `berm.*` counterparts.
pub mod crabtalk {
    use super::*;
    /// `crabtalk.fs.read`, as [`fs::read`].
    pub fn fs_read(path: &str, offset: u64, limit: u64) -> CapResult<Vec<u8>> {
        fs::read_with(caps::CRABTALK_FS_READ, path, offset, limit)
    }
    /// `crabtalk.fs.write`, as [`fs::write`].
    pub fn fs_write(path: &str, data: &[u8]) -> CapResult<u64> {
        fs::write_with(caps::CRABTALK_FS_WRITE, path, data)
    }
    /// `crabtalk.exec.run`, as [`exec::run`].
    pub fn exec_run(command: &str, cwd: &str, env: &[(&str, &str)]) -> CapResult<String> {
        exec::run_with(caps::CRABTALK_EXEC_RUN, command, cwd, env)
    }
    /// `crabtalk.http.fetch`, as [`http::fetch`].
    pub fn http_fetch(method: &str, url: &str, body: &[u8], headers: &[(&str, &str)]) -> CapResult<http::Response> {
        http::fetch_with(caps::CRABTALK_HTTP_FETCH, method, url, body, headers)
    }
}
