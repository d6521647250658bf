//! The Responses rows: the Chat Completions run of the openai rows and a Responses run of the
//! same number of one-token deltas, each against a fresh one-shot local server, interleaved so
//! both see the same machine, and their ratio.

use std::fmt::Write as _;

use super::{json_run, median, openai, Res, Row, Sandbox, DELTAS};

/// A Responses event stream of `n` one-token `output_text.delta` events, as OpenAI frames it
/// (`event:` line, `sequence_number`), then the item's end and `response.completed` with usage.
pub fn responses_stream(n: u64) -> Vec<u8> {
    let mut body = String::new();
    let event = |body: &mut String, data: String| {
        let kind = data
            .split('"')
            .nth(3)
            .unwrap_or("response.unknown")
            .to_string();
        let _ = write!(body, "event: {kind}\ndata: {data}\n\n");
    };
    event(&mut body, r#"{"type":"response.created","response":{"id":"resp_b","status":"in_progress","model":"bench"},"sequence_number":0}"#.into());
    event(&mut body, r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","id":"msg_b","status":"in_progress","role":"assistant","content":[]},"sequence_number":1}"#.into());
    for i in 0..n {
        event(
            &mut body,
            format!(
                r#"{{"type":"response.output_text.delta","item_id":"msg_b","output_index":0,"content_index":0,"delta":"t{} ","sequence_number":{}}}"#,
                i % 10,
                i + 2
            ),
        );
    }
    event(&mut body, r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"message","id":"msg_b","status":"completed","role":"assistant","content":[]}}"#.into());
    event(
        &mut body,
        format!(
            r#"{{"type":"response.completed","response":{{"id":"resp_b","status":"completed","usage":{{"input_tokens":10,"output_tokens":{n},"total_tokens":{}}}}}}}"#,
            n + 10
        ),
    );
    body.into_bytes()
}

/// One JSON-mode run against a one-shot server of `body`; `responses`: through a models.json
/// provider speaking the Responses API, else `--base-url` (Chat Completions). Returns ms.
fn run(keel: &std::path::Path, body: &[u8], responses: bool) -> Res<f64> {
    let sb = Sandbox::new()?;
    let (url, server) = openai::serve_once(body.to_vec())?;
    let (ms, _) = if responses {
        let models = format!(
            r#"{{"providers":{{"bench":{{"baseUrl":"{url}","api":"openai-responses","models":[{{"id":"bench"}}]}}}}}}"#
        );
        std::fs::write(sb.home.join("models.json"), models)
            .map_err(|e| format!("write models.json: {e}"))?;
        let args = ["--json", "--model", "bench/bench", "--no-session", "go"];
        json_run(keel, &sb, &args)?
    } else {
        let args = [
            "--json",
            "--base-url",
            &url,
            "--model",
            "bench",
            "--no-session",
            "go",
        ];
        json_run(keel, &sb, &args)?
    };
    server.join().map_err(|_| "the bench server panicked")??;
    Ok(ms)
}

/// Pushes the Responses wall time beside the Chat Completions one and their ratio (goal: at
/// most 1.1x).
pub fn responses_bench(keel: &std::path::Path, rows: &mut Vec<Row>, heavy: usize) -> Res<()> {
    let chat = openai::openai_stream(DELTAS);
    let resp = responses_stream(DELTAS);
    let (mut c, mut r) = (Vec::new(), Vec::new());
    for _ in 0..heavy {
        c.push(run(keel, &chat, false)?);
        r.push(run(keel, &resp, true)?);
    }
    rows.push(Row::stats(
        &format!("json mode over HTTP, Chat Completions, {DELTAS} deltas (paired with the next row): wall time"),
        &c,
        "ms",
        0,
    ));
    rows.push(Row::stats(
        &format!(
            "json mode over HTTP, Responses API, {DELTAS} deltas ({:.1} MB): wall time",
            resp.len() as f64 / 1e6
        ),
        &r,
        "ms",
        0,
    ));
    rows.push(Row::single(
        "Responses / Chat Completions wall time (medians; goal <= 1.1)",
        median(&r) / median(&c),
        "x",
        2,
    ));
    Ok(())
}
