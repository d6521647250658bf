//! A scripted HTTP/1.1 server on 127.0.0.1 for provider tests: real sockets, real chunked
//! SSE bytes. Each accepted request takes the next `Reply`; the server records what it was
//! asked and reports when a client hangs up mid-stream. A reply can repeat a piece many times
//! (an endless line, keep-alive pings: always bounded, so the server stops by itself) and can
//! be strict about the request, as llama.cpp's server is.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

/// How a reply ends after its body pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The terminating chunk: a complete response.
    Complete,
    /// Close the socket with the chunked body unfinished (a cut stream).
    Cut,
    /// Keep the socket open and silent until the client goes away (a stalled stream).
    Stall,
}

/// A piece written `times` times after the reply's pieces, `every` apart, each as its own
/// chunk; stops early when the client hangs up.
#[derive(Debug, Clone)]
pub struct Repeat {
    pub piece: Vec<u8>,
    pub times: usize,
    pub every: Duration,
}

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    /// Body pieces, each written and flushed as its own HTTP chunk.
    pub pieces: Vec<Vec<u8>>,
    pub repeat: Option<Repeat>,
    pub end: End,
    /// Answer 500 instead when a request message has `"content": null` (llama.cpp does).
    pub strict: bool,
}

impl Reply {
    /// A `text/event-stream` reply of `body`, cut into pieces at awkward offsets (inside
    /// lines, inside CRLF pairs and inside multi-byte characters).
    pub fn sse(body: &[u8]) -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            pieces: awkward_pieces(body),
            repeat: None,
            end: End::Complete,
            strict: false,
        }
    }

    /// A JSON error reply.
    pub fn json(status: u16, body: &str) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            pieces: vec![body.as_bytes().to_vec()],
            repeat: None,
            end: End::Complete,
            strict: false,
        }
    }

    pub fn header(mut self, k: &str, v: &str) -> Reply {
        self.headers.push((k.into(), v.into()));
        self
    }

    pub fn ending(mut self, end: End) -> Reply {
        self.end = end;
        self
    }

    /// Writes `piece` `times` times after the pieces, `every` apart.
    pub fn repeating(mut self, piece: &[u8], times: usize, every: Duration) -> Reply {
        self.repeat = Some(Repeat {
            piece: piece.to_vec(),
            times,
            every,
        });
        self
    }

    /// Refuses a request whose messages hold a `null` content with HTTP 500.
    pub fn strict(mut self) -> Reply {
        self.strict = true;
        self
    }
}

/// What llama.cpp's server answers (HTTP 500) to a message whose `content` is `null`.
pub const NULL_CONTENT_ERROR: &str = r#"{"error":{"code":500,"message":"Invalid 'content' type: expected string or array, got null","type":"server_error"}}"#;

/// Whether a request body holds a message with `"content": null`.
fn has_null_content(body: &str) -> bool {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
        return false;
    };
    v["messages"].as_array().is_some_and(|ms| {
        ms.iter()
            .any(|m| m.get("content") == Some(&serde_json::Value::Null))
    })
}

/// Splits at offsets 1, 2, 3, 5, 8, 13, ... from each previous cut (a Fibonacci walk), so
/// pieces are small near the start and boundaries land everywhere.
pub fn awkward_pieces(body: &[u8]) -> Vec<Vec<u8>> {
    let (mut a, mut b) = (1usize, 2usize);
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let end = (at + a).min(body.len());
        out.push(body[at..end].to_vec());
        at = end;
        (a, b) = (b, (a + b).min(97));
    }
    out
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap()
    }
}

pub struct Server {
    pub port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// A message per stalled or cut reply whose client hung up.
    pub hangups: mpsc::Receiver<usize>,
}

impl Server {
    /// Serves `replies` in order, one per request; requests beyond them get a 500.
    pub fn start(replies: Vec<Reply>) -> Server {
        let replies = Mutex::new(replies.into_iter());
        Server::start_with(move |_| {
            replies.lock().unwrap().next().unwrap_or_else(|| {
                Reply::json(500, r#"{"error":{"message":"no more scripted replies"}}"#)
            })
        })
    }

    /// Answers each request with what `handler` makes of it (a server with its own logic,
    /// such as one that validates the conversation it is sent).
    pub fn start_with(handler: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (tx, hangups) = mpsc::channel();
        let log = seen.clone();
        let handler = Arc::new(handler);
        thread::spawn(move || {
            for (n, stream) in listener.incoming().enumerate() {
                let Ok(stream) = stream else { break };
                let (log, tx, handler) = (log.clone(), tx.clone(), handler.clone());
                thread::spawn(move || serve(stream, &*handler, n, &log, &tx));
            }
        });
        Server {
            port,
            seen,
            hangups,
        }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: TcpStream,
    handler: &(dyn Fn(&Seen) -> Reply + Send + Sync),
    n: usize,
    log: &Mutex<Vec<Seen>>,
    hangups: &mpsc::Sender<usize>,
) {
    stream.set_nodelay(true).unwrap();
    let Some(seen) = read_request(&mut stream) else {
        return;
    };
    let reply = handler(&seen);
    let reply = if reply.strict && has_null_content(&seen.body) {
        Reply::json(500, NULL_CONTENT_ERROR)
    } else {
        reply
    };
    log.lock().unwrap().push(seen);
    let mut head = format!("HTTP/1.1 {} X\r\n", reply.status);
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    if stream.write_all(head.as_bytes()).is_err() {
        return;
    }
    let repeated = reply.repeat.iter().flat_map(|r| {
        (0..r.times).map(move |i| {
            (
                r.piece.as_slice(),
                if i > 0 { r.every } else { Duration::ZERO },
            )
        })
    });
    let pieces = reply.pieces.iter().map(|p| (p.as_slice(), Duration::ZERO));
    // An empty chunk would be the chunked body's terminator: empty pieces are skipped.
    for (piece, pause) in pieces.chain(repeated).filter(|(p, _)| !p.is_empty()) {
        if !pause.is_zero() {
            // Pacing the server's own output, not waiting for the client.
            thread::sleep(pause);
        }
        let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
        chunk.extend_from_slice(piece);
        chunk.extend_from_slice(b"\r\n");
        if stream
            .write_all(&chunk)
            .and_then(|_| stream.flush())
            .is_err()
        {
            let _ = hangups.send(n);
            return;
        }
    }
    match reply.end {
        End::Complete => {
            let _ = stream.write_all(b"0\r\n\r\n");
        }
        End::Cut => {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        End::Stall => {
            // Wait for the client to hang up (read returns 0 or fails), bounded so a broken
            // test cannot keep the thread forever.
            stream
                .set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            let mut buf = [0u8; 64];
            loop {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => continue,
                }
            }
            let _ = hangups.send(n);
        }
    }
}

fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let mut parts = line.split_whitespace();
    let method = parts.next()?.to_string();
    let path = parts.next()?.to_string();
    let mut headers = Vec::new();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim().to_string(), v.trim().to_string());
            if k.eq_ignore_ascii_case("content-length") {
                length = v.parse().ok()?;
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0u8; length];
    reader.read_exact(&mut body).ok()?;
    Some(Seen {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
