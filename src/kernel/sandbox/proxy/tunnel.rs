//! What a CONNECT tunnel must open with (issue 43 point 18): the proxy looks at the first bytes
//! the client sends through it before passing them on. A TLS ClientHello must name the
//! tunnel's host in its server name (SNI; without one only to an IP address); an HTTP/1 request
//! must name it (and its port) in its one `Host` header; on port 443 anything that is not TLS is
//! refused. On another port a stream that is neither is passed unchecked, as is one whose
//! server speaks first (SSH, SMTP): the proxy waits for whichever side speaks first there, and
//! on 443 for the client. Owns that wait and judgement; recording and answering a refusal are
//! the proxy's ([`super`]).

use std::net::IpAddr;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpStream, UnixStream};

use super::hello::{self, Hello};
use super::request::{host_header, HostHeader};
use super::MAX_HEAD;

/// A fatal TLS `access_denied` alert (RFC 8446 §6): what a refused ClientHello is answered
/// with, so the client says why (`tlsv1 alert access denied`).
pub(super) const ACCESS_DENIED: [u8; 7] = [21, 3, 3, 0, 2, 2, 49];

/// The longest method an HTTP/1 request line may start with, for the proxy to read it as one.
const MAX_METHOD: usize = 16;

/// How a tunnel opened.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Opening {
    /// The client spoke first and may go on: these bytes (all it sent so far) go upstream.
    Client(Vec<u8>),
    /// The server spoke first: these bytes go to the client, and nothing is checked.
    Server(Vec<u8>),
    /// The client closed before it said enough to judge.
    Closed,
    /// Refused.
    Refused(Refusal),
}

/// Why a tunnel was refused, and what the client is told.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Refusal {
    /// The other host the client named (its TLS server name or `Host` header), if it did.
    pub named: Option<String>,
    pub answer: Answer,
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// [`ACCESS_DENIED`].
    TlsAlert,
    /// A 403 with this body.
    Http(String),
    /// Nothing: the tunnel is closed.
    Close,
}

/// Waits for the tunnel to `host:port` to open (`early`: what the client sent after its
/// CONNECT head) and judges the client's first bytes. Buffers at most [`hello::MAX_HELLO`] or
/// [`MAX_HEAD`], plus one read.
pub(super) async fn open(
    client: &mut UnixStream,
    upstream: &mut TcpStream,
    early: Vec<u8>,
    host: &str,
    port: u16,
) -> std::io::Result<Opening> {
    let mut buf = early;
    let mut scan = Scan::default();
    let mut chunk = vec![0u8; 4096];
    let mut from_server = vec![0u8; 4096];
    loop {
        if !buf.is_empty() {
            match judge_with(&mut scan, &buf, host, port) {
                Step::More => {}
                Step::Pass => return Ok(Opening::Client(buf)),
                Step::Refuse(r) => return Ok(Opening::Refused(r)),
            }
        }
        let n = match (buf.is_empty(), port) {
            // Whoever speaks first, unless the client has begun or the port is HTTPS's.
            (true, p) if p != 443 => tokio::select! {
                n = client.read(&mut chunk) => n?,
                n = upstream.read(&mut from_server) => {
                    return Ok(Opening::Server(from_server[..n?].to_vec()));
                }
            },
            _ => client.read(&mut chunk).await?,
        };
        if n == 0 {
            return Ok(Opening::Closed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// What the client's first bytes decide.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Not enough to tell yet.
    More,
    Pass,
    Refuse(Refusal),
}

/// How far the judging of a tunnel's first bytes has looked, so that bytes arriving one read
/// at a time are not scanned again (an HTTP head of [`MAX_HEAD`] sent a byte at a time would
/// otherwise cost seconds of the runtime's time).
#[derive(Debug, Default)]
pub(super) struct Scan {
    /// How many bytes the last judgement saw.
    seen: usize,
    /// Where the first line ends (its `\r\n`), once found.
    line_end: Option<usize>,
}

/// Judges `buf` (not empty: the client's first bytes) for a tunnel to `host:port`, afresh.
#[cfg(test)]
pub(super) fn judge(buf: &[u8], host: &str, port: u16) -> Step {
    judge_with(&mut Scan::default(), buf, host, port)
}

/// [`judge`], going on from `scan` (`buf` only ever grows between calls).
pub(super) fn judge_with(scan: &mut Scan, buf: &[u8], host: &str, port: u16) -> Step {
    let tls = |named: Option<String>| {
        Step::Refuse(Refusal {
            named,
            answer: Answer::TlsAlert,
        })
    };
    match hello::parse(buf) {
        Hello::Incomplete => return Step::More,
        Hello::Complete(Some(name)) if name == host => return Step::Pass,
        Hello::Complete(None) if host.parse::<IpAddr>().is_ok() => return Step::Pass,
        Hello::Complete(named) => return tls(named),
        Hello::Malformed(_) => return tls(None),
        Hello::NotTls => {}
    }
    let http = |named: Option<String>, body: String| {
        Step::Refuse(Refusal {
            named,
            answer: Answer::Http(body),
        })
    };
    if port == 443 {
        let body = format!(
            "keel sandbox: port 443 of {host} carries TLS only, and this connection did not \
             open with a TLS ClientHello; it was refused\n"
        );
        return match buf[0].is_ascii_uppercase() {
            true => http(None, body),
            false => Step::Refuse(Refusal {
                named: None,
                answer: Answer::Close,
            }),
        };
    }
    match http_head(buf, scan) {
        Head::Partial => Step::More,
        Head::NotHttp => Step::Pass,
        Head::TooLong => http(
            None,
            format!("keel sandbox: a request head longer than {MAX_HEAD} bytes was refused\n"),
        ),
        Head::Request(head) => match host_header(head.split("\r\n").skip(1), host, port) {
            HostHeader::Same => Step::Pass,
            HostHeader::Absent => http(
                None,
                format!(
                    "keel sandbox: the request to {host}:{port} has no Host header naming it; \
                     it was refused\n"
                ),
            ),
            HostHeader::Other(named) => {
                let body = mismatch_body(host, port, &named);
                http(Some(named), body)
            }
        },
    }
}

/// The 403's body for a request to `host:port` whose `Host` header names `named`.
pub(super) fn mismatch_body(host: &str, port: u16, named: &str) -> String {
    format!(
        "keel sandbox: the request is for {host}:{port} but its Host header names {named}; the \
         connection was refused\n"
    )
}

/// What the start of a stream says about it being an HTTP/1 request.
#[derive(Debug, PartialEq, Eq)]
enum Head {
    /// It may be one: the head has not ended yet.
    Partial,
    /// A whole HTTP/1 request head.
    Request(String),
    /// It starts as one, but its head is longer than [`MAX_HEAD`].
    TooLong,
    NotHttp,
}

/// Reads `buf` as the start of an HTTP/1 request: a method (capital letters), a space, a first
/// line ending in `HTTP/1.0` or `HTTP/1.1`, and the head through its blank line. Looks only at
/// what `scan` has not seen (and the 3 bytes before it), and moves `scan` on.
fn http_head(buf: &[u8], scan: &mut Scan) -> Head {
    let method = buf.iter().take_while(|b| b.is_ascii_uppercase()).count();
    if method == 0 || method > MAX_METHOD {
        return Head::NotHttp;
    }
    match buf.get(method) {
        None => return Head::Partial,
        Some(b' ') => {}
        Some(_) => return Head::NotHttp,
    }
    let seen = std::mem::replace(&mut scan.seen, buf.len());
    let find =
        |from: usize, what: &[u8]| memchr::memmem::find(&buf[from..], what).map(|at| from + at);
    let too_long = |end: Option<usize>| end.unwrap_or(buf.len()) > MAX_HEAD;
    // The request line first: a client-first text protocol (`SET k v\r\n`) is not HTTP.
    let line_end = scan
        .line_end
        .or_else(|| find(seen.saturating_sub(1), b"\r\n"));
    scan.line_end = line_end;
    match line_end {
        _ if too_long(line_end) => return Head::TooLong,
        None => return Head::Partial,
        Some(e) if !(buf[..e].ends_with(b" HTTP/1.1") || buf[..e].ends_with(b" HTTP/1.0")) => {
            return Head::NotHttp
        }
        Some(_) => {}
    }
    let end = find(seen.saturating_sub(3), b"\r\n\r\n");
    match end {
        _ if too_long(end) => Head::TooLong,
        None => Head::Partial,
        Some(e) => Head::Request(String::from_utf8_lossy(&buf[..e]).into_owned()),
    }
}
