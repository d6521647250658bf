//! The server name (SNI) of a TLS ClientHello, read by a small bounded parser of keel's own
//! (RFC 8446 §4.1.2 and §5.1, RFC 6066 §3): record headers → the handshake message, reassembled
//! across records → ClientHello → extensions → `server_name`. Owns only that reading: it is
//! handed the bytes a client sent first through a tunnel and says whether they are a whole
//! ClientHello and what name it carries; it never reads a socket or decides anything.

/// The most bytes of records (headers included) a ClientHello may take. A ClientHello with
/// post-quantum key shares and a resumption ticket stays under 4 KiB; 32 KiB leaves room and
/// bounds what the proxy buffers (the caller reads at most one more chunk past it).
pub const MAX_HELLO: usize = 32 * 1024;

/// The most records a ClientHello may span: clients send one (two for a very large one); a
/// cap keeps re-reading a hello sent a byte at a time cheap.
const MAX_RECORDS: usize = 16;
/// The longest TLS record fragment (2^14, RFC 8446 §5.1).
const MAX_FRAGMENT: usize = 1 << 14;
/// A handshake record's content type.
const HANDSHAKE: u8 = 22;
/// The ClientHello's handshake type.
const CLIENT_HELLO: u8 = 1;
/// The `server_name` extension, and its `host_name` entry.
const SERVER_NAME: u16 = 0;
const HOST_NAME: u8 = 0;

/// What the bytes a client sent first say.
#[derive(Debug, PartialEq, Eq)]
pub enum Hello {
    /// The start of a TLS handshake: more bytes are needed (the ClientHello is split across
    /// reads or records).
    Incomplete,
    /// A whole, well-formed ClientHello, and the host name of its `server_name` extension
    /// (lowercased, a trailing dot dropped), if it has one.
    Complete(Option<String>),
    /// Not a TLS handshake record.
    NotTls,
    /// A TLS handshake that is not a well-formed ClientHello, or longer than [`MAX_HELLO`].
    Malformed(&'static str),
}

/// Reads `bytes` (everything the client sent so far) as the records that carry a ClientHello.
pub fn parse(bytes: &[u8]) -> Hello {
    if bytes.first().is_some_and(|&b| b != HANDSHAKE) {
        return Hello::NotTls;
    }
    let mut message = Vec::new();
    let mut at = 0;
    for _ in 0..MAX_RECORDS {
        let Some(header) = bytes.get(at..at + 5) else {
            return Hello::Incomplete;
        };
        if header[0] != HANDSHAKE {
            return Hello::Malformed("a record other than a handshake inside the ClientHello");
        }
        if header[1] != 3 {
            return Hello::Malformed("not a TLS record version");
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || len > MAX_FRAGMENT {
            return Hello::Malformed("a handshake record of a length TLS does not allow");
        }
        if at + 5 + len > MAX_HELLO {
            return Hello::Malformed("a ClientHello longer than keel reads");
        }
        let Some(fragment) = bytes.get(at + 5..at + 5 + len) else {
            return Hello::Incomplete;
        };
        message.extend_from_slice(fragment);
        at += 5 + len;
        if message.len() < 4 {
            continue;
        }
        if message[0] != CLIENT_HELLO {
            return Hello::Malformed("a handshake message that is not a ClientHello");
        }
        let body = usize::from(message[1]) << 16 | usize::from(message[2]) << 8;
        let body = body | usize::from(message[3]);
        if 4 + body > MAX_HELLO {
            return Hello::Malformed("a ClientHello longer than keel reads");
        }
        match message.len().cmp(&(4 + body)) {
            std::cmp::Ordering::Less => continue,
            std::cmp::Ordering::Greater => {
                return Hello::Malformed("handshake bytes after the ClientHello in its record")
            }
            std::cmp::Ordering::Equal => {}
        }
        return match client_hello(&message[4..]) {
            Ok(name) => Hello::Complete(name),
            Err(why) => Hello::Malformed(why),
        };
    }
    Hello::Malformed("a ClientHello in more records than keel reads")
}

/// The body of a ClientHello: its server name, if any.
fn client_hello(body: &[u8]) -> Result<Option<String>, &'static str> {
    const BAD: &str = "a malformed ClientHello";
    let mut c = Cursor(body);
    let version = c.u16().ok_or(BAD)?;
    if version >> 8 != 3 {
        return Err("a ClientHello of a version that is not TLS");
    }
    c.take(32).ok_or(BAD)?; // random
    let session = c.vec8().ok_or(BAD)?;
    let suites = c.vec16().ok_or(BAD)?;
    let compression = c.vec8().ok_or(BAD)?;
    if session.len() > 32 || suites.is_empty() || suites.len() % 2 != 0 || compression.is_empty() {
        return Err(BAD);
    }
    if c.is_empty() {
        return Ok(None); // no extensions (TLS 1.2 allows it): no name
    }
    let mut extensions = Cursor(c.vec16().ok_or(BAD)?);
    if !c.is_empty() {
        return Err("bytes after a ClientHello's extensions");
    }
    let mut seen: Vec<u16> = Vec::new();
    let mut name = None;
    while !extensions.is_empty() {
        let kind = extensions.u16().ok_or(BAD)?;
        let data = extensions.vec16().ok_or(BAD)?;
        if seen.contains(&kind) {
            return Err("a ClientHello with an extension twice");
        }
        seen.push(kind);
        if kind == SERVER_NAME {
            name = Some(server_name(data)?);
        }
    }
    Ok(name)
}

/// The `host_name` of a `server_name` extension (RFC 6066 §3: one name of each type).
fn server_name(data: &[u8]) -> Result<String, &'static str> {
    const BAD: &str = "a malformed server_name extension";
    let mut outer = Cursor(data);
    let mut list = Cursor(outer.vec16().ok_or(BAD)?);
    if !outer.is_empty() || list.is_empty() {
        return Err(BAD);
    }
    let mut host = None;
    while !list.is_empty() {
        let kind = list.u8().ok_or(BAD)?;
        let name = list.vec16().ok_or(BAD)?;
        if kind != HOST_NAME {
            continue;
        }
        if host.is_some() {
            return Err("a server_name extension with two host names");
        }
        let valid = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_');
        if name.is_empty() || name.len() > 255 || !name.iter().all(valid) {
            return Err("a server name that is not a host name");
        }
        host = Some(String::from_utf8_lossy(name).into_owned());
    }
    let host = host.ok_or("a server_name extension without a host name")?;
    Ok(super::super::network::normal_host(&host))
}

/// Big-endian reads off the front of a slice; `None` when it is too short.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    /// A vector with a one-byte length.
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(usize::from(n))
    }

    /// A vector with a two-byte length.
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(usize::from(n))
    }
}
