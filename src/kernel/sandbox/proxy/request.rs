//! The proxy's reading of a request head: `CONNECT host:port` or an absolute-form plain-HTTP
//! request (`GET http://host/…`) rewritten to origin form, and what its `Host` headers name
//! against the destination (issue 43 point 18: a request must name the host it is sent to).
//! Owns only the parsing; the allowlist and the connection are the proxy's ([`super`]).

use super::super::network::normal_host;

/// A request the proxy understood: where to, and for plain HTTP the head to send there.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Request {
    pub host: String,
    pub port: u16,
    /// `None` for CONNECT (a tunnel); the rewritten origin-form head for plain HTTP.
    pub forward: Option<String>,
    /// For plain HTTP: what its `Host` headers named when that is not the destination.
    pub mismatch: Option<String>,
}

impl Request {
    pub fn parse(head: &str) -> Result<Request, &'static str> {
        let mut lines = head.split("\r\n");
        let line = lines.next().unwrap_or_default();
        let mut words = line.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (words.next(), words.next(), words.next(), words.next())
        else {
            return Err("a malformed request line");
        };
        if method.eq_ignore_ascii_case("CONNECT") {
            let (host, port) = host_port(target, None)?;
            return Ok(Request {
                host,
                port,
                forward: None,
                mismatch: None,
            });
        }
        let rest = strip_prefix_ci(target, "http://")
            .ok_or("keel's proxy takes CONNECT and absolute http:// requests only")?;
        let split = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(split);
        let authority = authority.rsplit('@').next().unwrap_or(authority);
        let (host, port) = host_port(authority, Some(80))?;
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('/') => p.to_string(),
            p => format!("/{p}"),
        };
        let headers: Vec<&str> = lines.filter(|l| !l.is_empty()).collect();
        let named = host_header(headers.iter().copied(), &host, port);
        let mut out = format!("{method} {path} {version}\r\n");
        if named == HostHeader::Absent {
            out.push_str(&format!("Host: {}\r\n", authority_of(&host, port)));
        }
        const HOP: &[&str] = &[
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
        ];
        for header in headers {
            let name = header.split(':').next().unwrap_or_default().trim();
            if !HOP.iter().any(|h| name.eq_ignore_ascii_case(h)) {
                out.push_str(header);
                out.push_str("\r\n");
            }
        }
        out.push_str("Connection: close\r\n\r\n");
        let mismatch = match named {
            HostHeader::Other(named) => Some(named),
            HostHeader::Absent | HostHeader::Same => None,
        };
        Ok(Request {
            host,
            port,
            forward: Some(out),
            mismatch,
        })
    }
}

/// What the `Host` headers of a request name, against the destination.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum HostHeader {
    /// None.
    Absent,
    /// One, naming the destination's host and port (no port: 80).
    Same,
    /// Another host or port, or more than one header: what they say.
    Other(String),
}

/// What the `Host` headers among `headers` (the head's lines after the request line) say of
/// `host:port` (`host` normalised, as [`host_port`] gives it).
pub(super) fn host_header<'a>(
    headers: impl Iterator<Item = &'a str>,
    host: &str,
    port: u16,
) -> HostHeader {
    let values: Vec<&str> = headers
        .filter_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.trim()
                .eq_ignore_ascii_case("host")
                .then(|| value.trim())
        })
        .collect();
    let same = |v: &str| host_port(v, Some(80)).is_ok_and(|(h, p)| h == host && p == port);
    match values.as_slice() {
        [] => HostHeader::Absent,
        [one] if same(one) => HostHeader::Same,
        _ => HostHeader::Other(values.join(", ")),
    }
}

/// `host` or `host:port` (brackets around an IPv6 address), as a `Host` header says it.
fn authority_of(host: &str, port: u16) -> String {
    let host = match host.contains(':') {
        true => format!("[{host}]"),
        false => host.to_string(),
    };
    match port {
        80 => host,
        p => format!("{host}:{p}"),
    }
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `host:port` or `[v6]:port` (the port may be left out when there is a default).
pub(super) fn host_port(
    authority: &str,
    default: Option<u16>,
) -> Result<(String, u16), &'static str> {
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (host, rest) = v6.split_once(']').ok_or("a malformed IPv6 host")?;
            (host, rest.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        },
    };
    let port = match (port, default) {
        (Some(p), _) => p.parse().map_err(|_| "a malformed port")?,
        (None, Some(d)) => d,
        (None, None) => return Err("CONNECT needs host:port"),
    };
    let host = normal_host(host);
    match host.is_empty() {
        true => Err("no host"),
        false => Ok((host, port)),
    }
}
