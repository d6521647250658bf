//! `keel web` over real HTTP on 127.0.0.1 (issue 49, point 2): the URL it prints, the token
//! traded for the cookie, and every request's checks (Host, Origin, the custom header, the
//! cookie), the WebSocket upgrade's included. Requests are written by hand on a TcpStream so
//! that each header is exactly what the test says (a client library would set Host itself).
//! [`Web`] is the harness tests/web_relay.rs and tests/web_browser.rs share.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::common::daemon::Daemon;
use crate::common::support::Sandbox;

/// A `keel web` this test started, killed on drop.
pub struct Web {
    pub child: Child,
    pub port: u16,
    pub token: String,
    pub url: String,
}

impl Web {
    /// `keel web --socket SOCKET` (the daemon started on first use if none runs there).
    pub fn start(sb: &Sandbox, socket: &Path) -> Web {
        let mut child = sb
            .cmd(&["web", "--socket", socket.to_str().unwrap()])
            .env("KEEL_LOG", "debug")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim_end().to_string();
        let rest = url
            .strip_prefix("http://127.0.0.1:")
            .unwrap_or_else(|| panic!("not a loopback URL: {url:?}"));
        let (port, token) = rest
            .split_once("/#t=")
            .unwrap_or_else(|| panic!("no token in the fragment: {url:?}"));
        Web {
            port: port.parse().unwrap(),
            token: token.to_string(),
            url: url.clone(),
            child,
        }
    }

    /// This server's `Host` and `Origin`.
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Sends one request with exactly `headers` (plus `Content-Length` and `Connection:
    /// close`); the answer.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut req = format!("{method} {path} HTTP/1.1\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str(&format!(
            "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ));
        s.write_all(req.as_bytes()).unwrap();
        let mut raw = Vec::new();
        let mut buf = [0u8; 8192];
        // Read to the end, or (an upgrade keeps the socket open) to the end of the head.
        loop {
            match s.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
                Err(e) => panic!("reading the answer: {e}"),
            }
            if raw.starts_with(b"HTTP/1.1 101") && raw.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
        Answer::parse(&String::from_utf8_lossy(&raw))
    }

    /// A GET with the right Host and nothing else.
    pub fn get(&self, path: &str, more: &[(&str, &str)]) -> Answer {
        let host = self.host();
        let mut h = vec![("Host", host.as_str())];
        h.extend_from_slice(more);
        self.request("GET", path, &h, "")
    }

    /// `POST /auth` with `token` and `more` headers (the right Host first).
    pub fn auth(&self, token: &str, more: &[(&str, &str)]) -> Answer {
        let host = self.host();
        let mut h = vec![("Host", host.as_str())];
        h.extend_from_slice(more);
        let body = format!("{{\"token\":\"{token}\"}}");
        self.request("POST", "/auth", &h, &body)
    }

    /// The cookie `POST /auth` sets (`name=value`).
    pub fn cookie(&self) -> String {
        let a = self.auth(&self.token, &[("X-Keel", "1")]);
        assert_eq!(a.status, 204, "{a:?}");
        let set = a.header("set-cookie").unwrap().to_string();
        set.split(';').next().unwrap().to_string()
    }

    /// The headers of a WebSocket upgrade of `/ws`.
    pub fn upgrade_headers(&self) -> Vec<(&'static str, &'static str)> {
        vec![
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ]
    }

    /// A WebSocket on `/ws` with the cookie and this server's Origin.
    pub fn websocket(&self, cookie: &str) -> Ws {
        let mut req = tungstenite::client::IntoClientRequest::into_client_request(format!(
            "ws://127.0.0.1:{}/ws",
            self.port
        ))
        .unwrap();
        let h = req.headers_mut();
        h.insert("Cookie", cookie.parse().unwrap());
        h.insert("Origin", self.origin().parse().unwrap());
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let (ws, _) = tungstenite::client::client(req, stream).unwrap();
        Ws { ws, next: 1 }
    }

    /// Stops the server; what it wrote on stderr.
    pub fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            e.read_to_string(&mut err).unwrap();
        }
        err
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A WebSocket client speaking the daemon's protocol through `keel web`.
pub struct Ws {
    pub ws: tungstenite::WebSocket<TcpStream>,
    pub next: u64,
}

impl Ws {
    pub fn send(&mut self, v: &serde_json::Value) {
        self.ws
            .send(tungstenite::Message::text(v.to_string()))
            .unwrap();
    }

    /// The next frame as JSON; `None` once closed.
    pub fn recv(&mut self) -> Option<serde_json::Value> {
        loop {
            match self.ws.read() {
                Ok(tungstenite::Message::Text(t)) => {
                    return Some(serde_json::from_str(t.as_str()).unwrap());
                }
                Ok(tungstenite::Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    /// A request; its response (notifications before it are dropped into `notes`).
    pub fn call(
        &mut self,
        method: &str,
        params: serde_json::Value,
        notes: &mut Vec<serde_json::Value>,
    ) -> serde_json::Value {
        let id = self.next;
        self.next += 1;
        self.send(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        );
        loop {
            let v = self.recv().expect("the relay closed");
            if v["id"] == id {
                return v;
            }
            notes.push(v);
        }
    }
}

/// One HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    fn parse(raw: &str) -> Answer {
        let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((raw, ""));
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("no status line: {raw:?}"));
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        Answer {
            status,
            headers,
            body: body.to_string(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A sandbox, a daemon in it and a `keel web` on its socket. The daemon is the test's (killed
/// on drop): a WebSocket let through, rightly or not, would otherwise start one that outlives
/// the test.
fn web() -> (Sandbox, Web, Daemon) {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    let w = Web::start(&sb, &d.socket);
    (sb, w, d)
}

#[test]
fn the_url_carries_a_256_bit_token_in_its_fragment_and_no_log_holds_it() {
    let (_sb, w, _d) = web();
    assert_eq!(w.token.len(), 64, "{}", w.url);
    assert!(w.token.bytes().all(|b| b.is_ascii_hexdigit()), "{}", w.url);
    // The page is served without the token: it reads its fragment, which no request carries.
    let page = w.get("/", &[]);
    assert_eq!(page.status, 200, "{page:?}");
    assert!(!page.body.contains(&w.token));
    let _ = w.cookie();
    let token = w.token.clone();
    let logs = w.stop();
    assert!(logs.contains("keel web listening on"), "{logs}");
    assert!(!logs.contains(&token), "the token is in the logs: {logs}");
}

#[test]
fn auth_trades_the_token_for_a_strict_http_only_cookie() {
    let (_sb, w, _d) = web();
    let a = w.auth(&w.token, &[("X-Keel", "1")]);
    assert_eq!(a.status, 204, "{a:?}");
    let set = a.header("set-cookie").unwrap();
    assert!(set.starts_with(&format!("keel-web-{}=", w.port)), "{set}");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.split("; ").any(|a| a == attr), "{attr} missing: {set}");
    }
    let value = set.split(';').next().unwrap();
    assert!(
        !value.contains(&w.token),
        "the cookie is not the token: {set}"
    );
    // A wrong or missing token: 401 and no cookie.
    let wrong = "0".repeat(64);
    for body_token in [wrong.as_str(), "", &w.token[..63]] {
        let a = w.auth(body_token, &[("X-Keel", "1")]);
        assert_eq!(a.status, 401, "{body_token:?}: {a:?}");
        assert_eq!(a.header("set-cookie"), None);
    }
    let host = w.host();
    let garbage = w.request("POST", "/auth", &[("Host", &host), ("X-Keel", "1")], "t=1");
    assert_eq!(garbage.status, 401, "{garbage:?}");
    // Without the custom header: 403, even with the right token.
    let a = w.auth(&w.token, &[]);
    assert_eq!(a.status, 403, "{a:?}");
    assert_eq!(a.header("set-cookie"), None);
    let a = w.auth(&w.token, &[("X-Keel", "yes")]);
    assert_eq!(a.status, 403, "{a:?}");
}

#[test]
fn host_must_name_a_loopback_literal_with_the_served_port() {
    let (_sb, w, _d) = web();
    let cookie = w.cookie();
    let other = format!("127.0.0.1:{}", w.port.wrapping_add(1));
    let evil_port = format!("evil.example:{}", w.port);
    for (host, status) in [
        ("evil.example", 403),
        (evil_port.as_str(), 403),
        (other.as_str(), 403),
        ("127.0.0.1", 403),
        ("", 403),
    ] {
        for path in ["/", "/app.js", "/ws"] {
            let a = w.request("GET", path, &[("Host", host), ("Cookie", &cookie)], "");
            assert_eq!(a.status, status, "Host {host:?} {path}: {a:?}");
        }
        // Even the right token gets no cookie through a rebound name.
        let body = format!("{{\"token\":\"{}\"}}", w.token);
        let a = w.request("POST", "/auth", &[("Host", host), ("X-Keel", "1")], &body);
        assert_eq!((a.status, a.header("set-cookie")), (403, None), "{host:?}");
    }
    let no_host = w.request("GET", "/", &[], "");
    assert_eq!(no_host.status, 403, "{no_host:?}");
    let localhost = format!("localhost:{}", w.port);
    for host in [w.host(), localhost] {
        let a = w.request("GET", "/", &[("Host", &host)], "");
        assert_eq!(a.status, 200, "{host}: {a:?}");
    }
}

#[test]
fn origin_when_present_must_be_exactly_this_server() {
    let (_sb, w, _d) = web();
    let cookie = w.cookie();
    let other = format!("http://localhost:{}", w.port.wrapping_add(1));
    let https = format!("https://127.0.0.1:{}", w.port);
    for origin in [
        "http://evil.example",
        other.as_str(),
        https.as_str(),
        "null",
    ] {
        let a = w.get("/", &[("Origin", origin)]);
        assert_eq!(a.status, 403, "{origin}: {a:?}");
        let a = w.auth(&w.token, &[("X-Keel", "1"), ("Origin", origin)]);
        assert_eq!((a.status, a.header("set-cookie")), (403, None), "{origin}");
        let a = w.request(
            "POST",
            "/render",
            &[
                ("Host", &w.host()),
                ("X-Keel", "1"),
                ("Origin", origin),
                ("Cookie", &cookie),
            ],
            r#"{"text":"hi"}"#,
        );
        assert_eq!(a.status, 403, "{origin}: {a:?}");
    }
    let localhost = format!("http://localhost:{}", w.port);
    for origin in [w.origin(), localhost] {
        let a = w.auth(&w.token, &[("X-Keel", "1"), ("Origin", &origin)]);
        assert_eq!(a.status, 204, "{origin}: {a:?}");
    }
}

#[test]
fn without_the_cookie_nothing_but_the_page_is_served() {
    let (_sb, w, _d) = web();
    // The page's own files load (it must, to trade its token)…
    for path in ["/", "/app.js", "/app.css", "/export.css"] {
        let a = w.get(path, &[]);
        assert_eq!(a.status, 200, "{path}: {a:?}");
        let csp = a.header("content-security-policy").unwrap_or_default();
        assert!(csp.contains("script-src 'self'"), "{path}: {csp}");
        assert_eq!(a.header("x-content-type-options"), Some("nosniff"));
    }
    // …but a stolen URL without its fragment, or a wrong cookie, reaches nothing else.
    let wrong = format!("keel-web-{}={}", w.port, "0".repeat(64));
    for cookie in [None, Some(wrong.as_str()), Some("keel-web-1=x")] {
        let host = w.host();
        let mut headers = w.upgrade_headers();
        headers.push(("Host", &host));
        if let Some(c) = cookie {
            headers.push(("Cookie", c));
        }
        let a = w.request("GET", "/ws", &headers, "");
        assert_eq!(a.status, 401, "{cookie:?}: {a:?}");
        let mut post = vec![("Host", host.as_str()), ("X-Keel", "1")];
        if let Some(c) = cookie {
            post.push(("Cookie", c));
        }
        let a = w.request("POST", "/render", &post, r#"{"text":"hi"}"#);
        assert_eq!(a.status, 401, "{cookie:?}: {a:?}");
    }
    // With it, /render answers the export's sanitized HTML.
    let cookie = w.cookie();
    let host = w.host();
    let a = w.request(
        "POST",
        "/render",
        &[("Host", &host), ("X-Keel", "1"), ("Cookie", &cookie)],
        r#"{"text":"<script>alert(1)</script> [x](javascript:alert(1)) <img src=x onerror=alert(1)>"}"#,
    );
    assert_eq!(a.status, 200, "{a:?}");
    assert!(!a.body.contains("<script"), "{}", a.body);
    assert!(!a.body.contains("<img"), "{}", a.body);
    assert!(!a.body.contains("href=\\\"javascript"), "{}", a.body);
}

#[test]
fn a_websocket_upgrade_checks_the_cookie_and_the_origin() {
    let (_sb, w, _d) = web();
    let cookie = w.cookie();
    let host = w.host();
    let upgrade = |origin: Option<&str>| {
        let mut h = w.upgrade_headers();
        h.push(("Host", &host));
        h.push(("Cookie", &cookie));
        if let Some(o) = origin {
            h.push(("Origin", o));
        }
        w.request("GET", "/ws", &h, "")
    };
    let other = format!("http://localhost:{}", w.port.wrapping_add(1));
    for origin in ["http://evil.example", other.as_str()] {
        let a = upgrade(Some(origin));
        assert_eq!(a.status, 403, "{origin}: {a:?}");
    }
    // This server's origin, with the cookie: the upgrade happens (the daemon starts for it).
    let a = upgrade(Some(&w.origin()));
    assert_eq!(a.status, 101, "{a:?}");
}

#[test]
fn a_non_loopback_address_is_refused_with_exit_2() {
    let sb = Sandbox::new();
    for host in ["0.0.0.0", "::", "192.0.2.1"] {
        let r = sb.run(&["web", "--host", host]);
        assert_eq!(r.code, 2, "{host}: {}", r.stderr);
        assert!(r.stdout.is_empty(), "no URL: {}", r.stdout);
        r.assert_stderr("loopback addresses only");
    }
}
