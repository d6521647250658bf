//! `tool_response` of `PostToolUse` in Claude Code's per-tool shapes, so that hook scripts
//! written for Claude read `.tool_response.stdout`, `.tool_response.filePath` and
//! `.tool_response.file.content` from keel's built-in tools. Built from what the tool returned
//! (its typed [`ToolDetails`], its text, the call's arguments and, for `edit` and `write`, the
//! file's text before the call); a tool without a Claude shape (`ls`, `todo_write`, `task`,
//! MCP tools) keeps keel's `{output, details}`. Every shape is documented field by field in
//! `docs/hooks.md`.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{json, Value};
use similar::TextDiff;

use crate::kernel::tool::details::{
    BashDetails, CountDetails, EditDetails, GrepDetails, ReadDetails, ShownArgs, ToolDetails,
    WriteDetails,
};
use crate::kernel::tool::{Streams, ToolOutput};

/// `Bash`: the command's stdout and stderr apart (the model reads them merged, in the order
/// they came), each its last lines within the output caps.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Bash {
    stdout: String,
    stderr: String,
    interrupted: bool,
    is_image: bool,
}

/// One hunk of a change, as Claude's `structuredPatch` holds it.
#[derive(Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Hunk {
    pub old_start: usize,
    pub old_lines: usize,
    pub new_start: usize,
    pub new_lines: usize,
    /// Each line with its mark: `-` removed, `+` added, ` ` kept.
    pub lines: Vec<String>,
}

/// `Write`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Write {
    /// `create` or `update`.
    #[serde(rename = "type")]
    kind: &'static str,
    file_path: String,
    content: String,
    structured_patch: Vec<Hunk>,
    original_file: Option<String>,
}

/// `Edit`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Edit {
    file_path: String,
    old_string: String,
    new_string: String,
    original_file: Option<String>,
    structured_patch: Vec<Hunk>,
    user_modified: bool,
    replace_all: bool,
}

/// `Read` of a text file.
#[derive(Debug, Serialize)]
struct Read {
    #[serde(rename = "type")]
    kind: &'static str,
    file: ReadFile,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct ReadFile {
    file_path: String,
    content: String,
    num_lines: u64,
    start_line: u64,
    /// `null` when keel stopped reading before the end of the file.
    total_lines: Option<u64>,
}

/// `Grep`: keel's `grep` always shows the matching lines (Claude's `content` mode).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Grep {
    mode: &'static str,
    filenames: Vec<String>,
    num_files: u64,
    content: String,
    num_lines: usize,
}

/// `Glob` (keel's `find`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Glob {
    filenames: Vec<String>,
    /// keel does not time the walk: always 0.
    duration_ms: u64,
    num_files: usize,
    truncated: bool,
}

/// The `tool_response` of a successful call of keel's tool `name` with `args` (relative paths
/// taken from `cwd`).
pub fn tool_response(name: &str, args: &Value, output: &ToolOutput, cwd: &Path) -> Value {
    let details = output.details.as_ref();
    let typed = details.and_then(|d| ToolDetails::read(name, d));
    let text = output.text();
    let shaped = match typed {
        Some(ToolDetails::Bash(d)) => json!(bash(&d, output.streams(), &text)),
        Some(ToolDetails::Write(d)) => json!(write(&d, args, output)),
        Some(ToolDetails::Edit(d)) => json!(edit(&d, args, output)),
        Some(ToolDetails::Read(d)) => json!(read(&d, &text)),
        Some(ToolDetails::Grep(d)) => json!(grep(&d, &text, &root(args, cwd))),
        Some(ToolDetails::Find(d)) => json!(glob(&d, &text, &root(args, cwd))),
        Some(ToolDetails::Ls(_)) => Value::Null,
        None => match name {
            crate::kernel::subagent::TASK => agent(output, args, &text),
            "todo_write" => todo_write(output, args),
            _ => Value::Null,
        },
    };
    match shaped {
        Value::Null => keel_response(output),
        v => v,
    }
}

/// Claude's `Agent` result: `{status, agentId, agentType, content, totalDurationMs,
/// totalTokens, totalToolUseCount, usage, prompt}`, from a finished `task` call's details.
fn agent(output: &ToolOutput, args: &Value, text: &str) -> Value {
    use serde::Deserialize;
    let Some(d) = output
        .details
        .as_ref()
        .and_then(|d| crate::kernel::subagent::SubagentDetails::deserialize(d).ok())
    else {
        return Value::Null;
    };
    let usage = d.usage.unwrap_or_default();
    json!({
        "status": "completed",
        "agentId": d.session_id,
        "agentType": d.agent_type,
        "content": [{"type": "text", "text": text}],
        "totalDurationMs": d.duration_ms.unwrap_or(0),
        "totalTokens": usage.total_tokens,
        "totalToolUseCount": d.tool_count,
        "usage": {
            "input_tokens": usage.input,
            "output_tokens": usage.output,
            "cache_read_input_tokens": usage.cache_read,
            "cache_creation_input_tokens": usage.cache_write,
        },
        "prompt": Prompt::deserialize(args).map(|a| a.prompt).unwrap_or_default(),
    })
}

/// The one argument of a `task` call its result repeats.
#[derive(serde::Deserialize)]
struct Prompt {
    #[serde(default)]
    prompt: String,
}

/// Claude's `TodoWrite` result: the list before the call and the one it wrote.
fn todo_write(output: &ToolOutput, args: &Value) -> Value {
    use crate::kernel::tool::todo::{self, TodoItem};
    let before = output.before();
    let old: Vec<TodoItem> = before
        .and_then(|b| serde_json::from_str(b).ok())
        .unwrap_or_default();
    let new = todo::parse(args).unwrap_or_default();
    json!({"oldTodos": old, "newTodos": new})
}

/// keel's own shape: the text the model read and the tool's details.
pub fn keel_response(output: &ToolOutput) -> Value {
    json!({"output": output.text(), "details": output.details})
}

/// From the command's streams apart when the call ran here; else (a result read back) all of
/// what the model read is `stdout`.
fn bash(d: &BashDetails, streams: Option<&Streams>, text: &str) -> Bash {
    let (stdout, stderr) = match streams {
        Some(s) => (s.stdout.clone(), s.stderr.clone()),
        None if text == "(no output)" => (String::new(), String::new()),
        None => (text.to_string(), String::new()),
    };
    Bash {
        stdout,
        stderr,
        interrupted: d.cancelled || d.timed_out,
        is_image: false,
    }
}

fn write(d: &WriteDetails, args: &Value, output: &ToolOutput) -> Write {
    let content = ShownArgs::str(&ShownArgs::of(args).content).to_string();
    let original = output.before().map(str::to_string);
    let structured_patch = match (&original, d.created) {
        (Some(old), false) => hunks(old, &content),
        _ => Vec::new(),
    };
    Write {
        kind: if d.created { "create" } else { "update" },
        file_path: d.path.clone(),
        content,
        structured_patch,
        original_file: original,
    }
}

fn edit(d: &EditDetails, args: &Value, output: &ToolOutput) -> Edit {
    let a = ShownArgs::of(args);
    let old = a.old_text.or(a.old_string).unwrap_or_default();
    let new = a.new_text.or(a.new_string).unwrap_or_default();
    Edit {
        file_path: d.path.clone(),
        old_string: old,
        new_string: new,
        original_file: output.before().map(str::to_string),
        structured_patch: parse_hunks(&d.diff),
        user_modified: false,
        replace_all: false,
    }
}

fn read(d: &ReadDetails, text: &str) -> Read {
    let shown = if d.total_lines == Some(0) {
        0
    } else {
        (d.end_line + 1).saturating_sub(d.start_line)
    };
    let content: Vec<&str> = text
        .split('\n')
        .take(usize::try_from(shown).unwrap_or(usize::MAX))
        .collect();
    Read {
        kind: "text",
        file: ReadFile {
            file_path: d.path.clone(),
            content: content.join("\n"),
            num_lines: shown,
            start_line: d.start_line,
            total_lines: d.total_lines,
        },
    }
}

/// The directory (or file) a `grep` or `find` call searched.
fn root(args: &Value, cwd: &Path) -> PathBuf {
    let a = ShownArgs::of(args);
    let full = crate::kernel::tool::resolve_path(cwd, a.path.as_deref().unwrap_or("."));
    full.components()
        .filter(|c| *c != std::path::Component::CurDir)
        .collect()
}

/// A listed path (relative to the searched `root`) made absolute.
fn absolute(root: &Path, rel: &str) -> String {
    let full = if root.is_file() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    full.to_string_lossy().into_owned()
}

/// The lines of a listing before keel's closing note (`[… limit reached …]`).
fn listed(text: &str) -> Vec<&str> {
    let body = match text.rfind("\n\n[") {
        Some(i) if text.ends_with(']') => &text[..i],
        _ => text,
    };
    body.lines().filter(|l| !l.is_empty()).collect()
}

fn grep(d: &GrepDetails, text: &str, root: &Path) -> Grep {
    let lines = if d.matches == 0 {
        Vec::new()
    } else {
        listed(text)
    };
    let mut filenames: Vec<String> = Vec::new();
    for line in &lines {
        if let Some(rel) = grep_file(line) {
            let full = absolute(root, rel);
            if !filenames.contains(&full) {
                filenames.push(full);
            }
        }
    }
    Grep {
        mode: "content",
        filenames,
        num_files: d.files,
        content: lines.join("\n"),
        num_lines: lines.len(),
    }
}

/// The file of a `grep` line (`path:12: text`, `path-12- text` for context, `path: binary
/// file matches …`).
fn grep_file(line: &str) -> Option<&str> {
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b != b':' && b != b'-' {
            continue;
        }
        let digits = bytes[i + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        let after = i + 1 + digits;
        if digits > 0 && bytes.get(after) == Some(&b) && bytes.get(after + 1) == Some(&b' ') {
            return Some(&line[..i]);
        }
    }
    line.split_once(": binary file matches").map(|(f, _)| f)
}

fn glob(d: &CountDetails, text: &str, root: &Path) -> Glob {
    let filenames: Vec<String> = match d.count {
        0 => Vec::new(),
        _ => listed(text).iter().map(|l| absolute(root, l)).collect(),
    };
    Glob {
        num_files: filenames.len(),
        filenames,
        duration_ms: 0,
        truncated: d.truncated,
    }
}

/// The change from `old` to `new` as Claude's hunks (3 lines of context).
fn hunks(old: &str, new: &str) -> Vec<Hunk> {
    let diff = TextDiff::from_lines(old, new);
    parse_hunks(&diff.unified_diff().context_radius(3).to_string())
}

/// The hunks of a unified diff's text.
pub fn parse_hunks(diff: &str) -> Vec<Hunk> {
    let mut out: Vec<Hunk> = Vec::new();
    for line in diff.lines() {
        if let Some(head) = line.strip_prefix("@@ ") {
            if let Some(h) = hunk_header(head) {
                out.push(h);
            }
            continue;
        }
        let Some(h) = out.last_mut() else { continue };
        if line.starts_with(['-', '+', ' ']) {
            h.lines.push(line.to_string());
        }
    }
    out
}

/// `-a,b +c,d @@` as an empty hunk (a missing count is 1).
fn hunk_header(head: &str) -> Option<Hunk> {
    let mut parts = head.split_whitespace();
    let range = |s: Option<&str>, mark: char| -> Option<(usize, usize)> {
        let s = s?.strip_prefix(mark)?;
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let (old_start, old_lines) = range(parts.next(), '-')?;
    let (new_start, new_lines) = range(parts.next(), '+')?;
    Some(Hunk {
        old_start,
        old_lines,
        new_start,
        new_lines,
        lines: Vec::new(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn out(text: &str, details: Value) -> ToolOutput {
        ToolOutput::ok(text).with_details(details)
    }

    #[test]
    fn a_task_result_reads_as_claudes_agent_result() {
        let o = out(
            "the answer",
            json!({"sessionId": "c-1", "agentType": "explore", "description": "look",
                   "toolCount": 3, "durationMs": 1200,
                   "usage": {"input": 10, "output": 5, "cacheRead": 2, "cacheWrite": 0,
                             "totalTokens": 17, "cost": {"input": 0.0, "output": 0.0,
                             "cacheRead": 0.0, "cacheWrite": 0.0, "total": 0.0}}}),
        );
        let args = json!({"description": "look", "prompt": "find it", "subagent_type": "explore"});
        let r = tool_response("task", &args, &o, Path::new("/w"));
        assert_eq!(r["status"], "completed", "{r}");
        assert_eq!(
            (&r["agentId"], &r["agentType"]),
            (&json!("c-1"), &json!("explore"))
        );
        assert_eq!(
            r["content"],
            json!([{"type": "text", "text": "the answer"}])
        );
        assert_eq!(
            (&r["totalToolUseCount"], &r["totalTokens"]),
            (&json!(3), &json!(17))
        );
        assert_eq!(r["totalDurationMs"], 1200);
        assert_eq!(r["usage"]["input_tokens"], 10);
        assert_eq!(r["prompt"], "find it");
    }

    #[test]
    fn a_todo_write_result_has_the_old_and_the_new_list() {
        let item = |c: &str, st: &str| json!({"content": c, "status": st, "activeForm": c});
        let old = json!([item("a", "pending")]).to_string();
        let o = out("1 task", Value::Null).with_before(Some(old));
        let args = json!({"todos": [item("a", "completed"), item("b", "pending")]});
        let r = tool_response("todo_write", &args, &o, Path::new("/w"));
        assert_eq!(r["oldTodos"], json!([item("a", "pending")]), "{r}");
        assert_eq!(r["newTodos"], args["todos"]);
    }

    #[test]
    fn bash_reads_as_claude_sends_it() {
        let o = out(
            "hi\n",
            json!({"exitCode": 0, "cancelled": false, "timedOut": false}),
        );
        let r = tool_response("bash", &json!({"command": "echo hi"}), &o, Path::new("/w"));
        assert_eq!(
            r,
            json!({"stdout": "hi\n", "stderr": "", "interrupted": false, "isImage": false})
        );
        let o = o.with_streams(Streams {
            stdout: "hi\n".into(),
            stderr: "careful\n".into(),
        });
        let r = tool_response("bash", &json!({"command": "echo hi"}), &o, Path::new("/w"));
        assert_eq!(
            (r["stdout"].as_str(), r["stderr"].as_str()),
            (Some("hi\n"), Some("careful\n"))
        );
    }

    #[test]
    fn edit_and_write_carry_the_path_the_strings_and_the_patch() {
        let diff = "--- a.txt\n+++ a.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n";
        let o = out(
            "ok",
            json!({"path": "/w/a.txt", "diff": diff, "firstChangedLine": 2}),
        )
        .with_before(Some("a\nb\nc\n".into()));
        let args = json!({"path": "a.txt", "oldText": "b", "newText": "B"});
        let r = tool_response("edit", &args, &o, Path::new("/w"));
        assert_eq!(r["filePath"], "/w/a.txt");
        assert_eq!(
            (&r["oldString"], &r["newString"]),
            (&json!("b"), &json!("B"))
        );
        assert_eq!(r["originalFile"], "a\nb\nc\n");
        assert_eq!(
            r["structuredPatch"],
            json!([{"oldStart": 1, "oldLines": 3, "newStart": 1, "newLines": 3,
                    "lines": [" a", "-b", "+B", " c"]}])
        );
        let w = out(
            "Wrote",
            json!({"path": "/w/n.txt", "bytes": 2, "created": true}),
        );
        let r = tool_response(
            "write",
            &json!({"path": "n.txt", "content": "x\n"}),
            &w,
            Path::new("/w"),
        );
        assert_eq!(
            r,
            json!({"type": "create", "filePath": "/w/n.txt", "content": "x\n",
                   "structuredPatch": [], "originalFile": null})
        );
    }

    #[test]
    fn read_grep_and_glob_list_what_they_found() {
        let o = out(
            "two\nthree\n\n[Showing lines 2-3 of 9. Use offset=4 to continue.]",
            json!({"path": "/w/f", "totalLines": 9, "startLine": 2, "endLine": 3, "truncated": true}),
        );
        let r = tool_response("read", &json!({"path": "f"}), &o, Path::new("/w"));
        assert_eq!(
            r,
            json!({"type": "text", "file": {"filePath": "/w/f", "content": "two\nthree",
                   "numLines": 2, "startLine": 2, "totalLines": 9}})
        );
        let g = out(
            "a.rs:3: fn x\nsub/b-c.rs-4- y\nsub/b-c.rs:5: fn z",
            json!({"matches": 2, "files": 2}),
        );
        let r = tool_response("grep", &json!({"pattern": "fn"}), &g, Path::new("/nowhere"));
        assert_eq!(
            r["filenames"],
            json!(["/nowhere/a.rs", "/nowhere/sub/b-c.rs"])
        );
        assert_eq!((&r["mode"], &r["numLines"]), (&json!("content"), &json!(3)));
        let f = out(
            "a.rs\nb.rs\n\n[2 results limit reached. Use limit=4 for more.]",
            json!({"count": 2, "truncated": true}),
        );
        let r = tool_response(
            "find",
            &json!({"pattern": "*.rs", "path": "src"}),
            &f,
            Path::new("/w"),
        );
        assert_eq!(
            r,
            json!({"filenames": ["/w/src/a.rs", "/w/src/b.rs"], "durationMs": 0,
                   "numFiles": 2, "truncated": true})
        );
    }

    #[test]
    fn other_tools_keep_keels_shape() {
        let o = out("x", json!({"count": 1, "truncated": false}));
        let r = tool_response("ls", &json!({}), &o, Path::new("/w"));
        assert_eq!(
            r,
            json!({"output": "x", "details": {"count": 1, "truncated": false}})
        );
        let m = ToolOutput::ok("y");
        assert_eq!(
            tool_response("mcp__s__t", &json!({}), &m, Path::new("/w"))["output"],
            "y"
        );
    }
}
