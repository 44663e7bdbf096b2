//! The protocol door (docs/protocol-door.md): a harness granted protocol groups talks to the
//! crabtalk agent daemon in the daemon's own protobuf messages (src/protocol/crabtalk.proto). This
//! module has a tiny protobuf writer and reader, the door itself ([`call`]: one encoded
//! ClientMessage through `crabtalk.protocol.call`; [`op`]: one host function per operation) and
//! typed wrappers for what harnesses usually do, mirroring the C SDK's berm_protocol.h.
use crate::cap::{invoke, CapError};
use crate::sys::caps;
use alloc::string::{String, ToString};
use alloc::vec::Vec;

/// A protobuf message being written.
#[derive(Default, Debug, Clone)]
pub struct Pb {
    /// the encoded bytes so far
    pub buf: Vec<u8>,
}

impl Pb {
    /// An empty message.
    pub fn new() -> Pb {
        Pb::default()
    }
    fn uvarint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.buf.push(v as u8);
    }
    /// Field `field` as a varint (uint32/uint64/bool/enum), written even when zero.
    pub fn varint(&mut self, field: u32, v: u64) -> &mut Pb {
        self.uvarint((field as u64) << 3);
        self.uvarint(v);
        self
    }
    /// Field `field` as length-delimited bytes.
    pub fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Pb {
        self.uvarint(((field as u64) << 3) | 2);
        self.uvarint(b.len() as u64);
        self.buf.extend_from_slice(b);
        self
    }
    /// Field `field` as a string.
    pub fn str(&mut self, field: u32, s: &str) -> &mut Pb {
        self.bytes(field, s.as_bytes())
    }
    /// Field `field` holding the message `sub`.
    pub fn msg(&mut self, field: u32, sub: &Pb) -> &mut Pb {
        self.bytes(field, &sub.buf)
    }
}

/// One field read from a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// field number
    pub num: u32,
    /// 0 varint, 1 fixed64, 2 length-delimited, 5 fixed32
    pub wire: u32,
    /// the value of a varint or fixed field
    pub varint: u64,
    /// the payload of a length-delimited field
    pub bytes: &'a [u8],
}

/// The fields of `msg` in order; `None` when it is malformed (truncated, bad wire type, varint
/// too long, field number 0).
pub fn parse(msg: &[u8]) -> Option<Vec<Field<'_>>> {
    fn uvarint(m: &[u8], at: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = *m.get(*at)?;
            *at += 1;
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                return Some(v);
            }
        }
        None
    }
    let mut out = Vec::new();
    let mut at = 0;
    while at < msg.len() {
        let key = uvarint(msg, &mut at)?;
        let (num, wire) = ((key >> 3) as u32, (key & 7) as u32);
        if num == 0 {
            return None;
        }
        let mut f = Field { num, wire, varint: 0, bytes: &[] };
        match wire {
            0 => f.varint = uvarint(msg, &mut at)?,
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                let b = msg.get(at..at + n)?;
                f.varint = b.iter().rev().fold(0u64, |v, x| (v << 8) | *x as u64);
                at += n;
            }
            2 => {
                let n = uvarint(msg, &mut at)? as usize;
                f.bytes = msg.get(at..at.checked_add(n)?)?;
                at += n;
            }
            _ => return None,
        }
        out.push(f);
    }
    Some(out)
}

/// The last occurrence of field `num` in `msg` (proto3: the last one wins).
pub fn find(msg: &[u8], num: u32) -> Option<Field<'_>> {
    parse(msg)?.into_iter().filter(|f| f.num == num).last()
}

/// A string field ("" when absent or not length-delimited).
pub fn string(msg: &[u8], num: u32) -> String {
    match find(msg, num) {
        Some(f) if f.wire == 2 => String::from_utf8_lossy(f.bytes).into_owned(),
        _ => String::new(),
    }
}

/// ServerMessage members (field numbers) a harness meets.
pub mod kind {
    /// ErrorMsg
    pub const ERROR: u32 = 1;
    /// Pong
    pub const PONG: u32 = 2;
    /// SendResponse
    pub const RESPONSE: u32 = 3;
    /// AgentInfo
    pub const AGENT_INFO: u32 = 11;
    /// AgentList
    pub const AGENT_LIST: u32 = 12;
    /// SkillList
    pub const SKILL_LIST: u32 = 15;
    /// Stats
    pub const STATS: u32 = 20;
    /// SubscriptionInfo
    pub const SUBSCRIPTION_INFO: u32 = 25;
    /// SubscriptionList
    pub const SUBSCRIPTION_LIST: u32 = 26;
    /// SkillBody
    pub const SKILL_BODY: u32 = 31;
    /// SessionHits
    pub const SESSION_HITS: u32 = 32;
    /// berm's own: the body is a BermServerMessage
    pub const BERM: u32 = 1000;
}

/// An answer of the door: which ServerMessage member and its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// the ServerMessage member answered (a [`kind`] constant)
    pub kind: u32,
    /// that member's encoded body
    pub body: Vec<u8>,
    /// the whole encoded ServerMessage
    pub raw: Vec<u8>,
}

/// Why a door call did not succeed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DoorError {
    /// the door refused: nothing was sent
    Refused(String),
    /// the call failed (timeout, daemon down, malformed answer)
    Failed(String),
    /// the daemon answered with an ErrorMsg
    Daemon {
        /// ErrorMsg.code
        code: u32,
        /// ErrorMsg.message
        message: String,
    },
}

impl core::fmt::Display for DoorError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DoorError::Refused(m) => write!(f, "refused: {}", m),
            DoorError::Failed(m) => write!(f, "{}", m),
            DoorError::Daemon { code, message } => write!(f, "daemon error {}: {}", code, message),
        }
    }
}

/// The result of a door call.
pub type DoorResult<T> = Result<T, DoorError>;

fn answer(r: Result<Vec<u8>, CapError>) -> DoorResult<Reply> {
    let raw = match r {
        Ok(b) => b,
        Err(CapError::Refused(m)) => return Err(DoorError::Refused(m)),
        Err(CapError::Failed(m)) => return Err(DoorError::Failed(m)),
    };
    let bad = || DoorError::Failed("berm sdk: the door's answer is not a ServerMessage".to_string());
    let fields = parse(&raw).ok_or_else(bad)?;
    let last = fields.iter().filter(|f| f.wire == 2).last().ok_or_else(bad)?;
    let (kind, body) = (last.num, last.bytes.to_vec());
    if kind == kind::ERROR {
        let code = find(&body, 1).map(|f| f.varint as u32).unwrap_or(0);
        return Err(DoorError::Daemon { code, message: string(&body, 2) });
    }
    Ok(Reply { kind, body, raw })
}

/// Upstream's single door: an encoded ClientMessage through `crabtalk.protocol.call`.
pub fn call(client_message: &[u8]) -> DoorResult<Reply> {
    answer(invoke(caps::PROTOCOL_CALL, &[client_message]))
}

/// One operation's host function (a `caps::PROTOCOL_*` constant) with its encoded inner message
/// (may be empty).
pub fn op(cap: u64, inner: &[u8]) -> DoorResult<Reply> {
    if inner.is_empty() {
        answer(invoke(cap, &[]))
    } else {
        answer(invoke(cap, &[inner]))
    }
}

/// protocol:read: ping the daemon.
pub fn ping() -> DoorResult<Reply> {
    op(caps::PROTOCOL_PING, &[])
}

/// protocol:send: send `content` to the invoking agent in the invocation's session; the answer's
/// text (SendResponse.content).
pub fn send(content: &str) -> DoorResult<String> {
    send_to(None, None, content)
}

/// protocol:send to another agent the declaration grants (`agent` ULID; `session` optional).
pub fn send_to(agent: Option<&str>, session: Option<&str>, content: &str) -> DoorResult<String> {
    let mut m = Pb::new();
    if let Some(a) = agent {
        m.str(1, a);
    }
    m.str(2, content);
    if let Some(s) = session {
        m.str(9, s);
    }
    let r = op(caps::PROTOCOL_SEND, &m.buf)?;
    if r.kind != kind::RESPONSE {
        return Err(DoorError::Failed("berm sdk: the answer to send is not a SendResponse".to_string()));
    }
    Ok(string(&r.body, 2))
}

/// An agent (AgentInfo; its config is always blank: the door redacts it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    /// ULID
    pub id: String,
    /// name
    pub name: String,
    /// description
    pub description: String,
    /// model
    pub model: String,
}

/// protocol:read: the agent named `name`.
pub fn get_agent(name: &str) -> DoorResult<AgentInfo> {
    let mut m = Pb::new();
    m.str(1, name);
    let r = op(caps::PROTOCOL_GET_AGENT, &m.buf)?;
    if r.kind != kind::AGENT_INFO {
        return Err(DoorError::Failed("berm sdk: the answer is not an AgentInfo".to_string()));
    }
    let b = &r.body;
    Ok(AgentInfo { id: string(b, 12), name: string(b, 1), description: string(b, 2), model: string(b, 4) })
}

/// A wake armed through the door (BermServerMessage.wake).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeInfo {
    /// wake id
    pub id: String,
    /// harness
    pub harness: String,
    /// entry export
    pub entry: String,
    /// due, ms since the Unix epoch
    pub at_ms: u64,
    /// payload
    pub payload: String,
}

fn berm_member(r: &Reply, num: u32) -> Option<Vec<u8>> {
    if r.kind != kind::BERM {
        return None;
    }
    find(&r.body, num).filter(|f| f.wire == 2).map(|f| f.bytes.to_vec())
}

/// protocol:schedule: wake this harness's `on_wake` at `at_ms` (ms since the Unix epoch), or
/// `delay_ms` from now when `at_ms` is 0, with `payload`; `id` re-arms that wake.
pub fn schedule_wake(at_ms: u64, delay_ms: u64, payload: Option<&str>, id: Option<&str>) -> DoorResult<WakeInfo> {
    let mut m = Pb::new();
    if at_ms != 0 {
        m.varint(1, at_ms);
    }
    if let Some(p) = payload {
        m.str(4, p);
    }
    if let Some(i) = id {
        m.str(5, i);
    }
    if at_ms == 0 {
        m.varint(6, delay_ms);
    }
    let r = op(caps::PROTOCOL_SCHEDULE_WAKE, &m.buf)?;
    let w = berm_member(&r, 1)
        .ok_or_else(|| DoorError::Failed("berm sdk: the answer is not a wake".to_string()))?;
    Ok(WakeInfo {
        id: string(&w, 1),
        harness: string(&w, 2),
        entry: string(&w, 3),
        at_ms: find(&w, 4).map(|f| f.varint).unwrap_or(0),
        payload: string(&w, 5),
    })
}

/// protocol:schedule: cancel wake `id` of this harness; true when one was pending.
pub fn cancel_wake(id: &str) -> DoorResult<bool> {
    let mut m = Pb::new();
    m.str(1, id);
    let r = op(caps::PROTOCOL_CANCEL_WAKE, &m.buf)?;
    Ok(berm_member(&r, 3).and_then(|c| find(&c, 2).map(|f| f.varint != 0)).unwrap_or(false))
}

/// protocol:events: subscribe this harness (its `on_notify`) to `source`; the subscription id.
pub fn subscribe_event(source: &str, once: bool) -> DoorResult<u64> {
    let mut m = Pb::new();
    m.str(1, source);
    if once {
        m.varint(3, 1);
    }
    let r = op(caps::PROTOCOL_SUBSCRIBE_EVENT, &m.buf)?;
    if r.kind != kind::SUBSCRIPTION_INFO {
        return Err(DoorError::Failed("berm sdk: the answer is not a SubscriptionInfo".to_string()));
    }
    Ok(find(&r.body, 1).map(|f| f.varint).unwrap_or(0))
}

/// protocol:events: publish an event (to the daemon's bus and to subscribed harnesses).
pub fn publish_event(source: &str, payload: &str) -> DoorResult<Reply> {
    let mut m = Pb::new();
    m.str(1, source);
    m.str(2, payload);
    op(caps::PROTOCOL_PUBLISH_EVENT, &m.buf)
}
