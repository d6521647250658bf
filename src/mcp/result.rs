//! Maps an MCP `tools/call` result (its wire JSON) onto a tool result: text, images, resource
//! links, embedded resources, `structuredContent`, `isError`. Text over the cap is cut and the
//! full text kept in a file of the session's spill directory, as bash keeps its output.

use std::io::Write;
use std::path::Path;

use serde_json::{json, Value};

use crate::kernel::message::Content;
use crate::kernel::tool::{ToolEnv, ToolOutput};

/// The most result text the model gets; the rest is in the file named by `fullOutputPath`.
pub const MAX_RESULT_BYTES: usize = 20 * 1024;

/// Where a result came from (kept in its details).
pub struct Origin<'a> {
    pub server: &'a str,
    pub tool: &'a str,
}

/// The tool result for `result` (a `CallToolResult` as JSON).
pub fn map(result: &Value, origin: &Origin, env: &ToolEnv, temp_dir: &Path) -> ToolOutput {
    let mut blocks: Vec<Content> = Vec::new();
    let mut text = String::new();
    let empty = Vec::new();
    let content = result
        .get("content")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let push_text = |blocks: &mut Vec<Content>, text: &mut String, t: String| {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&t);
        blocks.push(Content::text(t));
    };
    for c in content {
        let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("");
        match s("type") {
            "text" => push_text(&mut blocks, &mut text, s("text").to_string()),
            "image" if !s("data").is_empty() => blocks.push(Content::Image {
                data: s("data").to_string(),
                mime_type: match s("mimeType") {
                    "" => "image/png".to_string(),
                    m => m.to_string(),
                },
            }),
            "audio" => push_text(
                &mut blocks,
                &mut text,
                format!(
                    "[audio {}: {} bytes of base64 left out]",
                    s("mimeType"),
                    s("data").len()
                ),
            ),
            "resource_link" => {
                let mut line = format!("[resource link] {}: {}", s("name"), s("uri"));
                if !s("mimeType").is_empty() {
                    line.push_str(&format!(" ({})", s("mimeType")));
                }
                if !s("description").is_empty() {
                    line.push_str(&format!(" — {}", s("description")));
                }
                push_text(&mut blocks, &mut text, line);
            }
            "resource" => {
                let r = c.get("resource").cloned().unwrap_or(Value::Null);
                let rs = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("");
                let line = match r.get("text").and_then(Value::as_str) {
                    Some(t) => format!("[resource {}]\n{t}", rs("uri")),
                    None => format!(
                        "[resource {} ({}): {} bytes of binary left out]",
                        rs("uri"),
                        rs("mimeType"),
                        rs("blob").len()
                    ),
                };
                push_text(&mut blocks, &mut text, line);
            }
            other => push_text(
                &mut blocks,
                &mut text,
                format!("[unsupported MCP content `{other}`]"),
            ),
        }
    }
    let structured = result.get("structuredContent").filter(|v| !v.is_null());
    if let (Some(v), true) = (structured, text.is_empty()) {
        push_text(&mut blocks, &mut text, v.to_string());
    }
    let mut details = json!({"server": origin.server, "tool": origin.tool});
    if let Some(v) = structured {
        details["structuredContent"] = v.clone();
    }
    if text.len() > MAX_RESULT_BYTES {
        blocks.retain(|b| !matches!(b, Content::Text { .. }));
        let mut end = MAX_RESULT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let mut head = text[..end].to_string();
        match spill(&text, env, temp_dir) {
            Ok(path) => {
                head.push_str(&format!(
                    "\n\n[Output truncated: showing the first {end} of {} bytes. Full output: {}]",
                    text.len(),
                    path.display()
                ));
                details["fullOutputPath"] = json!(path.display().to_string());
            }
            Err(e) => head.push_str(&format!(
                "\n\n[Output truncated: showing the first {end} of {} bytes; the full output could not be saved: {e}]",
                text.len()
            )),
        }
        details["truncated"] = json!(true);
        blocks.insert(0, Content::text(head));
    }
    if blocks.is_empty() {
        blocks.push(Content::text("(no output)"));
    }
    ToolOutput {
        content: blocks,
        details: Some(details),
        is_error: result
            .get("isError")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        for_hooks: None,
    }
}

fn spill(text: &str, env: &ToolEnv, temp_dir: &Path) -> std::io::Result<std::path::PathBuf> {
    let dir = env.output_dir(temp_dir)?;
    let f = tempfile::Builder::new()
        .prefix("mcp-")
        .suffix(".txt")
        .tempfile_in(dir)?;
    let (mut file, path) = f.keep().map_err(|e| e.error)?;
    file.write_all(text.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(v: Value, dir: &Path) -> ToolOutput {
        run_in(v, dir, &ToolEnv::new(Vec::new()))
    }

    fn run_in(v: Value, dir: &Path, env: &ToolEnv) -> ToolOutput {
        let origin = Origin {
            server: "s",
            tool: "t",
        };
        map(&v, &origin, env, dir)
    }

    #[test]
    fn maps_every_content_kind() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(
            json!({"content":[
                {"type":"text","text":"hello"},
                {"type":"image","data":"iVBO","mimeType":"image/png"},
                {"type":"resource_link","uri":"file:///a","name":"a","mimeType":"text/plain","description":"the a"},
                {"type":"resource","resource":{"uri":"file:///b","text":"bee"}},
                {"type":"resource","resource":{"uri":"file:///c","mimeType":"application/zip","blob":"AAAA"}},
                {"type":"audio","data":"AAAA","mimeType":"audio/wav"}],
              "structuredContent":{"n":1},"isError":true}),
            dir.path(),
        );
        assert!(out.is_error);
        assert_eq!(
            out.content[1],
            Content::Image {
                data: "iVBO".into(),
                mime_type: "image/png".into()
            }
        );
        let text = out.text();
        for want in [
            "hello",
            "[resource link] a: file:///a (text/plain) — the a",
            "[resource file:///b]\nbee",
            "application/zip): 4 bytes",
            "[audio audio/wav",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        assert_eq!(out.details.unwrap()["structuredContent"], json!({"n":1}));
    }

    #[test]
    fn structured_content_alone_becomes_text() {
        let dir = tempfile::tempdir().unwrap();
        let out = run(
            json!({"content":[],"structuredContent":{"sum":3}}),
            dir.path(),
        );
        assert_eq!(out.text(), r#"{"sum":3}"#);
        assert!(!out.is_error);
    }

    #[test]
    fn large_text_is_cut_and_kept_whole_in_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let big = "ab".repeat(MAX_RESULT_BYTES);
        // The spill directory lives as long as the session's tool env.
        let env = ToolEnv::new(Vec::new());
        let out = run_in(
            json!({"content":[{"type":"text","text":big}]}),
            dir.path(),
            &env,
        );
        let d = out.details.clone().unwrap();
        let path = d["fullOutputPath"].as_str().unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), big);
        assert!(out.text().len() < MAX_RESULT_BYTES + 200);
        assert!(out.text().contains("Output truncated"));
        assert_eq!(d["truncated"], json!(true));
    }
}
