//! Unit tests of the HTML export: the page, every entry kind, escaping, markdown, tools.

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
        msg(json!({"role":"user","content":[{"type":"text","text":"hello there"}],"timestamp":1})),
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
        "<details class=\"thinking\"><summary>thinking</summary><div class=\"md\"><p>pondering</p>",
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

/// The page's text without its tags (entities kept).
fn strip_tags(html: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

fn assistant_text(text: &str) -> String {
    let entries = vec![msg(assistant(
        json!([{"type":"text","text":text}]),
        0,
        0,
        0.0,
    ))];
    render(&header(), &entries, None)
}

#[test]
fn fenced_code_becomes_a_highlighted_code_block() {
    let html = assistant_text("before\n```rust\nlet x = 1 < 2;\n```\nafter");
    assert!(html.contains("<p>before</p>"), "{html}");
    assert!(html.contains("<pre class=\"code\" data-lang=\"rust\"><code><span class=\"hl-kw\">let</span> x = <span class=\"hl-nu\">1</span> &lt; <span class=\"hl-nu\">2</span>;\n</code></pre>"), "{html}");
    assert!(html.contains("<p>after</p>"));
    let plain = assistant_text("```zzz\nlet x = 1 < 2;\n```");
    assert!(plain
        .contains("<pre class=\"code\" data-lang=\"zzz\"><code>let x = 1 &lt; 2;\n</code></pre>"));
}

#[test]
fn assistant_markdown_has_headings_lists_tables_links_and_emphasis() {
    let html = assistant_text(
        "## Plan\n\n1. **first** step\n2. see [docs](https://example.com/d)\n\n| a | b |\n|---|:-:|\n| `x` | y |\n\n> quoted",
    );
    for part in [
        "<h2>Plan</h2>",
        "<ol>",
        "<strong>first</strong>",
        "<a href=\"https://example.com/d\">docs</a>",
        "<table>",
        "<th style=\"text-align: center\">b</th>",
        "<td><code>x</code></td>",
        "<blockquote>",
    ] {
        assert!(html.contains(part), "missing {part} in {html}");
    }
    // A user's text is shown as typed, not as markdown.
    let entries = vec![msg(json!({"role":"user","content":"**not bold**"}))];
    assert!(render(&header(), &entries, None).contains("<div class=\"text\">**not bold**</div>"));
}

#[test]
fn raw_html_unsafe_links_and_images_in_markdown_are_inert() {
    let html = assistant_text(
        "<script>alert(1)</script>\n\ninline <b onclick=\"x()\">b</b> [click](javascript:alert(1)) ![pic](https://example.com/p.png) ![local](data:image/png;base64,AAAA)",
    );
    let body = &html[html.find("<main>").unwrap()..];
    assert!(!body.contains("<script") && !body.contains("<b ") && !body.contains("<img"));
    assert!(
        body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{body}"
    );
    assert!(!body.contains("javascript:") && !body.contains("data:image"));
    assert!(body.contains("click"), "the text of a dropped link stays");
    assert!(
        body.contains("<a href=\"https://example.com/p.png\">pic</a>"),
        "{body}"
    );
}

fn call_and_result(name: &str, args: Value, details: Option<Value>, text: &str) -> String {
    let mut result = json!({"role":"toolResult","toolCallId":"c1","toolName":name,
        "content":[{"type":"text","text":text}],"isError":false});
    if let Some(d) = details {
        result["details"] = d;
    }
    let entries = vec![
        msg(assistant(
            json!([{"type":"toolCall","id":"c1","name":name,"arguments":args}]),
            0,
            0,
            0.0,
        )),
        msg(result),
    ];
    render(&header(), &entries, None)
}

#[test]
fn an_edit_is_a_coloured_diff_and_its_arguments_are_not_json() {
    let diff =
        "--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,2 +1,2 @@\n fn a() {}\n-fn b() {}\n+fn c() {}\n";
    let html = call_and_result(
        "edit",
        json!({"path":"src/lib.rs","oldText":"fn b() {}\n","newText":"fn c() {}\n"}),
        Some(json!({"path":"/abs/src/lib.rs","diff":diff,"firstChangedLine":2})),
        &format!("Successfully replaced text in src/lib.rs.\n\n{diff}"),
    );
    assert!(html.contains("<span class=\"key\">path</span> <span class=\"mono\">src/lib.rs</span>"));
    assert!(
        html.contains("<span class=\"del\">-fn b() {}</span><span class=\"add\">+fn c() {}</span>"),
        "{html}"
    );
    assert!(html.contains("<pre class=\"diff\"><span class=\"hunk\">@@ -1,2 +1,2 @@</span>"));
    assert!(
        !html.contains("+++ b/src/lib.rs"),
        "the file headers repeat the path"
    );
    assert!(
        !html.contains("oldText") && !html.contains("\\n"),
        "no raw JSON"
    );
    assert_eq!(
        html.matches("+fn c() {}").count(),
        1,
        "the diff is shown once"
    );
    assert!(html.contains("<pre>Successfully replaced text in src/lib.rs.</pre>"));
    // A failed edit has no diff in its result: the diff comes from its arguments.
    let entries = vec![msg(assistant(
        json!([{"type":"toolCall","id":"c9","name":"edit","arguments":{"path":"f","oldText":"a\nb\n","newText":"a\nc\n"}}]),
        0,
        0,
        0.0,
    ))];
    let html = render(&header(), &entries, None);
    assert!(html.contains("<span class=\"hunk\">@@ -1,2 +1,2 @@</span><span class=\"ctx\"> a</span><span class=\"del\">-b</span><span class=\"add\">+c</span>"), "{html}");
}

#[test]
fn bash_write_and_other_calls_show_readable_fields() {
    let html = call_and_result(
        "bash",
        json!({"command":"cargo test\necho \"done\" # ok","timeout":60}),
        None,
        "ok",
    );
    assert!(
        html.contains("<pre class=\"code\" data-lang=\"bash\"><code>"),
        "{html}"
    );
    assert!(
        strip_tags(&html).contains("cargo test\necho &quot;done&quot; # ok"),
        "the command as written, newline kept: {html}"
    );
    assert!(html.contains("<span class=\"hl-cm\"># ok</span>"), "{html}");
    assert!(html.contains("<span class=\"key\">timeout</span> <span class=\"mono\">60</span>"));
    let html = call_and_result(
        "write",
        json!({"path":"a.txt","content":"one\ntwo\n"}),
        None,
        "wrote",
    );
    assert!(
        html.contains("<span class=\"add\">+one</span><span class=\"add\">+two</span>"),
        "{html}"
    );
    let html = call_and_result(
        "grep",
        json!({"pattern":"fn <main>","path":"src","context":{"n":2}}),
        None,
        "src/main.rs:1",
    );
    assert!(html.contains(
        "<span class=\"key\">pattern</span> <span class=\"mono\">fn &lt;main&gt;</span>"
    ));
    assert!(
        html.contains("<span class=\"mono\">{&quot;n&quot;:2}</span>"),
        "{html}"
    );
}
