//! The proxy against a real server on 127.0.0.1: what it lets through, how it rewrites a
//! plain-HTTP request, what it refuses and records.

use super::*;
use std::path::Path;
use tokio::net::TcpListener;

#[test]
fn requests_parse_into_destinations() {
    let r = Request::parse("CONNECT Crates.IO:443 HTTP/1.1\r\nHost: crates.io\r\n\r\n").unwrap();
    assert_eq!(
        (r.host.as_str(), r.port, r.forward),
        ("crates.io", 443, None)
    );
    let r = Request::parse(
        "GET http://u@Example.org:8080/a?b HTTP/1.1\r\nHost: example.org\r\n\
         Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
    )
    .unwrap();
    assert_eq!((r.host.as_str(), r.port), ("example.org", 8080));
    assert_eq!(
        r.forward.unwrap(),
        "GET /a?b HTTP/1.1\r\nHost: example.org\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    let r = Request::parse("GET http://[::1] HTTP/1.1\r\n\r\n").unwrap();
    assert_eq!((r.host.as_str(), r.port), ("::1", 80));
    for bad in [
        "GET / HTTP/1.1\r\n\r\n",
        "GET https://x.org/ HTTP/1.1\r\n\r\n",
        "CONNECT x.org HTTP/1.1\r\n\r\n",
        "CONNECT x.org:http HTTP/1.1\r\n\r\n",
        "GET\r\n\r\n",
    ] {
        assert!(Request::parse(bad).is_err(), "{bad}");
    }
}

/// A server answering every connection with `hello` after reading its head; sends each
/// request line it saw.
async fn server() -> (u16, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let mut buf = vec![0u8; 4096];
            let mut got = Vec::new();
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = s.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            let _ = tx.send(String::from_utf8_lossy(&got).into_owned());
            let _ = s
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                )
                .await;
        }
    });
    (port, rx)
}

async fn ask(socket: &Path, request: &str) -> String {
    let mut c = UnixStream::connect(socket).await.unwrap();
    c.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).await.unwrap();
    out
}

#[tokio::test]
async fn allowed_names_pass_and_others_are_refused_and_recorded() {
    let (port, mut seen) = server().await;
    // Listed exactly: it may resolve to loopback (a name allowed only by `*.allowed.test`
    // may not, see below).
    let allow = vec![
        HostPattern::parse("api.allowed.test").unwrap(),
        HostPattern::parse("*.allowed.test").unwrap(),
    ];
    let slot = ProxySlot::new(
        vec![
            ("api.allowed.test".into(), [127, 0, 0, 1].into()),
            ("web.allowed.test".into(), [127, 0, 0, 1].into()),
        ],
        None,
    );
    let socket = slot.socket(&allow).unwrap();
    assert_eq!(
        slot.socket(&allow).unwrap(),
        socket,
        "one proxy per session"
    );

    let plain = format!(
        "GET http://api.allowed.test:{port}/x HTTP/1.1\r\nHost: api.allowed.test\r\n\
         Proxy-Connection: keep-alive\r\n\r\n"
    );
    let out = ask(&socket, &plain).await;
    assert!(
        out.starts_with("HTTP/1.1 200 OK") && out.ends_with("hello"),
        "{out}"
    );
    let head = seen.recv().await.unwrap();
    assert!(head.starts_with("GET /x HTTP/1.1\r\n"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("proxy-connection"),
        "{head}"
    );

    let tunnel = format!(
        "CONNECT api.allowed.test:{port} HTTP/1.1\r\n\r\nGET /t HTTP/1.1\r\nHost: x\r\n\r\n"
    );
    let out = ask(&socket, &tunnel).await;
    assert!(
        out.starts_with("HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK"),
        "{out}"
    );
    assert!(seen.recv().await.unwrap().starts_with("GET /t HTTP/1.1"));

    for refused in [
        format!("GET http://allowed.test:{port}/ HTTP/1.1\r\n\r\n"),
        format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"),
    ] {
        let out = ask(&socket, &refused).await;
        assert!(out.starts_with("HTTP/1.1 403 Forbidden"), "{out}");
        assert!(out.contains("is not in the network allowlist"), "{out}");
    }
    // Allowed by the wildcard alone, resolving to loopback: refused (DNS rebinding).
    let rebound = format!("CONNECT web.allowed.test:{port} HTTP/1.1\r\n\r\n");
    let out = ask(&socket, &rebound).await;
    assert!(out.starts_with("HTTP/1.1 403 Forbidden"), "{out}");
    assert!(out.contains("not a public address"), "{out}");
    let v = slot.take_violations();
    let hosts: Vec<(&str, u16, ViolationReason)> = v
        .iter()
        .map(|v| (v.host.as_str(), v.port, v.reason))
        .collect();
    assert_eq!(
        hosts,
        [
            ("allowed.test", port, ViolationReason::NotAllowed),
            ("127.0.0.1", port, ViolationReason::NotAllowed),
            ("web.allowed.test", port, ViolationReason::PrivateAddress)
        ]
    );
    assert!(slot.take_violations().is_empty(), "taken once");
    assert!(
        seen.try_recv().is_err(),
        "nothing refused reached the server"
    );
    let out = ask(&socket, "GET / HTTP/1.1\r\n\r\n").await;
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
}

#[test]
fn only_the_newest_violations_are_kept() {
    let state = State {
        allow: Vec::new(),
        resolve: Vec::new(),
        violations: Arc::default(),
    };
    for port in 0..(MAX_KEPT as u16 + 10) {
        state.record(NetViolation {
            host: "x.test".into(),
            port,
            reason: ViolationReason::NotAllowed,
        });
    }
    let kept = state.violations.lock().unwrap();
    assert_eq!(kept.len(), MAX_KEPT);
    assert_eq!(
        (kept[0].port, kept[MAX_KEPT - 1].port),
        (10, MAX_KEPT as u16 + 9)
    );
}
