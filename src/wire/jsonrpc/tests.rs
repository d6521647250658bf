//! Unit tests of the JSON-RPC peer: every way a line can be invalid, with the exact response
//! line; ids echoed byte for byte; message kinds; framing through `LineDecoder`; the writers;
//! and a seeded fuzz loop over random lines.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::*;
use crate::wire::jsonl::LineDecoder;

/// The error line sent back for `line`, which must be invalid.
fn answer(line: &[u8]) -> String {
    match parse_line(line) {
        Incoming::Invalid(e) => e.line(),
        other => panic!("{:?} parsed as {other:?}", String::from_utf8_lossy(line)),
    }
}

fn err(id: &str, code: i64, message: &str) -> String {
    format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"error\":{{\"code\":{code},\"message\":{}}}}}\n",
        Value::from(message)
    )
}

#[test]
fn invalid_lines_get_the_exact_error_line() {
    let parse = |m: &str| err("null", PARSE_ERROR, &format!("Parse error: {m}"));
    let inv = |id: &str, m: &str| err(id, INVALID_REQUEST, &format!("Invalid request: {m}"));
    let batch = "batches (JSON arrays) are not supported; send one message per line";
    let table: Vec<(&[u8], String)> = vec![
        (b"", parse("the line is empty")),
        (b" \t\r ", parse("the line is empty")),
        (b"not json", parse("expected ident at line 1 column 2")),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"a""#,
            parse("EOF while parsing an object at line 1 column 36"),
        ),
        (
            br#"{"jsonrpc":"2.0","method":"a"} {}"#,
            parse("trailing characters at line 1 column 32"),
        ),
        (
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\xff\"}",
            parse("the line is not valid UTF-8 (invalid byte at offset 35)"),
        ),
        (
            b"\xef\xbb\xbf{}",
            parse("expected value at line 1 column 1"),
        ),
        (b"[]", inv("null", batch)),
        (
            br#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#,
            inv("null", batch),
        ),
        (
            br#"[{"jsonrpc":"2.0","id":1,"method":"a"},"#,
            parse("EOF while parsing a value at line 1 column 39"),
        ),
        (b"5", inv("null", "expected a JSON object, got a number")),
        (
            b" \"x\" ",
            inv("null", "expected a JSON object, got a string"),
        ),
        (b"null", inv("null", "expected a JSON object, got null")),
        (
            b"true",
            inv("null", "expected a JSON object, got a boolean"),
        ),
        (
            br#"{"id":1,"method":"a"}"#,
            inv("1", "member `jsonrpc` is missing; it must be \"2.0\""),
        ),
        (
            br#"{"jsonrpc":"1.0","id":"a","method":"a"}"#,
            inv("\"a\"", "`jsonrpc` must be \"2.0\", got \"1.0\""),
        ),
        (
            br#"{"jsonrpc":2.0,"id":1,"method":"a"}"#,
            inv("1", "`jsonrpc` must be \"2.0\", got 2.0"),
        ),
        (
            br#"{"jsonrpc":"2.0","method":1,"params":"bar"}"#,
            inv("null", "`method` must be a string, got a number"),
        ),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":null}"#,
            inv("7", "`method` must be a string, got null"),
        ),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":"a","params":"bar"}"#,
            inv("7", "`params` must be an object or an array, got a string"),
        ),
        (
            br#"{"jsonrpc":"2.0","id":7,"method":"a","params":0}"#,
            inv("7", "`params` must be an object or an array, got a number"),
        ),
        (
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"a"}"#,
            inv(
                "null",
                "`id` must be a string, a number or null, got an object",
            ),
        ),
        (
            br#"{"jsonrpc":"2.0","id":[1],"method":"a"}"#,
            inv(
                "null",
                "`id` must be a string, a number or null, got an array",
            ),
        ),
        (
            br#"{"jsonrpc":"2.0","id":true,"method":"a"}"#,
            inv(
                "null",
                "`id` must be a string, a number or null, got a boolean",
            ),
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"a"}"#,
            inv("null", "member `id` appears more than once"),
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"a","method":"b"}"#,
            inv("1", "member `method` appears more than once"),
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":"a","result":{}}"#,
            inv(
                "1",
                "a message with `method` cannot also have `result` or `error`",
            ),
        ),
        (
            br#"{"jsonrpc":"2.0","id":1,"result":1,"error":{"code":1,"message":"m"}}"#,
            inv("null", "a response cannot have both `result` and `error`"),
        ),
        (
            br#"{"jsonrpc":"2.0","result":1}"#,
            inv("null", "a response must have an `id`"),
        ),
        (
            br#"{"id":3,"result":1}"#,
            inv("null", "member `jsonrpc` is missing; it must be \"2.0\""),
        ),
        (
            br#"{"jsonrpc":"2.0","id":3,"error":{"code":"x","message":"m"}}"#,
            inv(
                "null",
                "`error` must be an object with an integer `code` and a string `message`: \
                 invalid type: string \"x\", expected i64",
            ),
        ),
        (
            br#"{"jsonrpc":"2.0","id":3,"error":{"code":1.5,"message":"m"}}"#,
            inv(
                "null",
                "`error` must be an object with an integer `code` and a string `message`: \
                 invalid type: floating point `1.5`, expected i64",
            ),
        ),
        (
            br#"{"jsonrpc":"2.0","id":3,"error":{"code":1}}"#,
            inv(
                "null",
                "`error` must be an object with an integer `code` and a string `message`: \
                 missing field `message`",
            ),
        ),
        (
            br#"{"jsonrpc":"2.0","id":3,"error":[1,"m"]}"#,
            inv(
                "null",
                "`error` must be an object with an integer `code` and a string `message`, got \
                 an array",
            ),
        ),
        (
            br#"{"jsonrpc":"2.0","id":3}"#,
            inv(
                "3",
                "the object has no `method` (a request or notification) and no `result` or \
                 `error` (a response)",
            ),
        ),
    ];
    for (line, want) in table {
        assert_eq!(answer(line), want, "{:?}", String::from_utf8_lossy(line));
        let v: Value = serde_json::from_str(&want).unwrap();
        assert_eq!(v["jsonrpc"], "2.0");
    }
}

#[test]
fn too_long_line_names_the_cap() {
    let frame = Frame::TooLong {
        bytes: MAX_LINE_BYTES + 1,
    };
    let Incoming::Invalid(e) = parse_frame(&frame, MAX_LINE_BYTES) else {
        panic!("a too-long frame must be invalid");
    };
    assert_eq!(
        e.line(),
        err(
            "null",
            INVALID_REQUEST,
            "Invalid request: the line is 16777217 bytes, over the cap of 16777216 bytes \
             (16 MiB); it was not read"
        )
    );
    assert_eq!(
        too_long(70_000, 65_536).error.message,
        "Invalid request: the line is 70000 bytes, over the cap of 65536 bytes (64 KiB); it was \
         not read"
    );
    assert!(too_long(101, 100)
        .error
        .message
        .contains("cap of 100 bytes (100 bytes)"));
}

/// A request, as (id text, method, params text).
fn request(line: &str) -> (String, String, Option<String>) {
    match parse_line(line.as_bytes()) {
        Incoming::Request { id, method, params } => (
            id.text().to_string(),
            method,
            params.map(|p| p.get().to_string()),
        ),
        other => panic!("{line} parsed as {other:?}"),
    }
}

#[test]
fn ids_are_echoed_byte_for_byte() {
    let ids = [
        "98765432109876543210",
        "123456789012345678901234567890",
        "-9223372036854775809",
        "1.5",
        "1.50",
        "1e2",
        "-0",
        "1E+400",
        "\"p1\"",
        "\"\\u0041\\n\\\"\\\\\"",
        "\"\u{2028}é\"",
        "null",
    ];
    for text in ids {
        let line = format!(r#"{{"jsonrpc":"2.0", "id" :  {text} , "method":"ping"}}"#);
        let (id_text, method, params) = request(&line);
        assert_eq!(
            (id_text.as_str(), method.as_str(), params),
            (text, "ping", None)
        );
        let id = Id(text.into());
        let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{text},");
        assert!(result_line(&id, &json!({})).starts_with(&head));
        assert!(raw_result_line(&id, "[]").starts_with(&head));
        assert!(error_line(Some(&id), METHOD_NOT_FOUND, "m", None).starts_with(&head));
        // An invalid request echoes the id it could read.
        let bad = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"a","params":1}}"#);
        assert!(answer(bad.as_bytes()).starts_with(&head), "{bad}");
        // A response keeps the id as written too.
        let resp = format!(r#"{{"jsonrpc":"2.0","id":{text},"result":null}}"#);
        match parse_line(resp.as_bytes()) {
            Incoming::Response { id, result } => {
                assert_eq!(id.text(), text);
                assert_eq!(result.unwrap().get(), "null");
            }
            other => panic!("{resp} parsed as {other:?}"),
        }
    }
    assert_eq!(Id("\"a\\u0062\"".into()).as_string().as_deref(), Some("ab"));
    assert_eq!(Id("7".into()).as_string(), None);
    assert_eq!(Id::from(42).text(), "42");
    assert_ne!(Id("1".into()), Id("1.0".into()));
}

#[test]
fn requests_notifications_and_responses() {
    // Params are kept as their source text, whitespace included.
    let (id, method, params) = request(
        r#"{"params": { "sessionId" : "s\u0031" }, "method":"session/detach","id":"r1","jsonrpc":"2.0"}"#,
    );
    assert_eq!(
        (id.as_str(), method.as_str(), params.as_deref()),
        (
            "\"r1\"",
            "session/detach",
            Some(r#"{ "sessionId" : "s\u0031" }"#)
        )
    );
    // Array params; null params are no params; unknown members are ignored, even deep ones;
    // member names and the version may be written with escapes.
    assert_eq!(
        request(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":[1,[2]]}"#)
            .2
            .as_deref(),
        Some("[1,[2]]")
    );
    assert_eq!(
        request(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#).2,
        None
    );
    let deep = format!("{}{}", "[".repeat(500), "]".repeat(500));
    let line =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","x":{deep},"params":{{"d":{deep}}}}}"#);
    assert_eq!(request(&line).2, Some(format!("{{\"d\":{deep}}}")));
    assert_eq!(
        request(r#"{"jsonrpc":"2\u002e0","i\u0064":2,"m\u0065thod":"\u0070ing"}"#),
        ("2".to_string(), "ping".to_string(), None)
    );

    match parse_line(br#"{"jsonrpc":"2.0","method":"session/event","params":{"seq":1}}"#) {
        Incoming::Notification { method, params } => {
            assert_eq!(method, "session/event");
            assert_eq!(params.unwrap().get(), r#"{"seq":1}"#);
        }
        other => panic!("{other:?}"),
    }
    match parse_line(br#"{"jsonrpc":"2.0","method":"session/cancel"}"#) {
        Incoming::Notification { method, params } => {
            assert_eq!(
                (method.as_str(), params.is_none()),
                ("session/cancel", true)
            );
        }
        other => panic!("{other:?}"),
    }
    match parse_line(br#"{"jsonrpc":"2.0","id":0,"result":{"outcome":{"outcome":"selected"}}}"#) {
        Incoming::Response { id, result } => {
            assert_eq!(id.text(), "0");
            assert_eq!(
                result.unwrap().get(),
                r#"{"outcome":{"outcome":"selected"}}"#
            );
        }
        other => panic!("{other:?}"),
    }
    // An error response; id null is allowed (the peer could not read our id).
    match parse_line(br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32800,"message":"cancelled","data":{"a":[1]}}}"#) {
        Incoming::Response { id, result } => {
            assert_eq!(id.text(), "null");
            assert_eq!(
                result.unwrap_err(),
                ErrorObject {
                    code: REQUEST_CANCELLED,
                    message: "cancelled".into(),
                    data: Some(json!({"a":[1]})),
                }
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn crlf_before_lf_is_stripped_by_the_decoder() {
    let mut dec = LineDecoder::default();
    let mut frames = Vec::new();
    dec.push(
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\r\n\r\n",
        &mut frames,
    );
    frames.extend(dec.finish());
    let got: Vec<Incoming> = frames
        .iter()
        .map(|f| parse_frame(f, MAX_LINE_BYTES))
        .collect();
    assert_eq!(got.len(), 3);
    assert!(
        matches!(&got[0], Incoming::Request { id, method, .. } if id.text() == "1" && method == "ping")
    );
    assert!(matches!(&got[1], Incoming::Notification { method, .. } if method == "n"));
    // The blank line (just CR LF) is empty, not a CR.
    assert!(
        matches!(&got[2], Incoming::Invalid(e) if e.error.message == "Parse error: the line is empty")
    );
}

/// A notification line of exactly `len` bytes.
fn notification_of_len(len: usize) -> Vec<u8> {
    let head = br#"{"jsonrpc":"2.0","method":"m","params":[""#;
    let tail = br#""]}"#;
    let mut line = head.to_vec();
    line.resize(len - tail.len(), b'a');
    line.extend_from_slice(tail);
    line
}

#[test]
fn line_of_cap_plus_one_is_refused_and_the_next_line_is_read() {
    let mut dec = LineDecoder::default();
    let mut frames = Vec::new();
    let mut input = notification_of_len(MAX_LINE_BYTES + 1);
    input.extend_from_slice(b"\r\n");
    input.extend_from_slice(&notification_of_len(MAX_LINE_BYTES));
    input.extend_from_slice(b"\n{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}\n");
    for chunk in input.chunks(64 * 1024) {
        dec.push(chunk, &mut frames);
        assert!(dec.buffered() <= MAX_LINE_BYTES);
    }
    assert_eq!(dec.finish(), None);
    let got: Vec<Incoming> = frames
        .iter()
        .map(|f| parse_frame(f, MAX_LINE_BYTES))
        .collect();
    assert_eq!(got.len(), 3);
    let Incoming::Invalid(e) = &got[0] else {
        panic!("{:?}", got[0]);
    };
    assert_eq!(
        e.line(),
        too_long(MAX_LINE_BYTES + 1, MAX_LINE_BYTES).line()
    );
    assert!(e
        .line()
        .contains("16777217 bytes, over the cap of 16777216 bytes (16 MiB)"));
    // A line of exactly the cap is read.
    let Incoming::Notification { params, .. } = &got[1] else {
        panic!("a line of exactly the cap must be read");
    };
    let envelope = r#"{"jsonrpc":"2.0","method":"m","params":}"#;
    assert_eq!(
        params.as_ref().unwrap().get().len(),
        MAX_LINE_BYTES - envelope.len()
    );
    assert!(matches!(&got[2], Incoming::Request { id, .. } if id.text() == "9"));
}

/// Checks the shape every output line has, and returns it parsed.
fn one_line(line: &str) -> Value {
    assert!(line.starts_with("{\"jsonrpc\":\"2.0\","), "{line}");
    assert!(line.ends_with('\n'), "{line}");
    assert_eq!(line.matches('\n').count(), 1, "{line}");
    serde_json::from_str(line).unwrap()
}

#[test]
fn writers_produce_lines_that_parse_back() {
    let id = Id("\"r\\u00e9\"".into());
    let result =
        json!({"sessionId":"s1","seq":12345678901234567u64,"text":"a\nb\u{2028}","none":null});
    let line = result_line(&id, &result);
    assert_eq!(
        one_line(&line),
        json!({"jsonrpc":"2.0","id":"ré","result":result})
    );
    match parse_line(line.trim_end().as_bytes()) {
        Incoming::Response {
            id: got,
            result: Ok(r),
        } => {
            assert_eq!(got, id);
            assert_eq!(serde_json::from_str::<Value>(r.get()).unwrap(), result);
        }
        other => panic!("{other:?}"),
    }

    // Raw results: line breaks (whitespace in valid JSON) become spaces.
    let raw = raw_result_line(
        &Id::from(3),
        "{\n  \"a\": [1,\r\n 2],\n  \"s\": \"x\\ny\"\n}",
    );
    assert_eq!(
        one_line(&raw),
        json!({"jsonrpc":"2.0","id":3,"result":{"a":[1,2],"s":"x\ny"}})
    );

    let e = error_line(None, PARSE_ERROR, "Parse error: \"quoted\"\n", None);
    assert_eq!(
        e,
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error: \\\"quoted\\\"\\n\"}}\n"
    );
    let e = error_line(
        Some(&id),
        COMMAND_FAILED,
        "failed",
        Some(json!({"detail":[1]})),
    );
    assert_eq!(
        one_line(&e),
        json!({"jsonrpc":"2.0","id":"ré","error":{"code":-32000,"message":"failed","data":{"detail":[1]}}})
    );
    match parse_line(e.trim_end().as_bytes()) {
        Incoming::Response {
            result: Err(obj), ..
        } => {
            assert_eq!(
                obj,
                ErrorObject {
                    code: COMMAND_FAILED,
                    message: "failed".into(),
                    data: Some(json!({"detail":[1]}))
                }
            );
            assert_eq!(error_object_line(Some(&id), &obj), e);
        }
        other => panic!("{other:?}"),
    }

    let n = notification_line(
        "session/event",
        &json!({"seq":1,"event":{"type":"agent_start"}}),
    )
    .unwrap();
    assert_eq!(
        n,
        "{\"jsonrpc\":\"2.0\",\"method\":\"session/event\",\"params\":{\"seq\":1,\"event\":{\"type\":\"agent_start\"}}}\n"
    );
    assert!(
        matches!(parse_line(n.trim_end().as_bytes()), Incoming::Notification { method, .. } if method == "session/event")
    );
    assert_eq!(
        notification_line("daemon/x", &()).unwrap(),
        "{\"jsonrpc\":\"2.0\",\"method\":\"daemon/x\"}\n"
    );

    let r = request_line(
        &Id::from(7),
        "session/request_permission",
        &json!({"sessionId":"s"}),
    )
    .unwrap();
    assert_eq!(
        r,
        "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"session/request_permission\",\"params\":{\"sessionId\":\"s\"}}\n"
    );
    assert_eq!(
        request(r.trim_end()),
        (
            "7".into(),
            "session/request_permission".into(),
            Some("{\"sessionId\":\"s\"}".into())
        )
    );
    assert_eq!(
        request_line(&Id::from(8), "m\"", &None::<u8>).unwrap(),
        "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"m\\\"\"}\n"
    );
}

#[test]
fn a_result_that_cannot_be_encoded_is_an_internal_error_for_the_same_id() {
    let mut bad = BTreeMap::new();
    bad.insert(vec![1u8], 1);
    let line = result_line(&Id::from(5), &bad);
    let v = one_line(&line);
    assert_eq!(v["id"], 5);
    assert_eq!(v["error"]["code"], INTERNAL_ERROR);
    assert_eq!(
        v["error"]["message"],
        "Internal error: the result could not be encoded: key must be a string"
    );
    assert!(notification_line("m", &bad).is_err());
    assert!(request_line(&Id::from(1), "m", &bad).is_err());
}

#[test]
fn error_codes_are_distinct() {
    let codes = [
        PARSE_ERROR,
        INVALID_REQUEST,
        METHOD_NOT_FOUND,
        INVALID_PARAMS,
        INTERNAL_ERROR,
        COMMAND_FAILED,
        VERSION_MISMATCH,
        HELLO_FIRST,
        UNKNOWN_SESSION,
        SESSION_BUSY,
        ALREADY_ANSWERED,
        SANDBOXED_PEER,
        REQUEST_CANCELLED,
        RESOURCE_NOT_FOUND,
    ];
    let mut sorted = codes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), codes.len());
}

/// xorshift64*: small, seeded, good enough to drive a fuzz loop.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const CORPUS: &[&[u8]] = &[
    br#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#,
    br#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}"#,
    br#"{"jsonrpc":"2.0","id":"a","result":{"outcome":null}}"#,
    br#"{"jsonrpc":"2.0","id":2,"error":{"code":-32800,"message":"c","data":[1]}}"#,
    br#"[{"jsonrpc":"2.0","id":1,"method":"a"}]"#,
];

const FRAGMENTS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b" ",
    b"\"jsonrpc\"",
    b"\"2.0\"",
    b"\"id\"",
    b"\"method\"",
    b"\"params\"",
    b"\"result\"",
    b"\"error\"",
    b"null",
    b"1",
    b"-1.5e3",
    b"true",
    b"\\",
    b"\\u00",
    b"\r",
    b"\n",
    b"\xff",
    b"\xe2\x80\xa8",
    b"\"code\"",
    b"\"message\"",
];

/// One random line: random bytes, fragments, or a mutated valid message.
fn random_line(rng: &mut Rng, out: &mut Vec<u8>) {
    match rng.below(3) {
        0 => (0..rng.below(40)).for_each(|_| out.push(rng.next() as u8)),
        1 => (0..rng.below(16))
            .for_each(|_| out.extend_from_slice(FRAGMENTS[rng.below(FRAGMENTS.len())])),
        _ => {
            let mut line = CORPUS[rng.below(CORPUS.len())].to_vec();
            for _ in 0..rng.below(4) {
                let at = rng.below(line.len() + 1);
                match rng.below(3) {
                    0 if at < line.len() => {
                        line.remove(at);
                    }
                    1 => line
                        .splice(
                            at..at,
                            FRAGMENTS[rng.below(FRAGMENTS.len())].iter().copied(),
                        )
                        .for_each(drop),
                    _ => line.insert(at, rng.next() as u8),
                }
            }
            out.extend_from_slice(&line);
        }
    }
}

/// The number of records in `input` (LF-terminated, plus an unterminated last one).
fn records(input: &[u8]) -> usize {
    let lfs = input.iter().filter(|&&b| b == b'\n').count();
    lfs + usize::from(!input.is_empty() && !input.ends_with(b"\n"))
}

/// Re-encodes a valid message with the writers and checks it parses back the same.
fn round_trip(msg: &Incoming) {
    let raw = |p: &Option<Box<RawValue>>| p.as_ref().map(|p| p.get().to_string());
    match msg {
        Incoming::Request { id, method, params } => {
            let line = request_line(id, method, params).unwrap();
            let again = request(line.trim_end_matches('\n'));
            assert_eq!(again, (id.text().to_string(), method.clone(), raw(params)));
        }
        Incoming::Notification { method, params } => {
            let line = notification_line(method, params).unwrap();
            match parse_line(line.trim_end_matches('\n').as_bytes()) {
                Incoming::Notification {
                    method: m,
                    params: p,
                } => {
                    assert_eq!((&m, raw(&p)), (method, raw(params)));
                }
                other => panic!("{line} parsed as {other:?}"),
            }
        }
        Incoming::Response { id, result } => {
            let line = match result {
                Ok(r) => raw_result_line(id, r.get()),
                Err(e) => error_object_line(Some(id), e),
            };
            assert!(
                matches!(parse_line(line.trim_end_matches('\n').as_bytes()), Incoming::Response { id: i, .. } if &i == id)
            );
        }
        Incoming::Invalid(e) => {
            let v = one_line(&e.line());
            assert!(
                [PARSE_ERROR, INVALID_REQUEST].contains(&e.error.code),
                "{v}"
            );
            assert!(
                matches!(v["id"], Value::Null | Value::String(_) | Value::Number(_)),
                "{v}"
            );
        }
    }
}

#[test]
fn random_lines_never_panic_and_get_one_outcome_each() {
    const CASES: usize = 20_000;
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut kinds = [0usize; 4];
    let mut input = Vec::new();
    for _ in 0..CASES {
        input.clear();
        for _ in 0..1 + rng.below(3) {
            random_line(&mut rng, &mut input);
            if rng.below(4) > 0 {
                input.extend_from_slice(if rng.below(2) == 0 { b"\n" } else { b"\r\n" });
            }
        }
        let cap = [24, 64, MAX_LINE_BYTES][rng.below(3)];
        let mut dec = LineDecoder::new(cap);
        let mut frames = Vec::new();
        for chunk in input.chunks(1 + rng.below(16)) {
            dec.push(chunk, &mut frames);
        }
        frames.extend(dec.finish());
        let outcomes: Vec<Incoming> = frames.iter().map(|f| parse_frame(f, cap)).collect();
        assert_eq!(
            outcomes.len(),
            records(&input),
            "{:?}",
            String::from_utf8_lossy(&input)
        );
        for msg in &outcomes {
            round_trip(msg);
            kinds[match msg {
                Incoming::Request { .. } => 0,
                Incoming::Notification { .. } => 1,
                Incoming::Response { .. } => 2,
                Incoming::Invalid(_) => 3,
            }] += 1;
        }
    }
    // The loop reached every kind of outcome, so the checks above were exercised.
    assert!(kinds.iter().all(|&n| n > 100), "{kinds:?}");
}
