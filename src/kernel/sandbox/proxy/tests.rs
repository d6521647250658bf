//! The proxy against a real server on 127.0.0.1: what it lets through, how it rewrites a
//! plain-HTTP request, what it refuses and records; the ClientHello parser and the judgement
//! of a tunnel's first bytes on their own.

use super::hello::{Hello, MAX_HELLO};
use super::tunnel::{judge, judge_with, Scan, Step};
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
        "GET http://u@Example.org:8080/a?b HTTP/1.1\r\nHost: example.org:8080\r\n\
         Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n",
    )
    .unwrap();
    assert_eq!((r.host.as_str(), r.port), ("example.org", 8080));
    assert_eq!(r.mismatch, None);
    assert_eq!(
        r.forward.unwrap(),
        "GET /a?b HTTP/1.1\r\nHost: example.org:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    );
    // No Host header (HTTP/1.0): the destination's is added.
    let r = Request::parse("GET http://[::1] HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!((r.host.as_str(), r.port), ("::1", 80));
    assert_eq!(
        r.forward.unwrap(),
        "GET / HTTP/1.0\r\nHost: [::1]\r\nConnection: close\r\n\r\n"
    );
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
        HostPattern::parse("api.allowed.test:*").unwrap(),
        HostPattern::parse("*.allowed.test:*").unwrap(),
    ];
    let slot = ProxySlot::new(
        overrides("api.allowed.test=127.0.0.1,web.allowed.test=127.0.0.1"),
        None,
    );
    let socket = slot.socket(&allow).unwrap();
    assert_eq!(
        slot.socket(&allow).unwrap(),
        socket,
        "one proxy per session"
    );

    let plain = format!(
        "GET http://api.allowed.test:{port}/x HTTP/1.1\r\nHost: api.allowed.test:{port}\r\n\
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
        "CONNECT api.allowed.test:{port} HTTP/1.1\r\n\r\nGET /t HTTP/1.1\r\n\
         Host: api.allowed.test:{port}\r\n\r\n"
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
            named: None,
        });
    }
    let kept = state.violations.lock().unwrap();
    assert_eq!(kept.len(), MAX_KEPT);
    assert_eq!(
        (kept[0].port, kept[MAX_KEPT - 1].port),
        (10, MAX_KEPT as u16 + 9)
    );
}

/// The overrides of `KEEL_SANDBOX_PROXY_RESOLVE=spec`.
fn overrides(spec: &str) -> Vec<ResolveOverride> {
    let vars = [("KEEL_SANDBOX_PROXY_RESOLVE".to_string(), spec.to_string())];
    super::super::network::resolve_overrides(&vars.into_iter().collect())
}

/// A ClientHello `openssl s_client -servername Example.Test` sent (OpenSSL 3.0, TLS 1.3 and
/// 1.2 offered): one record, 318 bytes.
const OPENSSL_HELLO: &str = "\
    1603010139010001350303b97ad2f14dc426b899eeb6acfa8205a3f7b4c0029b2b57e9c2f0c2531633511d20face4665\
    c166087a42eb20a049072158cb94a2b1b3df538d1716c0cccfadbbd4003e130213031301c02cc030009fcca9cca8ccaa\
    c02bc02f009ec024c028006bc023c0270067c00ac0140039c009c0130033009d009c003d003c0035002f00ff010000ae\
    00000011000f00000c4578616d706c652e54657374000b000403000102000a00160014001d0017001e00190018010001\
    01010201030104002300000016000000170000000d002a0028040305030603080708080809080a080b08040805080604\
    0105010601030303010302040205020602002b0009080304030303020301002d00020101003300260024001d0020d986\
    286024389198ce491f437e6eccc5a9ec7325444530b3665b197dafa4b267";

fn unhex(s: &str) -> Vec<u8> {
    let s: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
    s.chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

fn len16(data: &[u8]) -> Vec<u8> {
    [&(data.len() as u16).to_be_bytes()[..], data].concat()
}

/// An extension: its type and data.
fn ext(kind: u16, data: &[u8]) -> Vec<u8> {
    [&kind.to_be_bytes()[..], &len16(data)].concat()
}

/// A `server_name` extension with these host names.
fn sni(names: &[&str]) -> Vec<u8> {
    let list: Vec<u8> = names
        .iter()
        .flat_map(|n| [&[0u8][..], &len16(n.as_bytes())].concat())
        .collect();
    ext(0, &len16(&list))
}

/// A ClientHello handshake message with `extensions` (`None`: no extensions block at all).
fn hello_message(extensions: Option<Vec<u8>>) -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend([7u8; 32]); // random
    body.push(32);
    body.extend([9u8; 32]); // session id
    body.extend(len16(&[0x13, 0x01, 0x13, 0x02])); // cipher suites
    body.extend([1, 0]); // compression: null
    if let Some(e) = extensions {
        body.extend(len16(&e));
    }
    let len = (body.len() as u32).to_be_bytes();
    [&[1u8][..], &len[1..], &body].concat()
}

/// `message` in handshake records of at most `size` bytes each.
fn records(message: &[u8], size: usize) -> Vec<u8> {
    message
        .chunks(size)
        .flat_map(|c| [&[22u8, 3, 1][..], &len16(c)].concat())
        .collect()
}

/// A one-record ClientHello naming `names` (none: no `server_name` extension).
fn hello(names: &[&str]) -> Vec<u8> {
    let mut e = ext(43, &[4, 3, 4, 3, 3]); // supported_versions
    if !names.is_empty() {
        e.extend(sni(names));
    }
    e.extend(ext(10, &len16(&[0, 29]))); // supported_groups
    records(&hello_message(Some(e)), 1 << 14)
}

#[test]
fn the_server_name_of_a_client_hello_is_read() {
    let real = unhex(OPENSSL_HELLO);
    assert_eq!(real.len(), 318);
    let name = |s: &str| Hello::Complete(Some(s.to_string()));
    assert_eq!(hello::parse(&real), name("example.test"));
    assert_eq!(hello::parse(&hello(&["Web.Test."])), name("web.test"));
    // Bytes after the ClientHello's records (early data, a second record) are not its.
    let mut more = hello(&["web.test"]);
    more.extend([23, 3, 3, 0, 1, 0]);
    assert_eq!(hello::parse(&more), name("web.test"));
    // No name: no server_name extension, or no extensions at all (TLS 1.2 allows it).
    assert_eq!(hello::parse(&hello(&[])), Hello::Complete(None));
    let bare = records(&hello_message(None), 1 << 14);
    assert_eq!(hello::parse(&bare), Hello::Complete(None));
    // Other name types than host_name are skipped.
    let mut other = vec![7u8];
    other.extend(len16(b"x"));
    other.extend([0u8]);
    other.extend(len16(b"web.test"));
    let e = ext(0, &len16(&other));
    let msg = records(&hello_message(Some(e)), 1 << 14);
    assert_eq!(hello::parse(&msg), name("web.test"));
}

#[test]
fn a_client_hello_split_across_reads_or_records_is_waited_for() {
    for whole in [unhex(OPENSSL_HELLO), hello(&["web.test"])] {
        for end in 0..whole.len() {
            assert_eq!(hello::parse(&whole[..end]), Hello::Incomplete, "{end}");
        }
    }
    // One ClientHello in records of 7, 30 and 100 bytes (a handshake message may span them).
    let message = hello_message(Some(sni(&["web.test"])));
    for size in [7, 30, 100] {
        let split = records(&message, size);
        let want = Hello::Complete(Some("web.test".to_string()));
        assert_eq!(hello::parse(&split), want, "{size}");
        assert_eq!(hello::parse(&split[..split.len() - 1]), Hello::Incomplete);
    }
}

#[test]
fn garbage_and_malformed_client_hellos_are_refused() {
    assert_eq!(hello::parse(b"GET / HTTP/1.1\r\n"), Hello::NotTls);
    assert_eq!(hello::parse(b"SSH-2.0-x\r\n"), Hello::NotTls);
    assert_eq!(hello::parse(&[0x80, 0x2e, 1, 3, 1]), Hello::NotTls, "SSLv2");
    let malformed = |b: &[u8]| matches!(hello::parse(b), Hello::Malformed(_));
    let good = hello(&["web.test"]);
    let message = hello_message(Some(sni(&["web.test"])));
    let with = |e: Vec<u8>| records(&hello_message(Some(e)), 1 << 14);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("record version 2", [&[22u8, 2, 0][..], &good[3..]].concat()),
        ("empty record", vec![22, 3, 1, 0, 0]),
        (
            "a ServerHello",
            records(&[&[2u8][..], &message[1..]].concat(), 1 << 14),
        ),
        (
            "an alert record in the middle",
            [&records(&message[..10], 10)[..], &[21, 3, 3, 0, 2, 2, 40]].concat(),
        ),
        (
            "handshake bytes after it",
            records(&[&message[..], &[1u8, 0, 0, 0][..]].concat(), 1 << 14),
        ),
        ("two host names", with(sni(&["web.test", "evil.test"]))),
        ("a name with a NUL", with(sni(&["web.test\0evil.test"]))),
        ("a name with a space", with(sni(&["web test"]))),
        ("an empty name", with(sni(&[""]))),
        ("an empty name list", with(ext(0, &len16(&[])))),
        (
            "server_name twice",
            with([sni(&["web.test"]), sni(&["web.test"])].concat()),
        ),
        ("an extension past its block", with(vec![0, 0, 0, 9, 1])),
        ("bytes after the extensions", {
            let mut m = hello_message(Some(sni(&["web.test"])));
            m.push(0);
            m[3] += 1;
            records(&m, 1 << 14)
        }),
        ("a short body", records(&[1u8, 0, 0, 3, 3, 3, 7], 1 << 14)),
    ];
    for (what, bytes) in cases {
        assert!(malformed(&bytes), "{what}: {:?}", hello::parse(&bytes));
    }
}

#[test]
fn an_oversized_client_hello_is_refused_before_it_is_buffered() {
    // A handshake message that says it is 1 MiB: refused from its first record.
    let huge = [22u8, 3, 1, 0, 4, 1, 0x10, 0, 0];
    assert!(matches!(hello::parse(&huge), Hello::Malformed(_)));
    // A record longer than TLS allows.
    assert!(matches!(
        hello::parse(&[22, 3, 1, 0x40, 1]),
        Hello::Malformed(_)
    ));
    // One that says it is longer than the limit: refused once its first record is in.
    let padded = hello_message(Some([sni(&["web.test"]), ext(21, &[0; 40_000])].concat()));
    let split = records(&padded, 1 << 14);
    let first = 5 + (1 << 14);
    assert_eq!(hello::parse(&split[..first - 1]), Hello::Incomplete);
    assert!(matches!(hello::parse(&split[..first]), Hello::Malformed(_)));
    // One within the limit whose record headers take it past: refused at the second header.
    let pad = MAX_HELLO - 2 - hello_message(Some(sni(&["web.test"]))).len() - 4;
    let padded = hello_message(Some([sni(&["web.test"]), ext(21, &vec![0; pad])].concat()));
    assert_eq!(padded.len(), MAX_HELLO - 2);
    let split = records(&padded, 1 << 14);
    assert_eq!(hello::parse(&split[..5 + (1 << 14)]), Hello::Incomplete);
    let second = 5 + (1 << 14) + 5;
    assert!(matches!(
        hello::parse(&split[..second]),
        Hello::Malformed(_)
    ));
    // A small ClientHello in 1-byte records: more records than any client sends.
    let tiny = records(&hello_message(Some(sni(&["web.test"]))), 1);
    assert!(tiny.len() < MAX_HELLO);
    assert!(matches!(hello::parse(&tiny), Hello::Malformed(_)));
}

#[test]
fn a_tunnels_first_bytes_must_name_its_host() {
    let refused = |s: Step| match s {
        Step::Refuse(r) => Some((r.named, r.answer)),
        _ => None,
    };
    let named = |s: Step| refused(s).map(|(n, _)| n);
    // TLS, on any port: the server name must be the host.
    assert_eq!(judge(&hello(&["web.test"]), "web.test", 443), Step::Pass);
    assert_eq!(judge(&hello(&["WEB.test"]), "web.test", 8443), Step::Pass);
    let evil = judge(&hello(&["evil.test"]), "web.test", 443);
    assert_eq!(
        refused(evil),
        Some((Some("evil.test".into()), tunnel::Answer::TlsAlert))
    );
    assert_eq!(named(judge(&hello(&[]), "web.test", 443)), Some(None));
    assert_eq!(
        judge(&hello(&[]), "93.184.215.14", 443),
        Step::Pass,
        "no SNI for an IP"
    );
    let partial = hello(&["web.test"]);
    assert_eq!(judge(&partial[..40], "web.test", 443), Step::More);
    // Port 443 carries TLS only.
    let plain = b"GET / HTTP/1.1\r\nHost: web.test\r\n\r\n";
    assert!(matches!(
        refused(judge(plain, "web.test", 443)),
        Some((None, tunnel::Answer::Http(_)))
    ));
    assert_eq!(
        refused(judge(b"\x00\x01", "web.test", 443)),
        Some((None, tunnel::Answer::Close))
    );
    // HTTP/1 elsewhere: its Host header must name the host and port.
    let get = |host: &str| format!("GET / HTTP/1.1\r\nHost: {host}\r\nAccept: */*\r\n\r\n");
    assert_eq!(
        judge(get("web.test").as_bytes(), "web.test", 80),
        Step::Pass
    );
    assert_eq!(
        judge(get("web.test:8080").as_bytes(), "web.test", 8080),
        Step::Pass
    );
    let other = judge(get("evil.test").as_bytes(), "web.test", 80);
    assert_eq!(named(other), Some(Some("evil.test".into())));
    let port = judge(get("web.test").as_bytes(), "web.test", 8080);
    assert_eq!(named(port), Some(Some("web.test".into())));
    let two = b"GET / HTTP/1.1\r\nHost: web.test\r\nHost: evil.test\r\n\r\n";
    assert_eq!(
        named(judge(two, "web.test", 80)),
        Some(Some("web.test, evil.test".into()))
    );
    let none = b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n";
    assert_eq!(named(judge(none, "web.test", 80)), Some(None));
    assert_eq!(judge(b"GE", "web.test", 80), Step::More);
    assert_eq!(judge(b"GET / HTTP/1.1\r\nHo", "web.test", 80), Step::More);
    let long = format!("GET / HTTP/1.1\r\nCookie: {}", "x".repeat(MAX_HEAD));
    assert!(refused(judge(long.as_bytes(), "web.test", 80)).is_some());
    // Another protocol on another port passes unchecked (the port is listed for it).
    assert_eq!(judge(b"SET k v\r\n", "web.test", 6379), Step::Pass);
    assert_eq!(judge(b"\x00\x00\x00\x08", "web.test", 5432), Step::Pass);
}

#[test]
fn bytes_judged_as_they_arrive_are_judged_as_if_all_at_once() {
    let long_line = format!(
        "GET /{} HTTP/1.1\r\nHost: web.test\r\n\r\n",
        "a".repeat(3000)
    );
    let inputs: Vec<Vec<u8>> = vec![
        b"GET / HTTP/1.1\r\nHost: web.test\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost: evil.test\r\nAccept: */*\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\n\r\n".to_vec(),
        b"SET k v\r\n".to_vec(),
        long_line.into_bytes(),
        hello(&["web.test"]),
    ];
    for input in inputs {
        for step in [1, 2, 3, 5] {
            let mut scan = Scan::default();
            let mut end = 0;
            let got = loop {
                end = (end + step).min(input.len());
                let s = judge_with(&mut scan, &input[..end], "web.test", 80);
                if s != Step::More || end == input.len() {
                    break s;
                }
            };
            assert_eq!(got, judge(&input, "web.test", 80), "{step}: {input:?}");
        }
    }
}

/// A TCP server that sends `greeting` first (if any) and keeps what each connection sent,
/// until it closes, on a channel.
async fn raw_server(
    greeting: &'static [u8],
) -> (u16, tokio::sync::mpsc::UnboundedReceiver<Vec<u8>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let _ = s.write_all(greeting).await;
                let mut got = Vec::new();
                let mut buf = [0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    got.extend_from_slice(&buf[..n]);
                    if got.len() >= 5 {
                        break;
                    }
                }
                let _ = tx.send(got);
            });
        }
    });
    (port, rx)
}

#[tokio::test]
async fn ports_host_headers_and_server_names_are_checked_end_to_end() {
    let (port, mut got) = raw_server(b"").await;
    let (ssh, mut ssh_got) = raw_server(b"SSH-2.0-test\r\n").await;
    let allow = vec![
        HostPattern::parse("web.test").unwrap(),
        HostPattern::parse(&format!("web.test:{ssh}")).unwrap(),
    ];
    let spec = format!("web.test=127.0.0.1,web.test:443=127.0.0.1:{port}");
    let slot = ProxySlot::new(overrides(&spec), None);
    let socket = slot.socket(&allow).unwrap();

    // A port the entry does not name: refused before anything is connected.
    let out = ask(
        &socket,
        &format!("CONNECT web.test:{port} HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(out.starts_with("HTTP/1.1 403 Forbidden"), "{out}");
    assert!(out.contains(&format!("port {port} of web.test")), "{out}");
    // A plain request whose Host names another host.
    let fronted = "GET http://web.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n";
    let out = ask(&socket, fronted).await;
    assert!(out.starts_with("HTTP/1.1 403 Forbidden"), "{out}");
    assert!(out.contains("Host header names evil.test"), "{out}");

    // A tunnel to 443 whose ClientHello names another host: a TLS alert, nothing forwarded.
    let tunnel = |sni: &[&str]| {
        let mut b = b"CONNECT web.test:443 HTTP/1.1\r\n\r\n".to_vec();
        b.extend(hello(sni));
        b
    };
    let mut c = UnixStream::connect(&socket).await.unwrap();
    c.write_all(&tunnel(&["evil.test"])).await.unwrap();
    let mut out = Vec::new();
    c.read_to_end(&mut out).await.unwrap();
    let established = b"HTTP/1.1 200 Connection Established\r\n\r\n";
    assert_eq!(out, [&established[..], &tunnel::ACCESS_DENIED].concat());
    assert_eq!(
        got.recv().await.unwrap(),
        b"",
        "the server got not one byte"
    );
    // The same naming the host goes through, split across writes.
    let mut c = UnixStream::connect(&socket).await.unwrap();
    let bytes = tunnel(&["web.test"]);
    let (a, b) = bytes.split_at(60);
    c.write_all(a).await.unwrap();
    c.write_all(b).await.unwrap();
    assert_eq!(got.recv().await.unwrap()[..5], hello(&["web.test"])[..5]);
    drop(c);

    // A server that speaks first (SSH on a listed port): passed, unchecked.
    let mut c = UnixStream::connect(&socket).await.unwrap();
    let connect = format!("CONNECT web.test:{ssh} HTTP/1.1\r\n\r\n");
    c.write_all(connect.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; established.len() + 14];
    c.read_exact(&mut buf).await.unwrap();
    assert!(
        buf.ends_with(b"SSH-2.0-test\r\n"),
        "{:?}",
        String::from_utf8_lossy(&buf)
    );
    c.write_all(b"SSH-2.0-client\r\n").await.unwrap();
    assert_eq!(&ssh_got.recv().await.unwrap()[..5], b"SSH-2");

    let v: Vec<(u16, ViolationReason, Option<String>)> = slot
        .take_violations()
        .into_iter()
        .map(|v| (v.port, v.reason, v.named))
        .collect();
    assert_eq!(
        v,
        [
            (port, ViolationReason::PortNotAllowed, None),
            (80, ViolationReason::HostMismatch, Some("evil.test".into())),
            (443, ViolationReason::HostMismatch, Some("evil.test".into())),
        ]
    );
}
