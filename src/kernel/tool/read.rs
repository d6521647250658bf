//! `read`: returns a window of a text file's lines. Owns only reading; must never modify a file
//! and never return the content of a binary file.

use serde_json::{json, Value};

use super::text::{self, CutBy, MAX_BYTES, MAX_LINES};
use super::{str_arg, u64_arg, ToolContext, ToolOutput, ToolSpec};

/// Lines longer than this many characters are shortened.
const MAX_LINE_CHARS: usize = 2000;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: "read",
        description: "Read a text file. Output is capped at 2000 lines or 50KB; use offset \
                      (1-based line number) and limit to page through large files.",
        parameters: json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Path to the file (relative or absolute)"},
                "offset": {"type": "integer", "minimum": 1, "description": "Line number to start from (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of lines to read"}
            },
            "required": ["path"]
        }),
    }
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    match read(args, ctx).await {
        Ok(out) | Err(out) => out,
    }
}

async fn read(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let path = str_arg(args, "path")?;
    let offset = u64_arg(args, "offset")?;
    let limit = u64_arg(args, "limit")?;
    if offset == Some(0) {
        return Err(ToolOutput::error(
            "invalid arguments: `offset` is 1-based (first line is 1)",
        ));
    }
    if limit == Some(0) {
        return Err(ToolOutput::error(
            "invalid arguments: `limit` must be at least 1",
        ));
    }
    let full = ctx.resolve(path);
    let bytes = match tokio::fs::read(&full).await {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ToolOutput::error(format!("File not found: {path}")));
        }
        Err(e) => return Err(ToolOutput::error(format!("Cannot read {path}: {e}"))),
    };
    if text::is_binary(&bytes) {
        return Err(ToolOutput::error(format!(
            "Cannot read {path}: binary file, {} bytes",
            bytes.len()
        )));
    }
    let content = text::to_text(&bytes);
    let window = Window {
        path,
        start: to_usize(offset.unwrap_or(1)),
        limit: limit.map(to_usize),
    };
    let out = window.render(&content)?;
    Ok(out.with_details_path(&full.display().to_string()))
}

fn to_usize(v: u64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

/// The requested slice of lines: `start` is 1-based.
struct Window<'a> {
    path: &'a str,
    start: usize,
    limit: Option<usize>,
}

/// The rendered text plus the numbers the details need.
struct Rendered {
    text: String,
    total: usize,
    start: usize,
    end: usize,
    truncated: bool,
}

impl Window<'_> {
    fn render(&self, content: &str) -> Result<Rendered, ToolOutput> {
        let lines = text::split_lines(content);
        let total = lines.len();
        if self.start > total.max(1) {
            return Err(ToolOutput::error(format!(
                "Offset {} is beyond end of file ({total} lines total) in {}",
                self.start, self.path
            )));
        }
        let first = self.start - 1;
        let last = match self.limit {
            Some(l) => first.saturating_add(l).min(total),
            None => total,
        };
        let selected: Vec<String> = lines[first..last]
            .iter()
            .map(|l| text::truncate_line(l, MAX_LINE_CHARS).into_owned())
            .collect();
        let capped = text::cap_head(&selected.join("\n"), MAX_BYTES, MAX_LINES);
        let end = first + capped.shown_lines;
        let mut out = capped.text.clone();
        if capped.truncated() {
            let limit = match capped.cut_by {
                Some(CutBy::Bytes) => format!(" ({} limit)", text::format_size(MAX_BYTES)),
                _ => String::new(),
            };
            out.push_str(&format!(
                "\n\n[Showing lines {}-{end} of {total}{limit}. Use offset={} to continue.]",
                self.start,
                end + 1
            ));
        } else if last < total {
            out.push_str(&format!(
                "\n\n[{} more lines in file. Use offset={} to continue.]",
                total - last,
                last + 1
            ));
        }
        Ok(Rendered {
            text: out,
            total,
            start: self.start,
            end,
            truncated: capped.truncated(),
        })
    }
}

impl Rendered {
    fn with_details_path(self, path: &str) -> ToolOutput {
        let text = if self.total == 0 {
            "(empty file)".to_string()
        } else {
            self.text
        };
        ToolOutput::ok(text).with_details(json!({
            "path": path,
            "totalLines": self.total,
            "startLine": self.start,
            "endLine": self.end,
            "truncated": self.truncated,
        }))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use crate::kernel::tool::test_context as ctx;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[tokio::test]
    async fn reads_whole_small_file() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "one\ntwo\n").unwrap();
        let out = run(&json!({"path": "a.txt"}), &ctx(d.path())).await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "one\ntwo");
        let det = out.details.unwrap();
        assert_eq!(det["totalLines"], 2);
        assert_eq!(det["endLine"], 2);
        assert_eq!(det["truncated"], false);
    }

    #[tokio::test]
    async fn offset_and_limit_select_a_window() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("n.txt"), numbered(10)).unwrap();
        let out = run(
            &json!({"path": "n.txt", "offset": 3, "limit": 2}),
            &ctx(d.path()),
        )
        .await;
        assert_eq!(
            out.text(),
            "line 3\nline 4\n\n[6 more lines in file. Use offset=5 to continue.]"
        );
        let det = out.details.unwrap();
        assert_eq!(
            (det["startLine"].as_u64(), det["endLine"].as_u64()),
            (Some(3), Some(4))
        );
    }

    #[tokio::test]
    async fn default_cap_is_2000_lines_with_continue_hint() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("big.txt"), numbered(5123)).unwrap();
        let out = run(&json!({"path": "big.txt"}), &ctx(d.path())).await;
        let text = out.text();
        assert!(text.starts_with("line 1\nline 2\n"));
        assert!(text
            .contains("line 2000\n\n[Showing lines 1-2000 of 5123. Use offset=2001 to continue.]"));
        assert!(!text.contains("line 2001"));
        assert_eq!(out.details.unwrap()["truncated"], true);
    }

    #[tokio::test]
    async fn byte_cap_and_long_lines() {
        let d = tempfile::tempdir().unwrap();
        let line = "y".repeat(3000);
        let body: String = (0..100).map(|_| format!("{line}\n")).collect();
        std::fs::write(d.path().join("wide.txt"), body).unwrap();
        let out = run(&json!({"path": "wide.txt"}), &ctx(d.path())).await;
        let text = out.text();
        assert!(text.contains("[line truncated, 3000 chars]"));
        assert!(text.len() <= MAX_BYTES + 200);
        assert!(text.contains("(50.0KB limit). Use offset="));
    }

    #[tokio::test]
    async fn binary_missing_and_offset_errors() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("b.bin"), b"\x7fELF\0\0\x01").unwrap();
        let out = run(&json!({"path": "b.bin"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert_eq!(out.text(), "Cannot read b.bin: binary file, 7 bytes");

        let out = run(&json!({"path": "nope.txt"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("nope.txt"));

        std::fs::write(d.path().join("s.txt"), "a\nb\n").unwrap();
        let out = run(&json!({"path": "s.txt", "offset": 5}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("beyond end of file (2 lines total)"));

        let out = run(&json!({"offset": 1}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().contains("`path`"));
    }
}
