//! The openai rows' helpers: a Chat Completions SSE body of n chunks, the provider's decoder
//! timed in-process, and a one-shot local HTTP server that serves such a body.

use std::fmt::Write as _;
use std::io::Read;
use std::time::Instant;

use super::{Res, DELTAS};

/// A Chat Completions SSE body of `n` one-token content chunks, then finish, usage, [DONE].
pub fn openai_stream(n: u64) -> Vec<u8> {
    let mut body = String::new();
    for i in 0..n {
        let _ = write!(
            body,
            "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{} \"}},\"finish_reason\":null}}]}}\n\n",
            i % 10
        );
    }
    body.push_str("data: {\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n");
    body.push_str(&format!("data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"bench\",\"choices\":[],\"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":{n},\"total_tokens\":{}}}}}\n\n", n + 10));
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// Decodes `body` with keel's SSE and OpenAI decoders in 16 KiB pieces; returns ms.
pub fn decode_openai(body: &[u8]) -> Res<f64> {
    use keel::kernel::provider::model::{ModelInfo, API_OPENAI};
    use keel::kernel::provider::openai::OpenAiDecoder;
    use keel::kernel::provider::sse::{SseDecoder, StreamDecoder};
    use keel::kernel::provider::ProviderEvent;
    let info = ModelInfo::unlisted("bench", API_OPENAI, "http://127.0.0.1", "bench");
    let start = Instant::now();
    let mut sse = SseDecoder::new();
    let mut dec = OpenAiDecoder::new(&info);
    let (mut events, mut out) = (Vec::new(), Vec::new());
    let (mut texts, mut done) = (0u64, false);
    let mut count = |out: &mut Vec<ProviderEvent>| {
        for e in out.drain(..) {
            match e {
                ProviderEvent::Text(_) => texts += 1,
                ProviderEvent::Done { .. } => done = true,
                _ => {}
            }
        }
    };
    for piece in body.chunks(16 * 1024) {
        sse.push(piece, &mut events).unwrap();
        for e in events.drain(..) {
            dec.on_event(&e, &mut out);
        }
        count(&mut out);
    }
    sse.finish(&mut events).unwrap();
    for e in events.drain(..) {
        dec.on_event(&e, &mut out);
    }
    dec.finish(&mut out);
    count(&mut out);
    let ms = start.elapsed().as_secs_f64() * 1e3;
    if texts != DELTAS || !done {
        return Err(format!(
            "decoder produced {texts} text events (done: {done}), expected {DELTAS}"
        ));
    }
    Ok(ms)
}

/// Serves `body` as one streamed SSE response to the first request on a 127.0.0.1 port.
pub fn serve_once(body: Vec<u8>) -> Res<(String, std::thread::JoinHandle<Res<()>>)> {
    serve(body, 1)
}

/// Serves `body` as one streamed SSE response to each of the first `count` requests on a
/// 127.0.0.1 port, one connection at a time, then ends.
pub fn serve(body: Vec<u8>, count: usize) -> Res<(String, std::thread::JoinHandle<Res<()>>)> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let handle = std::thread::spawn(move || -> Res<()> {
        for _ in 0..count {
            let (stream, _) = listener.accept().map_err(|e| format!("accept: {e}"))?;
            answer(stream, &body)?;
        }
        Ok(())
    });
    Ok((format!("http://127.0.0.1:{port}/v1"), handle))
}

/// Reads one request (headers, then a `content-length` body) and streams `body` back.
fn answer(stream: std::net::TcpStream, body: &[u8]) -> Res<()> {
    use std::io::{BufRead, BufReader, Write};
    let mut reader = BufReader::new(stream.try_clone().map_err(|e| e.to_string())?);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).map_err(|e| e.to_string())?;
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            length = v.trim().parse().map_err(|_| "bad content-length")?;
        }
    }
    let mut req = vec![0u8; length];
    reader.read_exact(&mut req).map_err(|e| e.to_string())?;
    let mut stream = stream;
    stream
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n",
        )
        .map_err(|e| e.to_string())?;
    for piece in body.chunks(16 * 1024) {
        stream.write_all(piece).map_err(|e| format!("write: {e}"))?;
    }
    Ok(())
}
