//! memcached's UDP protocol, as an unmodified memcached client speaks it: the 8-byte UDP
//! frame header (request id, sequence number, datagrams in the message, reserved), then one
//! request in the ASCII protocol (`get`/`gets` of one key or more, `set`, `add`, `replace`,
//! `cas`, `delete`, `version`) or the binary one (GET, GETK and their quiet forms, SET, ADD,
//! REPLACE and theirs, DELETE, NOOP, VERSION). Requests are parsed in place (keys and values
//! borrow the datagram); what cannot be served is a [`Malformed`] reason, answered with
//! memcached's error reply and counted by the caller.

/// Bytes of memcached's UDP frame header.
pub const FRAME_HEADER: usize = 8;
/// memcached's UDP port.
pub const PORT: u16 = 11211;
/// Bytes of a reply datagram's payload after the frame header at most (memcached's
/// `UDP_MAX_PAYLOAD_SIZE`, 1400, less the header): a longer reply is split into datagrams.
pub const MAX_REPLY_CHUNK: usize = 1400 - FRAME_HEADER;
/// The binary protocol's request and response magic bytes.
const BINARY_REQUEST: u8 = 0x80;
const BINARY_RESPONSE: u8 = 0x81;
/// Bytes of a binary header.
const BINARY_HEADER: usize = 24;

/// The UDP frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// The client's request id, echoed in every datagram of the reply.
    pub request_id: u16,
    /// Datagram number within the message.
    pub sequence: u16,
    /// Datagrams in the message.
    pub datagrams: u16,
}

impl FrameHeader {
    /// The header of `datagram`, and the request after it; `None` if it is shorter than a
    /// header (memcached drops such datagrams without a word: there is no id to answer).
    pub fn split(datagram: &[u8]) -> Option<(FrameHeader, &[u8])> {
        let h = datagram.get(..FRAME_HEADER)?;
        let be = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
        Some((
            FrameHeader { request_id: be(0), sequence: be(2), datagrams: be(4) },
            &datagram[FRAME_HEADER..],
        ))
    }

    /// Writes the header of datagram `sequence` of `datagrams` of the reply to `request_id`.
    pub fn write(out: &mut [u8], request_id: u16, sequence: u16, datagrams: u16) {
        out[0..2].copy_from_slice(&request_id.to_be_bytes());
        out[2..4].copy_from_slice(&sequence.to_be_bytes());
        out[4..6].copy_from_slice(&datagrams.to_be_bytes());
        out[6..8].copy_from_slice(&[0, 0]);
    }
}

/// Which protocol a request came in (its reply goes out in the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Text lines.
    Ascii,
    /// 24-byte headers; the request's opcode and opaque are echoed.
    Binary {
        /// The request's opcode.
        opcode: u8,
        /// The request's opaque word.
        opaque: u32,
    },
}

/// What a storage command asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    /// `set`.
    Set,
    /// `add`.
    Add,
    /// `replace`.
    Replace,
    /// `cas`, with the CAS unique the client read.
    Cas(u64),
}

/// A request, borrowing the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request<'a> {
    /// Values of one key or more (`keys`: ASCII, separated by spaces; binary, one key).
    Get {
        /// The keys as they came.
        keys: &'a [u8],
        /// `gets`: with CAS uniques. Binary GETK: with the key.
        with_cas_or_key: bool,
        /// Binary GETQ/GETKQ: nothing on a miss.
        quiet: bool,
    },
    /// A storage command.
    Store {
        /// What it asks.
        kind: StoreKind,
        /// Its key.
        key: &'a [u8],
        /// Client flags.
        flags: u32,
        /// memcached's exptime as sent (0: never; up to 30 days: seconds from now; more: a
        /// Unix time; negative: already expired).
        exptime: i64,
        /// The value.
        value: &'a [u8],
        /// `noreply` (binary: the quiet opcodes).
        quiet: bool,
    },
    /// `delete`.
    Delete {
        /// The key.
        key: &'a [u8],
        /// `noreply`.
        quiet: bool,
    },
    /// `version`.
    Version,
    /// Binary NOOP.
    Noop,
}

/// Why a request cannot be served, each answered with memcached's reply for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Malformed {
    /// More than one datagram (memcached takes single-datagram requests only).
    MultiDatagram,
    /// No line end, or a binary header or body cut short.
    Truncated,
    /// A command memcached does not know (or this server does not serve).
    UnknownCommand,
    /// Arguments missing or not numbers.
    BadCommandLine,
    /// A key longer than 250 bytes (or empty).
    KeyTooLong,
    /// A storage command's data not followed by `\r\n`, or shorter than announced.
    BadDataChunk,
}

impl Malformed {
    /// Every reason, for reports.
    pub const ALL: [Malformed; 6] = [
        Malformed::MultiDatagram,
        Malformed::Truncated,
        Malformed::UnknownCommand,
        Malformed::BadCommandLine,
        Malformed::KeyTooLong,
        Malformed::BadDataChunk,
    ];

    /// Its place in [`Malformed::ALL`] (and in counters kept in that order).
    pub fn index(self) -> usize {
        self as usize
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Malformed::MultiDatagram => "multi_datagram",
            Malformed::Truncated => "truncated",
            Malformed::UnknownCommand => "unknown_command",
            Malformed::BadCommandLine => "bad_command_line",
            Malformed::KeyTooLong => "key_too_long",
            Malformed::BadDataChunk => "bad_data_chunk",
        }
    }

    /// memcached's ASCII reply.
    fn ascii_reply(self) -> &'static [u8] {
        match self {
            Malformed::MultiDatagram => b"SERVER_ERROR multi-packet request not supported\r\n",
            Malformed::UnknownCommand => b"ERROR\r\n",
            Malformed::KeyTooLong | Malformed::BadCommandLine | Malformed::Truncated => {
                b"CLIENT_ERROR bad command line format\r\n"
            }
            Malformed::BadDataChunk => b"CLIENT_ERROR bad data chunk\r\n",
        }
    }

    /// The binary protocol's status.
    fn binary_status(self) -> u16 {
        match self {
            Malformed::UnknownCommand => status::UNKNOWN_COMMAND,
            _ => status::INVALID_ARGUMENTS,
        }
    }
}

/// Binary response statuses.
pub mod status {
    /// No error.
    pub const OK: u16 = 0x0000;
    /// Key not found.
    pub const NOT_FOUND: u16 = 0x0001;
    /// Key exists (`add`, `cas`).
    pub const EXISTS: u16 = 0x0002;
    /// Value too large.
    pub const TOO_LARGE: u16 = 0x0003;
    /// Invalid arguments.
    pub const INVALID_ARGUMENTS: u16 = 0x0004;
    /// Item not stored (`replace` of an absent key).
    pub const NOT_STORED: u16 = 0x0005;
    /// Unknown command.
    pub const UNKNOWN_COMMAND: u16 = 0x0081;

    /// The message memcached puts in an error response's body for `status` (its
    /// `write_bin_error`), so that clients that show it show memcached's words.
    pub fn text(status: u16) -> &'static [u8] {
        match status {
            OK => b"",
            NOT_FOUND => b"Not found",
            EXISTS => b"Data exists for key.",
            TOO_LARGE => b"Too large.",
            INVALID_ARGUMENTS => b"Invalid arguments",
            NOT_STORED => b"Not stored.",
            UNKNOWN_COMMAND => b"Unknown command",
            _ => b"UNHANDLED ERROR",
        }
    }
}

/// Parses one request (after the frame header) and says which protocol answers it.
pub fn parse(request: &[u8]) -> (Protocol, Result<Request<'_>, Malformed>) {
    if request.first() == Some(&BINARY_REQUEST) {
        parse_binary(request)
    } else {
        (Protocol::Ascii, parse_ascii(request))
    }
}

/// The key a request would be steered by: the first key of an ASCII command with one (its
/// second word), or a binary request's key. What the XDP program hashes, on the same bytes.
pub fn steering_key(request: &[u8]) -> Option<&[u8]> {
    if request.first() == Some(&BINARY_REQUEST) {
        let h = request.get(..BINARY_HEADER)?;
        let key_len = u16::from_be_bytes([h[2], h[3]]) as usize;
        let start = BINARY_HEADER + h[4] as usize;
        return request.get(start..start + key_len).filter(|k| !k.is_empty());
    }
    let space = request.iter().take(8).position(|&b| b == b' ')?;
    let rest = &request[space + 1..];
    let end = rest.iter().position(|&b| matches!(b, b' ' | b'\r' | b'\n')).unwrap_or(rest.len());
    Some(&rest[..end]).filter(|k| !k.is_empty() && k.len() <= super::store::MAX_KEY)
}

fn parse_ascii(request: &[u8]) -> Result<Request<'_>, Malformed> {
    let line_end = request.windows(2).position(|w| w == b"\r\n");
    let (line, after) = match line_end {
        Some(e) => (&request[..e], &request[e + 2..]),
        // memcached also takes a bare "\n".
        None => match request.iter().position(|&b| b == b'\n') {
            Some(e) => (&request[..e], &request[e + 1..]),
            None => return Err(Malformed::Truncated),
        },
    };
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty());
    let command = words.next().ok_or(Malformed::UnknownCommand)?;
    match command {
        b"get" | b"gets" => {
            let start = command.len() + 1;
            let keys = line.get(start..).ok_or(Malformed::BadCommandLine)?;
            let mut any = false;
            for k in keys.split(|&b| b == b' ').filter(|w| !w.is_empty()) {
                key(Some(k))?;
                any = true;
            }
            if !any {
                return Err(Malformed::BadCommandLine);
            }
            Ok(Request::Get { keys, with_cas_or_key: command == b"gets", quiet: false })
        }
        b"set" | b"add" | b"replace" | b"cas" => {
            let k = key(words.next())?;
            let flags = number::<u32>(words.next())?;
            let exptime = number::<i64>(words.next())?;
            let bytes = number::<usize>(words.next())?;
            let kind = match command {
                b"set" => StoreKind::Set,
                b"add" => StoreKind::Add,
                b"replace" => StoreKind::Replace,
                _ => StoreKind::Cas(number::<u64>(words.next())?),
            };
            let quiet = noreply(words.next())?;
            if after.len() < bytes + 2 {
                return Err(Malformed::BadDataChunk);
            }
            if &after[bytes..bytes + 2] != b"\r\n" {
                return Err(Malformed::BadDataChunk);
            }
            Ok(Request::Store { kind, key: k, flags, exptime, value: &after[..bytes], quiet })
        }
        b"delete" => {
            let k = key(words.next())?;
            // memcached still takes a trailing 0 (a removed hold time) before noreply.
            let mut next = words.next();
            if next == Some(b"0") {
                next = words.next();
            }
            Ok(Request::Delete { key: k, quiet: noreply(next)? })
        }
        b"version" => Ok(Request::Version),
        _ => Err(Malformed::UnknownCommand),
    }
}

/// A command's key: present, and no longer than memcached takes.
fn key(word: Option<&[u8]>) -> Result<&[u8], Malformed> {
    let k = word.ok_or(Malformed::BadCommandLine)?;
    if k.len() > super::store::MAX_KEY {
        Err(Malformed::KeyTooLong)
    } else {
        Ok(k)
    }
}

fn number<T: std::str::FromStr>(word: Option<&[u8]>) -> Result<T, Malformed> {
    let w = word.ok_or(Malformed::BadCommandLine)?;
    std::str::from_utf8(w).ok().and_then(|s| s.parse().ok()).ok_or(Malformed::BadCommandLine)
}

fn noreply(word: Option<&[u8]>) -> Result<bool, Malformed> {
    match word {
        None => Ok(false),
        Some(b"noreply") => Ok(true),
        Some(_) => Err(Malformed::BadCommandLine),
    }
}

/// Binary protocol opcodes this server serves.
pub mod opcode {
    /// GET.
    pub const GET: u8 = 0x00;
    /// SET.
    pub const SET: u8 = 0x01;
    /// ADD.
    pub const ADD: u8 = 0x02;
    /// REPLACE.
    pub const REPLACE: u8 = 0x03;
    /// DELETE.
    pub const DELETE: u8 = 0x04;
    /// GET, quiet (nothing on a miss).
    pub const GETQ: u8 = 0x09;
    /// NOOP.
    pub const NOOP: u8 = 0x0a;
    /// VERSION.
    pub const VERSION: u8 = 0x0b;
    /// GET with the key in the reply.
    pub const GETK: u8 = 0x0c;
    /// GETK, quiet.
    pub const GETKQ: u8 = 0x0d;
    /// SET, quiet.
    pub const SETQ: u8 = 0x11;
    /// ADD, quiet.
    pub const ADDQ: u8 = 0x12;
    /// REPLACE, quiet.
    pub const REPLACEQ: u8 = 0x13;
    /// DELETE, quiet.
    pub const DELETEQ: u8 = 0x14;
}

fn parse_binary(request: &[u8]) -> (Protocol, Result<Request<'_>, Malformed>) {
    let Some(h) = request.get(..BINARY_HEADER) else {
        return (
            Protocol::Binary { opcode: request.get(1).copied().unwrap_or(0), opaque: 0 },
            Err(Malformed::Truncated),
        );
    };
    let op = h[1];
    let key_len = u16::from_be_bytes([h[2], h[3]]) as usize;
    let extras_len = h[4] as usize;
    let body_len = u32::from_be_bytes([h[8], h[9], h[10], h[11]]) as usize;
    let opaque = u32::from_be_bytes([h[12], h[13], h[14], h[15]]);
    let cas = u64::from_be_bytes(h[16..24].try_into().expect("8 bytes"));
    let protocol = Protocol::Binary { opcode: op, opaque };
    let parsed = (|| {
        let body = request.get(BINARY_HEADER..BINARY_HEADER + body_len).ok_or(Malformed::Truncated)?;
        if extras_len + key_len > body_len {
            return Err(Malformed::BadCommandLine);
        }
        let extras = &body[..extras_len];
        let key = &body[extras_len..extras_len + key_len];
        let value = &body[extras_len + key_len..];
        if key.len() > super::store::MAX_KEY {
            return Err(Malformed::KeyTooLong);
        }
        let needs_key = |k: &[u8]| if k.is_empty() { Err(Malformed::BadCommandLine) } else { Ok(()) };
        match op {
            opcode::GET | opcode::GETQ | opcode::GETK | opcode::GETKQ => {
                needs_key(key)?;
                Ok(Request::Get {
                    keys: key,
                    with_cas_or_key: matches!(op, opcode::GETK | opcode::GETKQ),
                    quiet: matches!(op, opcode::GETQ | opcode::GETKQ),
                })
            }
            opcode::SET | opcode::ADD | opcode::REPLACE | opcode::SETQ | opcode::ADDQ | opcode::REPLACEQ => {
                needs_key(key)?;
                if extras.len() != 8 {
                    return Err(Malformed::BadCommandLine);
                }
                let flags = u32::from_be_bytes(extras[0..4].try_into().expect("4 bytes"));
                let exptime = u32::from_be_bytes(extras[4..8].try_into().expect("4 bytes")) as i64;
                let kind = match op {
                    opcode::SET | opcode::SETQ if cas != 0 => StoreKind::Cas(cas),
                    opcode::SET | opcode::SETQ => StoreKind::Set,
                    opcode::ADD | opcode::ADDQ => StoreKind::Add,
                    _ => StoreKind::Replace,
                };
                let quiet = matches!(op, opcode::SETQ | opcode::ADDQ | opcode::REPLACEQ);
                Ok(Request::Store { kind, key, flags, exptime, value, quiet })
            }
            opcode::DELETE | opcode::DELETEQ => {
                needs_key(key)?;
                Ok(Request::Delete { key, quiet: op == opcode::DELETEQ })
            }
            opcode::NOOP => Ok(Request::Noop),
            opcode::VERSION => Ok(Request::Version),
            _ => Err(Malformed::UnknownCommand),
        }
    })();
    (protocol, parsed)
}

/// The server's version string.
pub const VERSION: &str = concat!("hyflow-kvs ", env!("CARGO_PKG_VERSION"));

/// Writes replies in one protocol into a buffer the caller keeps (cleared per request, so
/// that serving allocates nothing once it has grown).
pub struct ReplyWriter<'a> {
    /// The reply so far.
    pub out: &'a mut Vec<u8>,
    /// The protocol answering.
    pub protocol: Protocol,
}

impl ReplyWriter<'_> {
    /// An error reply for `why`.
    pub fn malformed(&mut self, why: Malformed) {
        match self.protocol {
            Protocol::Ascii => self.out.extend_from_slice(why.ascii_reply()),
            Protocol::Binary { .. } => {
                let code = why.binary_status();
                self.binary(code, 0, &[], &[], status::text(code))
            }
        }
    }

    /// A value found by a get (`key` given for `gets`-style replies that carry it).
    pub fn value(&mut self, key: &[u8], flags: u32, cas: u64, value: &[u8], with_cas_or_key: bool) {
        match self.protocol {
            Protocol::Ascii => {
                self.out.extend_from_slice(b"VALUE ");
                self.out.extend_from_slice(key);
                self.out.push(b' ');
                push_decimal(self.out, flags as u64);
                self.out.push(b' ');
                push_decimal(self.out, value.len() as u64);
                if with_cas_or_key {
                    self.out.push(b' ');
                    push_decimal(self.out, cas);
                }
                self.out.extend_from_slice(b"\r\n");
                self.out.extend_from_slice(value);
                self.out.extend_from_slice(b"\r\n");
            }
            Protocol::Binary { .. } => {
                let key = if with_cas_or_key { key } else { &[] };
                self.binary(status::OK, cas, &flags.to_be_bytes(), key, value)
            }
        }
    }

    /// A get's miss (binary: a NOT_FOUND unless quiet; ASCII: nothing, the END says it).
    pub fn miss(&mut self, key: &[u8], with_key: bool, quiet: bool) {
        if let Protocol::Binary { .. } = self.protocol {
            if !quiet {
                let key = if with_key { key } else { &[] };
                self.binary(status::NOT_FOUND, 0, &[], key, status::text(status::NOT_FOUND));
            }
        }
    }

    /// The end of a get's values (ASCII `END`).
    pub fn end_of_values(&mut self) {
        if self.protocol == Protocol::Ascii {
            self.out.extend_from_slice(b"END\r\n");
        }
    }

    /// A storage or delete command's answer: `ascii` as the text protocol says it, `status`
    /// (and `cas`) as the binary one does, with memcached's message for an error.
    pub fn answer(&mut self, ascii: &[u8], status: u16, cas: u64) {
        match self.protocol {
            Protocol::Ascii => self.out.extend_from_slice(ascii),
            Protocol::Binary { .. } => self.binary(status, cas, &[], &[], self::status::text(status)),
        }
    }

    /// `version`.
    pub fn version(&mut self) {
        match self.protocol {
            Protocol::Ascii => {
                self.out.extend_from_slice(b"VERSION ");
                self.out.extend_from_slice(VERSION.as_bytes());
                self.out.extend_from_slice(b"\r\n");
            }
            Protocol::Binary { .. } => self.binary(status::OK, 0, &[], &[], VERSION.as_bytes()),
        }
    }

    /// NOOP's empty answer.
    pub fn noop(&mut self) {
        self.binary(status::OK, 0, &[], &[], &[]);
    }

    fn binary(&mut self, status: u16, cas: u64, extras: &[u8], key: &[u8], value: &[u8]) {
        let Protocol::Binary { opcode, opaque } = self.protocol else { return };
        let body = extras.len() + key.len() + value.len();
        self.out.push(BINARY_RESPONSE);
        self.out.push(opcode);
        self.out.extend_from_slice(&(key.len() as u16).to_be_bytes());
        self.out.push(extras.len() as u8);
        self.out.push(0);
        self.out.extend_from_slice(&status.to_be_bytes());
        self.out.extend_from_slice(&(body as u32).to_be_bytes());
        self.out.extend_from_slice(&opaque.to_be_bytes());
        self.out.extend_from_slice(&cas.to_be_bytes());
        self.out.extend_from_slice(extras);
        self.out.extend_from_slice(key);
        self.out.extend_from_slice(value);
    }
}

/// Appends `n` in decimal (no allocation: replies and requests are written per request).
pub(crate) fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_commands_parse_in_place() {
        let (p, r) = parse(b"set k 5 0 3\r\nabc\r\n");
        assert_eq!(p, Protocol::Ascii);
        assert_eq!(
            r,
            Ok(Request::Store {
                kind: StoreKind::Set,
                key: b"k",
                flags: 5,
                exptime: 0,
                value: b"abc",
                quiet: false
            })
        );
        assert_eq!(
            parse(b"get a bb\r\n").1,
            Ok(Request::Get { keys: b"a bb", with_cas_or_key: false, quiet: false })
        );
        assert_eq!(parse(b"delete a noreply\r\n").1, Ok(Request::Delete { key: b"a", quiet: true }));
        assert!(matches!(
            parse(b"cas k 0 0 1 77\r\nx\r\n").1,
            Ok(Request::Store { kind: StoreKind::Cas(77), .. })
        ));
    }

    #[test]
    fn malformed_ascii_is_named() {
        let long = [b"get ".as_slice(), &[b'x'; 251], b"\r\n"].concat();
        assert_eq!(parse(&long).1, Err(Malformed::KeyTooLong));
        assert_eq!(parse(b"get a").1, Err(Malformed::Truncated));
        assert_eq!(parse(b"flush_all\r\n").1, Err(Malformed::UnknownCommand));
        assert_eq!(parse(b"set k x 0 3\r\nabc\r\n").1, Err(Malformed::BadCommandLine));
        assert_eq!(parse(b"set k 0 0 3\r\nabcd\r\n").1, Err(Malformed::BadDataChunk));
        assert_eq!(parse(b"set k 0 0 9\r\nabc\r\n").1, Err(Malformed::BadDataChunk));
        assert_eq!(parse(b"get\r\n").1, Err(Malformed::BadCommandLine));
    }

    #[test]
    fn binary_requests_parse_and_answer() {
        let mut req =
            vec![0x80, opcode::SET, 0, 1, 8, 0, 0, 0, 0, 0, 0, 11, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0];
        req.extend_from_slice(&[0, 0, 0, 7, 0, 0, 0, 0, b'k', b'a', b'b']);
        let (p, r) = parse(&req);
        assert_eq!(p, Protocol::Binary { opcode: opcode::SET, opaque: 9 });
        assert_eq!(
            r,
            Ok(Request::Store {
                kind: StoreKind::Set,
                key: b"k",
                flags: 7,
                exptime: 0,
                value: b"ab",
                quiet: false
            })
        );
        assert_eq!(steering_key(&req), Some(b"k".as_slice()));
        let mut out = Vec::new();
        ReplyWriter { out: &mut out, protocol: p }.answer(b"STORED\r\n", status::OK, 42);
        assert_eq!(out.len(), 24);
        assert_eq!(out[0], 0x81);
        assert_eq!(&out[12..16], &9u32.to_be_bytes());
        assert_eq!(&out[16..24], &42u64.to_be_bytes());
        assert_eq!(parse(&req[..20]).1, Err(Malformed::Truncated));
        req[1] = 0x30;
        assert_eq!(parse(&req).1, Err(Malformed::UnknownCommand));
        // Errors carry memcached's own messages (its `write_bin_error`; an ADD of a present
        // key compared with a real memcached's answer to memccp --binary).
        let body = |out: &[u8]| out[24..].to_vec();
        let mut out = Vec::new();
        ReplyWriter { out: &mut out, protocol: p }.answer(b"NOT_STORED\r\n", status::EXISTS, 0);
        assert_eq!((&out[6..8], body(&out)), (&[0, 2][..], b"Data exists for key.".to_vec()));
        out.clear();
        ReplyWriter { out: &mut out, protocol: p }.malformed(Malformed::UnknownCommand);
        assert_eq!((&out[6..8], body(&out)), (&[0, 0x81][..], b"Unknown command".to_vec()));
        out.clear();
        ReplyWriter { out: &mut out, protocol: p }.malformed(Malformed::Truncated);
        assert_eq!((&out[6..8], body(&out)), (&[0, 4][..], b"Invalid arguments".to_vec()));
    }

    #[test]
    fn reasons_index_their_place_in_all() {
        for (i, m) in Malformed::ALL.iter().enumerate() {
            assert_eq!(m.index(), i, "{m:?}");
        }
    }

    #[test]
    fn steering_keys_are_the_second_word() {
        assert_eq!(steering_key(b"get abc def\r\n"), Some(b"abc".as_slice()));
        assert_eq!(steering_key(b"set abc 0 0 1\r\nx\r\n"), Some(b"abc".as_slice()));
        assert_eq!(steering_key(b"version\r\n"), None);
    }

    #[test]
    fn ascii_values_are_memcacheds_lines() {
        let mut out = Vec::new();
        let mut w = ReplyWriter { out: &mut out, protocol: Protocol::Ascii };
        w.value(b"k", 12, 99, b"vv", false);
        w.value(b"k", 0, 99, b"", true);
        w.end_of_values();
        assert_eq!(out, b"VALUE k 12 2\r\nvv\r\nVALUE k 0 0 99\r\n\r\nEND\r\n");
    }
}
