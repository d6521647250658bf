//! The Gemini rows: a print run (`-p`) against a one-shot local server streaming the Chat
//! Completions body of the openai rows, and one streaming a Gemini body of the same one-token
//! text parts, interleaved so both see the same machine, and their ratio.

use std::fmt::Write as _;
use std::io::Read;
use std::process::Stdio;
use std::time::Instant;

use super::{check_status, file, keel_cmd, median, openai, Res, Row, Sandbox, DELTAS};

/// A Gemini SSE body of `n` chunks of one text part each, framed as the API frames them
/// (CRLF, `usageMetadata`, `modelVersion` and `responseId` on every chunk), the last with
/// `finishReason: STOP`.
pub fn gemini_stream(n: u64) -> Vec<u8> {
    let mut body = String::new();
    for i in 0..n {
        let finish = if i + 1 == n {
            r#","finishReason":"STOP""#
        } else {
            ""
        };
        let _ = write!(
            body,
            "data: {{\"candidates\":[{{\"content\":{{\"parts\":[{{\"text\":\"t{} \"}}],\"role\":\"model\"}},\"index\":0{finish}}}],\"usageMetadata\":{{\"promptTokenCount\":10,\"candidatesTokenCount\":{},\"totalTokenCount\":{}}},\"modelVersion\":\"bench\",\"responseId\":\"resp-bench\"}}\r\n\r\n",
            i % 10,
            i + 1,
            i + 11
        );
    }
    body.into_bytes()
}

/// One print run (`-p`, no session) against a one-shot server of `body`; `gemini`: as the
/// `google` provider moved there by `GOOGLE_GEMINI_BASE_URL`, else `--base-url` (Chat
/// Completions). Checks the printed answer; returns ms.
fn run(keel: &std::path::Path, body: &[u8], gemini: bool) -> Res<f64> {
    let sb = Sandbox::new()?;
    let (url, server) = openai::serve_once(body.to_vec())?;
    let stderr_path = sb.cwd.join("keel.stderr");
    let mut cmd = keel_cmd(keel, &sb.cwd, &sb.home);
    if gemini {
        cmd.env("GOOGLE_GEMINI_BASE_URL", &url)
            .env("GEMINI_API_KEY", "bench")
            .args(["-p", "--no-session", "--model", "google/bench", "go"]);
    } else {
        cmd.args([
            "-p",
            "--no-session",
            "--base-url",
            &url,
            "--model",
            "bench",
            "go",
        ]);
    }
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(file(&stderr_path)?)
        .spawn()
        .map_err(|e| format!("cannot spawn keel: {e}"))?;
    let mut out = Vec::new();
    child
        .stdout
        .take()
        .ok_or("no stdout pipe")?
        .read_to_end(&mut out)
        .map_err(|e| format!("read stdout: {e}"))?;
    let status = child.wait().map_err(|e| format!("wait: {e}"))?;
    let ms = start.elapsed().as_secs_f64() * 1e3;
    check_status(status, &stderr_path)?;
    server.join().map_err(|_| "the bench server panicked")??;
    let tokens = out
        .split(|b| *b == b' ')
        .filter(|t| t.starts_with(b"t"))
        .count();
    if tokens as u64 != DELTAS {
        return Err(format!(
            "print run printed {tokens} tokens, expected {DELTAS}"
        ));
    }
    Ok(ms)
}

/// Pushes the Gemini print wall time beside the Chat Completions one and their ratio (goal: at
/// most 1.1x).
pub fn gemini_bench(keel: &std::path::Path, rows: &mut Vec<Row>, heavy: usize) -> Res<()> {
    let chat = openai::openai_stream(DELTAS);
    let gem = gemini_stream(DELTAS);
    let (mut c, mut g) = (Vec::new(), Vec::new());
    for _ in 0..heavy {
        c.push(run(keel, &chat, false)?);
        g.push(run(keel, &gem, true)?);
    }
    rows.push(Row::stats(
        &format!("print mode over HTTP, Chat Completions, {DELTAS} deltas (paired with the next row): wall time"),
        &c,
        "ms",
        0,
    ));
    rows.push(Row::stats(
        &format!(
            "print mode over HTTP, Gemini API, {DELTAS} parts ({:.1} MB): wall time",
            gem.len() as f64 / 1e6
        ),
        &g,
        "ms",
        0,
    ));
    rows.push(Row::single(
        "Gemini / Chat Completions print wall time (medians; goal <= 1.1)",
        median(&g) / median(&c),
        "x",
        2,
    ));
    Ok(())
}
