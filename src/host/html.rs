//! HTML transcript export (the RPC command `export_html`): turns a session header and the entries
//! of its active branch into one self-contained HTML5 page. Styling is inline CSS (light and dark
//! via `prefers-color-scheme`); there are no scripts and no external resources. Every string taken
//! from the session is escaped, and the output depends only on the input (no clock, no randomness).

use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// Outputs with more lines than this are folded into a collapsed `<details>`.
const FOLD_LINES: usize = 200;
/// Image types that may be inlined as `data:` URLs.
const INLINE_IMAGE_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

const STYLE: &str = "
:root{--bg:#fff;--fg:#1d1f23;--muted:#6b7079;--card:#f5f6f8;--line:#d9dce1;--accent:#2f6fde;--err:#c62828;--errbg:#fdecea}
@media (prefers-color-scheme:dark){:root{--bg:#16181c;--fg:#e3e5e8;--muted:#8d939c;--card:#1f2227;--line:#33373e;--accent:#7aa7ff;--err:#ff7b72;--errbg:#3a1d1d}}
*{box-sizing:border-box}
body{margin:0 auto;max-width:960px;padding:24px 16px;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,sans-serif}
pre,code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px}
pre{margin:6px 0;padding:8px 10px;background:var(--bg);border:1px solid var(--line);border-radius:4px;overflow-x:auto;white-space:pre-wrap;word-break:break-word}
header,footer{border-bottom:1px solid var(--line);padding-bottom:12px;margin-bottom:16px}
footer{border-top:1px solid var(--line);border-bottom:0;padding-top:12px;margin-top:24px}
h1{font-size:20px;margin:0 0 8px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0;color:var(--muted)}
dl.meta dd{margin:0;word-break:break-all}
.msg{margin:12px 0;padding:10px 12px;border-radius:6px;background:var(--card);border-left:3px solid var(--line)}
.msg.user{border-left-color:var(--accent)}
.role{font-weight:600;font-size:13px;color:var(--muted);margin-bottom:4px}
.text{white-space:pre-wrap;word-break:break-word}
.muted{color:var(--muted);font-size:13px;margin:6px 0}
details.thinking{opacity:.7;margin:6px 0}
.tool{margin:8px 0;border:1px solid var(--line);border-radius:6px;padding:6px 10px}
.result{border-top:1px dashed var(--line);margin-top:6px;padding-top:4px}
.error,.result.error{color:var(--err);background:var(--errbg)}
.box{margin:12px 0;padding:10px 12px;border:1px dashed var(--line);border-radius:6px}
img{max-width:100%;height:auto;border-radius:4px;display:block;margin:6px 0}
";

/// Escapes text for HTML element content and quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// Renders a session as one self-contained HTML page (inline CSS, no scripts needed, no external
/// resources).
/// `header`: the session header JSON object, e.g. `{"type":"session","version":3,"id":"…",
/// "timestamp":"2026-11-30T02:39:46.717Z","cwd":"/abs/proj","parentSession"?:"…"}`.
/// `entries`: the session entries on the active branch, in order, as JSON objects (pi v3 session
/// lines: `message`, `model_change`, `thinking_level_change`, `compaction`, `session_info`,
/// `branch_summary`; anything else is shown as a muted marker or skipped).
/// `title`: the session name if set, else None.
pub fn render(header: &Value, entries: &[Value], title: Option<&str>) -> String {
    let id = text_of(header, "id");
    let title = match title.map(str::trim) {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => format!("keel session {id}"),
    };
    let mut page = String::with_capacity(8192);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>{t}</h1>\n\
         <dl class=\"meta\"><dt>session</dt><dd class=\"mono\">{id}</dd>\
         <dt>cwd</dt><dd class=\"mono\">{cwd}</dd><dt>started</dt><dd>{ts}</dd>",
        t = escape(&title),
        id = escape(id),
        cwd = escape(text_of(header, "cwd")),
        ts = escape(text_of(header, "timestamp")),
    );
    if let Some(parent) = header.get("parentSession").and_then(Value::as_str) {
        let _ = write!(
            page,
            "<dt>forked from</dt><dd class=\"mono\">{}</dd>",
            escape(parent)
        );
    }
    page.push_str("</dl>\n</header>\n<main>\n");

    let mut ctx = Context::new(entries);
    for (index, entry) in entries.iter().enumerate() {
        ctx.entry(&mut page, index, entry);
    }

    let t = &ctx.totals;
    let _ = write!(
        page,
        "</main>\n<footer class=\"muted\">{} user · {} assistant · {} tool results · {} shell commands \
         · input {} tokens · output {} tokens · cost ${:.4}</footer>\n</body>\n</html>\n",
        t.user, t.assistant, t.tool_results, t.bash, t.input, t.output, t.cost
    );
    page
}

/// A string field of an object, or "" when absent or not a string.
fn text_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// A numeric field as u64 (floats are truncated; anything else is 0).
fn count_of(value: &Value, key: &str) -> u64 {
    match value.get(key) {
        Some(v) => v
            .as_u64()
            .or_else(|| v.as_f64().map(|f| f.max(0.0) as u64))
            .unwrap_or(0),
        None => 0,
    }
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

#[derive(Default)]
struct Totals {
    user: usize,
    assistant: usize,
    tool_results: usize,
    bash: usize,
    input: u64,
    output: u64,
    cost: f64,
}

/// Rendering state: tool results that are shown under their call instead of on their own.
struct Context<'a> {
    /// toolCallId → index of the first entry holding its result.
    results: HashMap<&'a str, usize>,
    entries: &'a [Value],
    /// Entry indexes already rendered next to their tool call.
    paired: HashSet<usize>,
    /// Index of the entry being rendered (only later results are pulled up to a call).
    current: usize,
    totals: Totals,
}

impl<'a> Context<'a> {
    fn new(entries: &'a [Value]) -> Self {
        let mut results = HashMap::new();
        for (index, entry) in entries.iter().enumerate() {
            let message = entry.get("message").unwrap_or(&Value::Null);
            if text_of(entry, "type") == "message" && text_of(message, "role") == "toolResult" {
                results
                    .entry(text_of(message, "toolCallId"))
                    .or_insert(index);
            }
        }
        Context {
            results,
            entries,
            paired: HashSet::new(),
            current: 0,
            totals: Totals::default(),
        }
    }

    fn entry(&mut self, out: &mut String, index: usize, entry: &Value) {
        self.current = index;
        let kind = text_of(entry, "type");
        match kind {
            "message" => self.message(out, index, entry),
            "model_change" => muted(
                out,
                &format!(
                    "model: {}/{}",
                    text_of(entry, "provider"),
                    text_of(entry, "modelId")
                ),
            ),
            "thinking_level_change" => muted(
                out,
                &format!("thinking level: {}", text_of(entry, "thinkingLevel")),
            ),
            "session_info" => muted(out, &format!("session name: {}", text_of(entry, "name"))),
            "compaction" => {
                let heading = format!(
                    "Earlier conversation summarised ({} tokens)",
                    count_of(entry, "tokensBefore")
                );
                boxed(out, &heading, text_of(entry, "summary"));
            }
            "branch_summary" => boxed(out, "Summary of another branch", text_of(entry, "summary")),
            "" => {}
            other => muted(out, &format!("[{other}]")),
        }
    }

    fn message(&mut self, out: &mut String, index: usize, entry: &Value) {
        if self.paired.contains(&index) {
            self.totals.tool_results += 1;
            return;
        }
        let message = entry.get("message").unwrap_or(&Value::Null);
        let role = text_of(message, "role");
        let stamp = escape(text_of(entry, "timestamp"));
        match role {
            "user" => {
                self.totals.user += 1;
                let _ = write!(
                    out,
                    "<section class=\"msg user\"><div class=\"role\" title=\"{stamp}\">user</div>"
                );
                self.content(out, message.get("content"));
            }
            "assistant" => {
                self.totals.assistant += 1;
                let model = format!(
                    "{}/{}",
                    text_of(message, "provider"),
                    text_of(message, "model")
                );
                let _ = write!(
                    out,
                    "<section class=\"msg assistant\"><div class=\"role\" title=\"{stamp}\">assistant · {}</div>",
                    escape(&model)
                );
                self.content(out, message.get("content"));
                self.assistant_footer(out, message);
            }
            "toolResult" => {
                self.totals.tool_results += 1;
                out.push_str("<section class=\"msg tool\">");
                self.result(out, message);
            }
            "bashExecution" => {
                self.totals.bash += 1;
                bash(out, message, &stamp);
            }
            other => {
                let _ = write!(
                    out,
                    "<section class=\"msg other\"><div class=\"role\">{}</div><pre>{}</pre>",
                    escape(if other.is_empty() { "message" } else { other }),
                    escape(&pretty(message))
                );
            }
        }
        out.push_str("</section>\n");
    }

    fn assistant_footer(&mut self, out: &mut String, message: &Value) {
        let usage = message.get("usage").unwrap_or(&Value::Null);
        let (input, output) = (count_of(usage, "input"), count_of(usage, "output"));
        let cost = usage
            .pointer("/cost/total")
            .and_then(Value::as_f64)
            .unwrap_or(0.0);
        self.totals.input += input;
        self.totals.output += output;
        self.totals.cost += cost;
        let stop = text_of(message, "stopReason");
        let mut line = format!("in {input} · out {output} · ${cost:.4}");
        if !matches!(stop, "" | "stop" | "toolUse") {
            let _ = write!(line, " · stopped: {stop}");
        }
        muted(out, &line);
        if let Some(error) = message.get("errorMessage").and_then(Value::as_str) {
            let _ = write!(out, "<div class=\"text error\">{}</div>", escape(error));
        }
    }

    /// Content as a plain string or an array of typed blocks.
    fn content(&mut self, out: &mut String, content: Option<&Value>) {
        match content {
            Some(Value::String(text)) => prose(out, text),
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    self.block(out, block);
                }
            }
            Some(other) if !other.is_null() => folded_pre(out, &pretty(other), ""),
            _ => {}
        }
    }

    fn block(&mut self, out: &mut String, block: &Value) {
        match text_of(block, "type") {
            "text" => prose(out, text_of(block, "text")),
            "thinking" => {
                let _ = write!(
                    out,
                    "<details class=\"thinking\"><summary>thinking</summary><div class=\"text\">{}</div></details>",
                    escape(text_of(block, "thinking"))
                );
            }
            "image" => image(out, block),
            "toolCall" => {
                let call_id = text_of(block, "id");
                let args = block.get("arguments").map(pretty).unwrap_or_default();
                let _ = write!(
                    out,
                    "<div class=\"tool\"><div class=\"role\">tool call · <span class=\"mono\">{}</span></div><pre>{}</pre>",
                    escape(text_of(block, "name")),
                    escape(&args)
                );
                let found = self
                    .results
                    .get(call_id)
                    .copied()
                    .filter(|i| *i > self.current && !self.paired.contains(i));
                if let Some(index) = found {
                    self.paired.insert(index);
                    if let Some(message) = self.entries.get(index).and_then(|e| e.get("message")) {
                        self.result(out, message);
                    }
                }
                out.push_str("</div>");
            }
            other => folded_pre(out, &pretty(block), &format!("{other} block")),
        }
    }

    /// A tool result body (the caller opens and closes the surrounding element).
    fn result(&mut self, out: &mut String, message: &Value) {
        let failed = message
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let _ = write!(
            out,
            "<div class=\"result{}\"><div class=\"role\">result · <span class=\"mono\">{}</span>{}</div>",
            if failed { " error" } else { "" },
            escape(text_of(message, "toolName")),
            if failed { " · error" } else { "" }
        );
        match message.get("content") {
            Some(Value::Array(blocks)) => {
                for block in blocks {
                    match text_of(block, "type") {
                        "text" => folded_pre(out, text_of(block, "text"), "output"),
                        "image" => image(out, block),
                        _ => folded_pre(out, &pretty(block), "block"),
                    }
                }
            }
            Some(Value::String(text)) => folded_pre(out, text, "output"),
            _ => {}
        }
        out.push_str("</div>");
    }
}

fn bash(out: &mut String, message: &Value, stamp: &str) {
    let _ = write!(
        out,
        "<section class=\"msg bash\"><div class=\"role\" title=\"{stamp}\">shell</div><pre>$ {}</pre>",
        escape(text_of(message, "command"))
    );
    folded_pre(out, text_of(message, "output"), "output");
    let flag = |key: &str| message.get(key).and_then(Value::as_bool).unwrap_or(false);
    let mut line = match message.get("exitCode").and_then(Value::as_i64) {
        Some(code) => format!("exit code {code}"),
        None => "no exit code".to_string(),
    };
    for (key, label) in [
        ("cancelled", "cancelled"),
        ("truncated", "output truncated"),
        ("excludeFromContext", "excluded from context"),
    ] {
        if flag(key) {
            let _ = write!(line, " · {label}");
        }
    }
    muted(out, &line);
}

fn muted(out: &mut String, text: &str) {
    let _ = writeln!(out, "<div class=\"muted\">{}</div>", escape(text));
}

fn boxed(out: &mut String, heading: &str, body: &str) {
    let _ = writeln!(
        out,
        "<section class=\"box\"><div class=\"role\">{}</div><div class=\"text\">{}</div></section>",
        escape(heading),
        escape(body)
    );
}

/// Text with ``` fences shown as code blocks and everything else as pre-wrapped prose.
fn prose(out: &mut String, text: &str) {
    fn flush(out: &mut String, chunk: &mut String, code: bool) {
        if code {
            let _ = write!(out, "<pre><code>{}</code></pre>", escape(chunk));
        } else if !chunk.trim().is_empty() {
            let _ = write!(
                out,
                "<div class=\"text\">{}</div>",
                escape(chunk.trim_matches('\n'))
            );
        }
        chunk.clear();
    }
    let mut chunk = String::new();
    let mut in_code = false;
    for line in text.split_inclusive('\n') {
        if line.trim_start().starts_with("```") {
            flush(out, &mut chunk, in_code);
            in_code = !in_code;
        } else {
            chunk.push_str(line);
        }
    }
    flush(out, &mut chunk, in_code);
}

/// Preformatted text, folded into a collapsed `<details>` when it is long.
fn folded_pre(out: &mut String, text: &str, what: &str) {
    let lines = text.lines().count();
    if lines > FOLD_LINES {
        let _ = write!(
            out,
            "<details><summary>{lines} lines{}</summary><pre>{}</pre></details>",
            if what.is_empty() {
                String::new()
            } else {
                format!(" of {}", escape(what))
            },
            escape(text)
        );
    } else if !text.is_empty() {
        let _ = write!(out, "<pre>{}</pre>", escape(text));
    }
}

fn image(out: &mut String, block: &Value) {
    let mime = text_of(block, "mimeType");
    let data = text_of(block, "data");
    if INLINE_IMAGE_TYPES.contains(&mime) && is_base64(data) {
        let _ = write!(out, "<img alt=\"image\" src=\"data:{mime};base64,{data}\">");
    } else {
        let _ = write!(
            out,
            "<div class=\"muted\">[image omitted: {}]</div>",
            escape(mime)
        );
    }
}

/// Non-empty, standard alphabet, and at most two `=` only at the end.
fn is_base64(data: &str) -> bool {
    let body = data.trim_end_matches('=');
    !body.is_empty()
        && data.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const HOSTILE: &str = "<script>alert('x')</script>&\"";

    fn header() -> Value {
        json!({"type":"session","version":3,"id":"s-1","timestamp":"2026-11-30T02:39:46.717Z","cwd":"/abs/proj"})
    }

    fn msg(message: Value) -> Value {
        json!({"type":"message","id":"e","parentId":null,"timestamp":"2026-11-30T02:40:00.000Z","message":message})
    }

    fn assistant(content: Value, input: u64, output: u64, cost: f64) -> Value {
        json!({"role":"assistant","content":content,"provider":"anthropic","model":"claude",
            "usage":{"input":input,"output":output,"cacheRead":0,"cacheWrite":0,
                "totalTokens":input + output,"cost":{"total":cost}},"stopReason":"stop"})
    }

    fn transcript() -> Vec<Value> {
        vec![
            json!({"type":"model_change","id":"m","parentId":null,"timestamp":"t","provider":"anthropic","modelId":"claude"}),
            json!({"type":"thinking_level_change","id":"k","parentId":"m","timestamp":"t","thinkingLevel":"high"}),
            msg(
                json!({"role":"user","content":[{"type":"text","text":"hello there"}],"timestamp":1}),
            ),
            msg(assistant(
                json!([
                    {"type":"thinking","thinking":"pondering"},
                    {"type":"text","text":"let me look"},
                    {"type":"toolCall","id":"c1","name":"read","arguments":{"path":"src/main.rs"}}
                ]),
                100,
                20,
                0.0125,
            )),
            msg(
                json!({"role":"toolResult","toolCallId":"c1","toolName":"read",
                "content":[{"type":"text","text":"fn main() {}"}],"isError":false}),
            ),
            msg(assistant(
                json!([{"type":"text","text":"done"}]),
                50,
                5,
                0.0001,
            )),
            msg(
                json!({"role":"bashExecution","command":"ls -la","output":"total 0",
                "exitCode":0,"cancelled":false,"truncated":false}),
            ),
            json!({"type":"compaction","id":"c","parentId":null,"timestamp":"t","summary":"we did things","tokensBefore":12345}),
            json!({"type":"session_info","id":"i","parentId":null,"timestamp":"t","name":"renamed"}),
            json!({"type":"branch_summary","id":"bs","parentId":null,"timestamp":"t","summary":"other path"}),
        ]
    }

    #[test]
    fn escape_replaces_all_special_characters() {
        assert_eq!(
            escape(HOSTILE),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;"
        );
        assert_eq!(escape("plain ü"), "plain ü");
    }

    #[test]
    fn page_is_a_complete_html5_document() {
        let html = render(&header(), &transcript(), None);
        assert!(html.starts_with("<!DOCTYPE html>"));
        for part in [
            "<meta charset=\"utf-8\">",
            "<meta name=\"viewport\"",
            "prefers-color-scheme",
        ] {
            assert!(html.contains(part), "missing {part}");
        }
        assert!(html.contains("<title>keel session s-1</title>"));
        assert!(html.contains("/abs/proj") && html.contains("2026-11-30T02:39:46.717Z"));
        assert!(!html.contains("<script") && !html.contains("http"));
        assert!(html.trim_end().ends_with("</html>"));
        assert_eq!(
            html,
            render(&header(), &transcript(), None),
            "output must be deterministic"
        );
    }

    #[test]
    fn every_role_and_entry_type_is_rendered() {
        let html = render(&header(), &transcript(), Some("My session"));
        assert!(html.contains("<title>My session</title>"));
        for part in [
            "model: anthropic/claude",
            "thinking level: high",
            "hello there",
            "<details class=\"thinking\"><summary>thinking</summary><div class=\"text\">pondering",
            "let me look",
            "src/main.rs",
            "fn main() {}",
            "$ ls -la",
            "exit code 0",
            "Earlier conversation summarised (12345 tokens)",
            "we did things",
            "session name: renamed",
            "other path",
        ] {
            assert!(html.contains(part), "missing {part}");
        }
    }

    #[test]
    fn tool_result_is_shown_under_its_call_once() {
        let html = render(&header(), &transcript(), None);
        let call = html.find("tool call").unwrap();
        let result = html.find("fn main() {}").unwrap();
        let next = html.find("done").unwrap();
        assert!(call < result && result < next);
        assert_eq!(html.matches("fn main() {}").count(), 1);
        assert!(html.contains("1 tool results"));
    }

    #[test]
    fn error_results_and_orphans_are_styled() {
        let entries = vec![msg(
            json!({"role":"toolResult","toolCallId":"none","toolName":"bash",
                "content":[{"type":"text","text":"boom"}],"isError":true}),
        )];
        let html = render(&header(), &entries, None);
        assert!(html.contains("<div class=\"result error\">"));
        assert!(html.contains("boom"));
    }

    #[test]
    fn hostile_text_is_escaped_everywhere() {
        let entries = vec![
            msg(json!({"role":"user","content":HOSTILE})),
            msg(assistant(
                json!([
                    {"type":"text","text":HOSTILE},
                    {"type":"thinking","thinking":HOSTILE},
                    {"type":"toolCall","id":HOSTILE,"name":HOSTILE,"arguments":{"cmd":HOSTILE}}
                ]),
                1,
                1,
                0.0,
            )),
            msg(
                json!({"role":"toolResult","toolCallId":HOSTILE,"toolName":HOSTILE,
                "content":[{"type":"text","text":HOSTILE}],"isError":false}),
            ),
            msg(json!({"role":"bashExecution","command":HOSTILE,"output":HOSTILE,"exitCode":null})),
            msg(json!({"role":HOSTILE,"payload":HOSTILE})),
            json!({"type":"session_info","name":HOSTILE}),
            json!({"type":"compaction","summary":HOSTILE,"tokensBefore":1}),
            json!({"type":HOSTILE}),
        ];
        let mut head = header();
        head["cwd"] = json!(HOSTILE);
        head["parentSession"] = json!(HOSTILE);
        let html = render(&head, &entries, Some(HOSTILE));
        assert!(!html.contains("<script"));
        assert!(!html.contains("</script"));
        assert!(html.contains("&lt;script&gt;"));
    }

    #[test]
    fn unknown_roles_and_types_do_not_panic() {
        let entries = vec![
            msg(json!({"role":"custom","data":{"k":1}})),
            msg(json!(null)),
            json!({"type":"label","id":"l"}),
            json!({"no":"type"}),
            json!("not an object"),
            json!(null),
            msg(json!({"role":"assistant","content":42,"usage":"bad"})),
        ];
        let html = render(&json!(null), &entries, None);
        assert!(html.contains("<div class=\"role\">custom</div>"));
        assert!(html.contains("[label]"));
        assert!(html.contains("</html>"));
    }

    #[test]
    fn images_are_inlined_only_when_safe() {
        let content = json!([
            {"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},
            {"type":"image","data":"AAAA","mimeType":"image/svg+xml"},
            {"type":"image","data":"\"><script>x</script>","mimeType":"image/jpeg"},
            {"type":"image","data":"","mimeType":"image/gif"}
        ]);
        let html = render(
            &header(),
            &[msg(json!({"role":"user","content":content}))],
            None,
        );
        assert!(html.contains("<img alt=\"image\" src=\"data:image/png;base64,iVBORw0KGgo=\">"));
        assert_eq!(html.matches("<img").count(), 1);
        assert_eq!(html.matches("[image omitted").count(), 3);
        assert!(html.contains("image/svg+xml"));
        assert!(!html.contains("<script"));
        assert!(is_base64("QUJD") && is_base64("QQ==") && is_base64("a+/b"));
        assert!(!is_base64("") && !is_base64("QQ===") && !is_base64("Q=Q=") && !is_base64("a b"));
    }

    #[test]
    fn footer_sums_counts_and_usage() {
        let html = render(&header(), &transcript(), None);
        let footer = &html[html.find("<footer").unwrap()..];
        for part in [
            "1 user",
            "2 assistant",
            "1 tool results",
            "1 shell commands",
            "input 150 tokens",
            "output 25 tokens",
            "cost $0.0126",
        ] {
            assert!(footer.contains(part), "missing {part} in {footer}");
        }
    }

    #[test]
    fn long_output_is_collapsed() {
        let long: String = (0..250).map(|i| format!("line {i}\n")).collect();
        let entries = vec![
            msg(json!({"role":"bashExecution","command":"seq","output":long,"exitCode":0})),
            msg(
                json!({"role":"toolResult","toolCallId":"c","toolName":"bash",
                "content":[{"type":"text","text":"short"}],"isError":false}),
            ),
        ];
        let html = render(&header(), &entries, None);
        assert!(html.contains("<details><summary>250 lines of output</summary><pre>line 0"));
        assert!(html.contains("<pre>short</pre>"));
    }

    #[test]
    fn fenced_code_becomes_a_code_block() {
        let text = "before\n```rust\nlet x = 1 < 2;\n```\nafter";
        let entries = vec![msg(assistant(
            json!([{"type":"text","text":text}]),
            0,
            0,
            0.0,
        ))];
        let html = render(&header(), &entries, None);
        assert!(html.contains("<div class=\"text\">before</div><pre><code>let x = 1 &lt; 2;\n</code></pre><div class=\"text\">after</div>"));
    }
}
