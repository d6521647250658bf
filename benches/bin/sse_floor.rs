//! The print run's floor for the bench (never shipped as a feature): a std-only client that
//! POSTs one chat request to an OpenAI-compatible server at `http://HOST:PORT/PREFIX`, reads
//! the SSE stream and writes each content delta to stdout as it arrives (one write each),
//! then a newline, and exits. No runtime, no TLS, no JSON parser, no session: the least a
//! program that streams the same answer to a terminal can spend.
#![allow(
    clippy::disallowed_methods,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::unwrap_used
)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::ExitCode;

const BODY: &str = r#"{"model":"bench","stream":true,"messages":[{"role":"user","content":"go"}]}"#;

fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: keel-sse-floor http://HOST:PORT/PREFIX");
        return ExitCode::FAILURE;
    };
    match run(&url) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("keel-sse-floor: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(url: &str) -> Result<(), String> {
    let rest = url.strip_prefix("http://").ok_or("only http:// URLs")?;
    let (host, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let mut stream = TcpStream::connect(host).map_err(|e| format!("connect {host}: {e}"))?;
    let request = format!(
        "POST /{prefix}/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{BODY}",
        BODY.len()
    );
    stream
        .write_all(request.as_bytes())
        .map_err(|e| format!("send: {e}"))?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("the server closed before its headers ended".into());
        }
        if line.trim_end().is_empty() {
            break;
        }
    }
    let mut out = std::io::stdout().lock();
    loop {
        line.clear();
        if reader.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            break;
        }
        let Some(data) = line.trim_end().strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        if let Some(text) = content(data) {
            out.write_all(text.as_bytes())
                .and_then(|()| out.flush())
                .map_err(|e| format!("stdout: {e}"))?;
        }
    }
    out.write_all(b"\n")
        .and_then(|()| out.flush())
        .map_err(|e| format!("stdout: {e}"))
}

/// The string after the first `"content":"` up to its closing quote, with `\"`, `\\` and `\n`
/// unescaped (all this bench's stream holds).
fn content(data: &str) -> Option<String> {
    let start = data.find(r#""content":""#)? + r#""content":""#.len();
    let mut text = String::new();
    let mut chars = data[start..].chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return Some(text),
            '\\' => match chars.next()? {
                'n' => text.push('\n'),
                other => text.push(other),
            },
            c => text.push(c),
        }
    }
    None
}
