//! The tool cells' rendering, one behaviour per test, at fixed widths.

use super::*;
use serde_json::json;

/// A tool call described as JSON: `name`, `args`, `text`, `details`, `error`, `expanded`,
/// `spinner`, and `ms` with `phase` ("running", "approval"; done by default).
fn render(spec: &Value, width: u16) -> Vec<Line<'static>> {
    let ms = spec["ms"].as_u64().unwrap_or(0);
    let phase = match spec["phase"].as_str() {
        Some("running") => ToolPhase::Running { elapsed_ms: ms },
        Some("approval") => ToolPhase::AwaitingApproval,
        _ => ToolPhase::Done { duration_ms: ms },
    };
    let view = ToolView {
        name: spec["name"].as_str().unwrap(),
        args: &spec["args"],
        text: spec["text"].as_str(),
        details: spec.get("details"),
        is_error: spec["error"] == true,
        phase,
        expanded: spec["expanded"] == true,
        full: spec["full"] == true,
        spinner: spec["spinner"].as_u64().unwrap_or(0) as usize,
    };
    lines(&view, width)
}

fn plain(lines: &[Line<'_>]) -> String {
    let rows: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    rows.join("\n")
}

/// All rows at width 80, joined with newlines.
fn rows(spec: Value) -> String {
    plain(&render(&spec, 80))
}

/// The foreground colour of the span holding `needle` in `line`.
fn fg_of(line: &Line<'_>, needle: &str) -> Option<Color> {
    style_of(line, needle).fg
}

fn style_of(line: &Line<'_>, needle: &str) -> Style {
    let span = line.spans.iter().find(|s| s.content.contains(needle));
    span.map(|s| s.style).expect(needle)
}

fn is_dim(line: &Line<'_>, needle: &str) -> bool {
    style_of(line, needle).add_modifier.contains(Modifier::DIM)
}

fn bash(exit: Value) -> Value {
    json!({"exitCode": exit, "cancelled": false, "timedOut": false, "truncated": false})
}

/// The body of a finished call with these details, without its prefix.
fn summary(name: &str, details: Value) -> String {
    let out = rows(json!({"name": name, "args": {"path": "p"}, "details": details}));
    out.split_once("\n  ⎿ ").expect(&out).1.to_string()
}

#[test]
fn bash_ok_shows_output_and_a_green_exit_row() {
    let c = json!({"name": "bash", "args": {"command": "ls -la"}, "text": "a\nb\n",
                   "details": bash(json!(0)), "ms": 1234});
    let lines = render(&c, 80);
    let want = "✓ bash ls -la · 1.2s\n  ⎿ a\n    b\n    exit 0";
    assert_eq!(plain(&lines), want);
    assert_eq!(fg_of(&lines[0], "✓"), Some(Color::Green));
    let bold = style_of(&lines[0], "bash").add_modifier;
    assert!(bold.contains(Modifier::BOLD));
    assert!(is_dim(&lines[0], "ls -la") && is_dim(&lines[1], "a"));
    assert_eq!(fg_of(&lines[3], "exit 0"), Some(Color::Green));
}

#[test]
fn bash_running_shows_the_last_five_lines_after_a_count() {
    let out: String = (1..=12).map(|i| format!("line {i}\n")).collect();
    let mut c = json!({"name": "bash", "args": {"command": "make"}, "text": out,
                       "phase": "running", "ms": 500, "spinner": 13});
    let lines = render(&c, 80);
    let want = "⠸ bash make\n  ⎿ … 7 earlier lines\n    line 8\n    line 9\n    line 10\n    \
                line 11\n    line 12";
    assert_eq!(plain(&lines), want);
    assert_eq!(fg_of(&lines[0], "⠸"), Some(Color::Yellow));
    c["expanded"] = json!(true);
    assert_eq!(render(&c, 80).len(), 13, "12 lines fit");
    assert!(rows(c.clone()).starts_with("⠸ bash make\n  ⎿ line 1\n    line 2\n"));
    c["text"] = Value::Null;
    c["ms"] = json!(65_000);
    assert_eq!(rows(c), "⠸ bash make · 1m 5s", "no output yet: header only");
}

#[test]
fn bash_failures_show_a_status_row_instead_of_the_tool_note() {
    let c = json!({"name": "bash", "args": {"command": "x"}, "error": true,
                   "text": "oops\n\nCommand exited with code 3", "details": bash(json!(3))});
    let lines = render(&c, 80);
    assert_eq!(plain(&lines), "✗ bash x\n  ⎿ oops\n    exit 3");
    assert_eq!(fg_of(&lines[0], "✗"), Some(Color::Red));
    assert_eq!(fg_of(&lines[2], "exit 3"), Some(Color::Red));
    let cases = [
        (
            "timedOut",
            "before\n\nCommand timed out after 1s",
            "before\n    timed out",
        ),
        ("cancelled", "(no output)\n\nCommand aborted", "cancelled"),
    ];
    for (key, text, want) in cases {
        let mut c = c.clone();
        c["text"] = json!(text);
        c["details"] = bash(Value::Null);
        c["details"][key] = json!(true);
        let lines = render(&c, 80);
        assert_eq!(plain(&lines[1..]), format!("  ⎿ {want}"));
        let status = want.rsplit(' ').next().unwrap();
        assert_eq!(fg_of(&lines[lines.len() - 1], status), Some(Color::Yellow));
    }
    let c = json!({"name": "bash", "args": {"command": "x"},
                   "text": "Command killed by signal 9", "details": bash(Value::Null)});
    let want = "✓ bash x\n  ⎿ Command killed by signal 9\n    failed";
    assert_eq!(rows(c), want);
}

/// A call that started a background job has no exit status yet: its text, not "failed".
#[test]
fn a_bash_call_that_started_a_job_shows_its_text_not_failed() {
    let job = json!({"id": 1, "command": "sleep 9", "pid": 7, "tty": false, "state": "running",
                     "exitCode": null, "signal": null, "bytes": 0, "startedMs": 0, "endedMs": null});
    let c = json!({"name": "bash", "args": {"command": "sleep 9"},
                   "text": "Command running in background with ID: 1.",
                   "details": {"job": job}});
    let want = "✓ bash sleep 9\n  ⎿ Command running in background with ID: 1.";
    assert_eq!(rows(c), want);
}

#[test]
fn bash_truncation_points_at_the_full_output() {
    let mut d = bash(json!(0));
    d["truncated"] = json!(true);
    d["fullOutputPath"] = json!("/tmp/o.log");
    let text = "5000\n\n[Showing lines 3001-5000 of 5000. Full output: /tmp/o.log]";
    let out = rows(json!({"name": "bash", "args": {}, "text": text, "details": d}));
    let want = "✓ bash\n  ⎿ 5000\n    exit 0 · output truncated, full output in /tmp/o.log";
    assert_eq!(out, want);
}

#[test]
fn one_huge_output_line_takes_at_most_four_rows() {
    let text = "x".repeat(100_000);
    let c = json!({"name": "bash", "args": {}, "text": text, "details": bash(json!(0))});
    let lines = render(&c, 40);
    assert_eq!(lines.len(), 6);
    assert!(lines[4].to_string().ends_with('…'));
}

#[test]
fn escape_sequences_and_carriage_returns_are_resolved() {
    let text = "\u{1b}[31mred\u{1b}[0m\n\u{1b}]0;t\u{7}run 10%\rrun 100%\r\n";
    let c = json!({"name": "bash", "args": {}, "text": text, "details": bash(json!(0))});
    let out = rows(c);
    assert_eq!(out, "✓ bash\n  ⎿ red\n    run 100%\n    exit 0");
}

#[test]
fn edit_diff_is_coloured_by_line_kind() {
    let diff = "--- f.txt\n+++ f.txt\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n--- x\n d\n";
    let c = json!({"name": "edit", "args": {"path": "f.txt"}, "details": {"diff": diff}});
    let lines = render(&c, 80);
    let want = "✓ edit f.txt\n  ⎿ @@ -2,3 +2,3 @@\n     b\n    -c\n    +C\n    --- x\n     d";
    assert_eq!(plain(&lines), want);
    assert_eq!(fg_of(&lines[1], "@@"), Some(Color::Cyan));
    assert!(is_dim(&lines[2], "b"));
    assert_eq!(fg_of(&lines[3], "-c"), Some(Color::Red));
    assert_eq!(fg_of(&lines[4], "+C"), Some(Color::Green));
    // A removed line starting with "--" inside a hunk is not a file header.
    assert_eq!(fg_of(&lines[5], "--- x"), Some(Color::Red));
}

#[test]
fn long_diffs_are_cut_with_a_count() {
    let diff: String = (0..25).map(|i| format!("+l{i}\n")).collect();
    let diff = format!("@@ -0,0 +1,25 @@\n{diff}");
    let mut c = json!({"name": "edit", "args": {}, "details": {"diff": diff}});
    let lines = render(&c, 80);
    assert_eq!(lines.len(), 22);
    assert_eq!(lines[21].to_string(), "    … 6 more lines");
    c["expanded"] = json!(true);
    assert_eq!(render(&c, 80).len(), 27);
}

#[test]
fn read_and_write_summaries() {
    let read = |t: u64, s: u64, e: u64, tr: bool| {
        let d = json!({"totalLines": t, "startLine": s, "endLine": e, "truncated": tr});
        summary("read", d)
    };
    assert_eq!(read(10, 1, 10, false), "Read 10 lines");
    let want = "Read 20 lines (lines 10-29 of 400)";
    assert_eq!(read(400, 10, 29, false), want);
    let want = "Read 2000 lines (lines 1-2000 of 5000) · truncated";
    assert_eq!(read(5000, 1, 2000, true), want);
    assert_eq!(read(1, 1, 1, false), "Read 1 line");
    assert_eq!(read(0, 1, 0, false), "Empty file");
    let write = |b: u64, new: bool| summary("write", json!({"bytes": b, "created": new}));
    assert_eq!(write(1229, true), "Wrote 1.2 KB (new file)");
    assert_eq!(write(340, false), "Wrote 340 B");
    assert_eq!(write(3 * 1024 * 1024, false), "Wrote 3.0 MB");
}

#[test]
fn search_summaries_get_singular_and_plural_right() {
    let grep = |m: u64, f: u64, t: bool| {
        summary("grep", json!({"matches": m, "files": f, "truncated": t}))
    };
    assert_eq!(grep(12, 3, false), "12 matches in 3 files");
    assert_eq!(grep(1, 1, false), "1 match in 1 file");
    assert_eq!(grep(0, 0, false), "No matches");
    assert_eq!(grep(100, 7, true), "100 matches in 7 files · truncated");
    let find = |n: u64| summary("find", json!({"count": n, "truncated": false}));
    let got = [find(4), find(1), find(0)];
    assert_eq!(got, ["4 files", "1 file", "No files"]);
    let ls = |n: u64, t: bool| summary("ls", json!({"count": n, "truncated": t}));
    let got = [ls(7, false), ls(1, false), ls(0, false), ls(500, true)].join(",");
    assert_eq!(got, "7 entries,1 entry,No entries,500 entries · truncated");
}

#[test]
fn errors_show_the_first_lines_in_red() {
    let c = json!({"name": "read", "args": {"path": "nope"}, "error": true,
                   "text": "Cannot read nope: not found"});
    let lines = render(&c, 80);
    let want = "✗ read nope\n  ⎿ Cannot read nope: not found";
    assert_eq!(plain(&lines), want);
    assert_eq!(fg_of(&lines[1], "Cannot"), Some(Color::Red));
    // Details of a failed edit are ignored: the error text is shown.
    let text: String = (1..=8).map(|i| format!("e{i}\n")).collect();
    let c = json!({"name": "edit", "args": {"path": "f"}, "error": true, "text": text,
                   "details": {"diff": "@@ -1 +1 @@\n-a\n+b\n"}});
    let want = "✗ edit f\n  ⎿ e1\n    e2\n    e3\n    e4\n    e5\n    … 3 more lines";
    assert_eq!(rows(c), want);
}

#[test]
fn unknown_tools_and_missing_details_show_the_first_lines_dim() {
    let text: String = (1..=7).map(|i| format!("r{i}\n")).collect();
    let lines = render(&json!({"name": "mcp", "args": {"q": 1}, "text": text}), 80);
    let want = "✓ mcp {\"q\":1}\n  ⎿ r1\n    r2\n    r3\n    r4\n    r5\n    … 2 more lines";
    assert_eq!(plain(&lines), want);
    assert!(is_dim(&lines[1], "r1"));
    let out = rows(json!({"name": "ls", "args": {}, "text": "a\nb"}));
    assert_eq!(out, "✓ ls .\n  ⎿ a\n    b");
}

#[test]
fn awaiting_approval_is_the_header_only() {
    let c = json!({"name": "bash", "args": {"command": "rm -rf build"}, "text": "x",
                   "details": bash(json!(0)), "phase": "approval"});
    let lines = render(&c, 80);
    assert_eq!(plain(&lines), "? bash rm -rf build");
    assert_eq!(fg_of(&lines[0], "?"), Some(Color::Yellow));
}

#[test]
fn durations_are_formatted_and_always_fit() {
    let got = [350, 1200, 59_999, 125_000, 3_720_000].map(format_duration);
    assert_eq!(got, ["350ms", "1.2s", "59.9s", "2m 5s", "1h 2m"]);
    let header = |ms: u64, width| {
        let c = json!({"name": "bash", "args": {"command": "cargo build --release"}, "ms": ms});
        plain(&render(&c, width))
    };
    assert_eq!(header(99, 80), "✓ bash cargo build --release");
    assert_eq!(header(350, 80), "✓ bash cargo build --release · 350ms");
    assert_eq!(header(1200, 20), "✓ bash cargo… · 1.2s");
}

#[test]
fn describe_summarises_each_tool() {
    let cases = [
        r#"bash {"command": "ls -la"} => ls -la"#,
        r#"bash {"command": "\ncd x\nmake\n"} => cd x …"#,
        r#"bash {"command": "a\tb"} => a    b"#,
        r#"bash null => "#,
        r#"read {"path": "src/main.rs"} => src/main.rs"#,
        r#"read {"path": "a.rs", "offset": 10, "limit": 11} => a.rs:10-20"#,
        r#"read {"path": "a", "offset": 10} => a:10"#,
        r#"read {"path": "a", "limit": 5} => a:1-5"#,
        r#"write {"path": "a.txt", "content": "x"} => a.txt"#,
        r#"edit {"path": "b.rs", "oldText": "x"} => b.rs"#,
        r#"grep {"pattern": "T", "path": "s", "glob": "*.rs", "ignoreCase": true, "context": 2} => /T/i in s (*.rs) -C 2"#,
        r#"grep {"pattern": "a.b", "literal": true} => "a.b""#,
        r#"find {"pattern": "*.rs", "path": "src"} => *.rs in src"#,
        r#"find {"pattern": "*.md"} => *.md"#,
        r#"ls {} => ."#,
        r#"ls {"path": "docs"} => docs"#,
        r#"mcp {} => "#,
        r#"mcp {"a": [1, "x\ny"]} => {"a":[1,"x\ny"]}"#,
    ];
    for case in cases {
        let (call, want) = case.split_once(" => ").unwrap();
        let (name, args) = call.split_once(' ').unwrap();
        let args: Value = serde_json::from_str(args).unwrap();
        assert_eq!(describe(name, &args), want, "{case}");
    }
}

#[test]
fn no_line_is_ever_wider_than_the_width() {
    let wide = "日本語のパス/👩\u{200d}💻/e\u{301}tude/ファイル.rs";
    let out = format!("{wide} {wide}\n👩\u{200d}💻👩\u{200d}💻 日本語 e\u{301}e\u{301}\n");
    let diff = format!("@@ -1 +1 @@\n-{wide}\n+{wide} {wide}\n");
    let mut bash_done = bash(json!(0));
    bash_done["truncated"] = json!(true);
    bash_done["fullOutputPath"] = json!(format!("/tmp/{wide}.log"));
    let calls = [
        json!({"name": "bash", "args": {"command": wide}, "text": out, "details": bash_done,
               "ms": 4_000_000}),
        json!({"name": "bash", "args": {"command": wide}, "text": out.repeat(9),
               "phase": "running", "ms": 3000}),
        json!({"name": "edit", "args": {"path": wide}, "details": {"diff": diff}}),
        json!({"name": "read", "args": {"path": wide, "offset": 3, "limit": 4},
               "details": {"totalLines": 900, "startLine": 3, "endLine": 6, "truncated": true}}),
        json!({"name": "grep", "args": {"pattern": wide}, "details": {"matches": 1, "files": 1}}),
        json!({"name": "write", "args": {"path": wide}, "text": out, "error": true}),
        json!({"name": wide, "args": {"x": wide}, "text": out}),
        json!({"name": "ls", "args": {"path": wide}, "phase": "approval"}),
    ];
    for mode in 0..4 {
        text::set_ambiguous_wide(mode >= 2);
        for mut c in calls.iter().cloned() {
            c["expanded"] = json!(mode % 2 == 1);
            for width in 1..=120u16 {
                let lines = render(&c, width);
                assert!(!lines.is_empty());
                for l in &lines {
                    let w = paint::line_width(l);
                    assert!(w <= width as usize, "{w} > {width}: {l:?}");
                }
            }
        }
    }
    text::set_ambiguous_wide(false);
    assert!(render(&calls[0], 0).is_empty());
}
