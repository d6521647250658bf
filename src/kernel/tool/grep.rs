//! `grep`: searches file contents with ripgrep's engine (`grep-regex` + `grep-searcher`) over an
//! `ignore` walk that honours `.gitignore`. Each listed file is opened by descriptor and judged
//! by where it really is (`kernel::fsx`), below the root never through a symlink. Owns only
//! that search; must never modify anything and never block the async runtime (the search runs
//! in `spawn_blocking`).

use std::borrow::Cow;
use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkContextKind, SinkMatch,
};
use ignore::overrides::{Override, OverrideBuilder};
use ignore::WalkBuilder;
use serde::Deserialize;
use serde_json::{json, Value};

use super::args::Field;
use super::details::GrepDetails;
use super::find::relative;
use super::text::{self, MAX_BYTES};
use super::{ToolContext, ToolOutput, ToolSpec};
use crate::kernel::fsx::{self, FsxError};
use crate::kernel::sandbox::SandboxPolicy;

const DEFAULT_LIMIT: usize = 100;
/// Matched and context lines longer than this many characters are shortened.
const MAX_LINE_CHARS: usize = 500;

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("grep"),
        description: Cow::Borrowed(
            "Search file contents for a regex (or literal) pattern. Respects \
                      .gitignore. Output lines are 'path:line: text'. Default limit 100 matches.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regex pattern (or literal text with literal=true)"},
                "path": {"type": "string", "description": "Directory or file to search (default: current directory)"},
                "glob": {"type": "string", "description": "Only search files matching this glob, e.g. '*.rs'"},
                "ignoreCase": {"type": "boolean", "description": "Case-insensitive search"},
                "literal": {"type": "boolean", "description": "Treat pattern as literal text, not a regex"},
                "context": {"type": "integer", "minimum": 0, "description": "Lines of context around each match"},
                "limit": {"type": "integer", "minimum": 1, "description": "Maximum number of matches (default 100)"}
            },
            "required": ["pattern"]
        }),
    }
}

pub(super) async fn run(args: &Value, ctx: &ToolContext) -> ToolOutput {
    match grep(args, ctx).await {
        Ok(out) | Err(out) => out,
    }
}

/// `grep`'s arguments, read once; each is checked where it is used.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
#[serde(rename_all = "camelCase")]
struct GrepArgs {
    pattern: Field<String>,
    path: Field<String>,
    glob: Field<String>,
    ignore_case: Field<bool>,
    literal: Field<bool>,
    context: Field<u64>,
    limit: Field<u64>,
}

fn usize_of(n: Option<u64>, default: usize) -> usize {
    n.map_or(default, |v| usize::try_from(v).unwrap_or(usize::MAX))
}

/// Everything the blocking search needs.
struct Query {
    root: std::path::PathBuf,
    /// Denied paths under `root` are not searched.
    guard: super::guard::WalkGuard,
    /// What each opened file is judged by (a name swapped for a symlink since it was listed).
    policy: SandboxPolicy,
    matcher: RegexMatcher,
    glob: Option<Override>,
    context: usize,
    limit: usize,
}

fn query(args: GrepArgs, ctx: &ToolContext) -> Result<Query, ToolOutput> {
    let pattern = args.pattern.required("pattern")?;
    let path = args.path.optional("path")?;
    let path = path.as_deref().unwrap_or(".");
    let root = ctx.resolve(path);
    if !root.exists() {
        return Err(ToolOutput::error(format!("Path not found: {path}")));
    }
    super::guard::read(ctx, &root, path)?;
    let guard = super::guard::WalkGuard::new(ctx, &root);
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.ignore_case.optional("ignoreCase")?.unwrap_or(false))
        .fixed_strings(args.literal.optional("literal")?.unwrap_or(false))
        .line_terminator(Some(b'\n'))
        .build(&pattern)
        .map_err(|e| ToolOutput::error(format!("Invalid regex `{pattern}`: {e}")))?;
    let glob = match args.glob.optional("glob")? {
        None => None,
        Some(g) => {
            let built = OverrideBuilder::new(&root).add(&g).and_then(|b| b.build());
            Some(built.map_err(|e| ToolOutput::error(format!("Invalid glob `{g}`: {e}")))?)
        }
    };
    Ok(Query {
        root,
        guard,
        policy: ctx.sandbox.policy.clone(),
        matcher,
        glob,
        context: usize_of(args.context.optional("context")?, 0),
        limit: usize_of(args.limit.optional("limit")?, DEFAULT_LIMIT).max(1),
    })
}

async fn grep(args: &Value, ctx: &ToolContext) -> Result<ToolOutput, ToolOutput> {
    let q = query(super::args::read(args), ctx)?;
    let limit = q.limit;
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&cancel);
    let task = tokio::task::spawn_blocking(move || search(&q, &flag));
    let found = tokio::select! {
        r = task => r.map_err(|e| ToolOutput::error(format!("grep failed: {e}")))?,
        _ = ctx.abort.aborted() => {
            cancel.store(true, Ordering::Relaxed);
            return Err(ToolOutput::error("grep aborted"));
        }
    };
    Ok(render(found, limit))
}

fn render(found: Found, limit: usize) -> ToolOutput {
    let details = json!(GrepDetails {
        matches: found.matches as u64,
        files: found.files as u64,
        truncated: found.truncated,
    });
    if found.matches == 0 {
        return ToolOutput::ok("No matches found").with_details(details);
    }
    let capped = text::cap_head(&found.lines.join("\n"), MAX_BYTES, usize::MAX);
    let mut out = capped.text;
    let mut notes = Vec::new();
    if found.truncated {
        notes.push(format!(
            "{limit} matches limit reached. Use limit={} for more, or refine the pattern",
            limit.saturating_mul(2)
        ));
    }
    if capped.cut_by.is_some() {
        notes.push(format!("Output capped at {}", text::format_size(MAX_BYTES)));
    }
    if !notes.is_empty() {
        out.push_str(&format!("\n\n[{}.]", notes.join(". ")));
    }
    ToolOutput::ok(out).with_details(details)
}

/// What the search collected.
#[derive(Default)]
struct Found {
    lines: Vec<String>,
    matches: usize,
    files: usize,
    truncated: bool,
}

fn search(q: &Query, cancel: &AtomicBool) -> Found {
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .before_context(q.context)
        .after_context(q.context)
        // As ripgrep does for a file it is given: NUL bytes become line ends, and a match in
        // such a file is reported as one "binary file matches" line, not as its lines.
        .binary_detection(BinaryDetection::convert(0))
        .build();
    let guard = q.guard.clone();
    let walker = WalkBuilder::new(&q.root)
        .require_git(false)
        .filter_entry(move |e| guard.allows(e.path()))
        .sort_by_file_path(|a, b| a.cmp(b))
        .build();
    let mut found = Found::default();
    for entry in walker.flatten() {
        if found.truncated || cancel.load(Ordering::Relaxed) {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let rel = relative(&q.root, entry.path());
        if let Some(g) = &q.glob {
            if !g.matched(&rel, false).is_whitelist() {
                continue;
            }
        }
        let rel = rel.to_string_lossy().into_owned();
        // The walk's root as named; below it, a name is not followed if it became a symlink.
        match open(entry.path(), entry.depth() == 0, &q.policy) {
            Ok(file) => search_file(&mut searcher, q, &file, &rel, &mut found, cancel),
            Err(e) => tracing::debug!(path = %entry.path().display(), error = %e,
                "grep: skipping a file it may not open"),
        }
    }
    found
}

/// Opens a listed file by descriptor, judged by where it really is: a regular file only.
fn open(path: &Path, follow: bool, policy: &SandboxPolicy) -> Result<File, FsxError> {
    let file = fsx::open_read(path, follow, false, policy)?;
    match file.metadata()?.is_file() {
        true => Ok(file),
        false => Err(FsxError::Io(std::io::Error::other("not a regular file"))),
    }
}

fn search_file(
    searcher: &mut Searcher,
    q: &Query,
    file: &File,
    rel: &str,
    found: &mut Found,
    cancel: &AtomicBool,
) {
    let mut sink = Collect {
        rel,
        found,
        limit: q.limit,
        cancel,
        before: Vec::new(),
        hit: false,
        binary_at: None,
    };
    if let Err(e) = searcher.search_file(&q.matcher, file, &mut sink) {
        tracing::debug!(path = rel, error = %e, "grep: skipping unreadable file");
    }
    if sink.hit {
        found.files += 1;
    }
}

/// Collects one file's matches and context lines into [`Found`].
struct Collect<'a> {
    rel: &'a str,
    found: &'a mut Found,
    limit: usize,
    cancel: &'a AtomicBool,
    /// Before-context lines, kept only if a match (within the limit) follows.
    before: Vec<String>,
    hit: bool,
    /// Where the first NUL byte was found, once it was.
    binary_at: Option<u64>,
}

impl Collect<'_> {
    fn line(&self, sep: char, number: Option<u64>, bytes: &[u8]) -> String {
        let raw = text::to_text(bytes);
        let trimmed = raw.trim_end_matches(['\n', '\r']);
        let shown = text::truncate_line(trimmed, MAX_LINE_CHARS);
        format!("{}{sep}{}{sep} {shown}", self.rel, number.unwrap_or(0))
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _s: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        if self.found.matches >= self.limit {
            self.found.truncated = true;
            return Ok(false);
        }
        self.found.matches += 1;
        self.hit = true;
        if let Some(at) = self.binary_at {
            self.before.clear();
            self.found.lines.push(format!(
                "{}: binary file matches (found \"\\0\" byte around offset {at})",
                self.rel
            ));
            // One line says it all: the rest of the file is not searched.
            return Ok(false);
        }
        let line = self.line(':', m.line_number(), m.bytes());
        self.found.lines.append(&mut self.before);
        self.found.lines.push(line);
        Ok(!self.cancel.load(Ordering::Relaxed))
    }

    fn binary_data(&mut self, _s: &Searcher, offset: u64) -> Result<bool, Self::Error> {
        self.binary_at.get_or_insert(offset);
        Ok(true)
    }

    fn context(&mut self, _s: &Searcher, c: &SinkContext<'_>) -> Result<bool, Self::Error> {
        if self.binary_at.is_some() {
            return Ok(true);
        }
        let line = self.line('-', c.line_number(), c.bytes());
        match c.kind() {
            SinkContextKind::Before => self.before.push(line),
            _ => self.found.lines.push(line),
        }
        Ok(true)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    use crate::kernel::tool::test_context as ctx;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (f, body) in files {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, body).unwrap();
        }
        d
    }

    /// Arguments are read once into typed fields, yet each is judged where the tool uses it:
    /// with several wrong, the model is told the first in the tool's order (not in the order
    /// it sent them), and a missing path is said before a wrong flag, as always.
    #[tokio::test]
    async fn wrong_arguments_are_reported_in_the_tools_order() {
        let d = tree(&[("a.txt", "x\n")]);
        let said = |args: Value| {
            let c = ctx(d.path());
            async move { run(&args, &c).await.text() }
        };
        let cases = [
            (
                json!({}),
                "invalid arguments: missing required field `pattern`",
            ),
            (
                json!({"pattern": null}),
                "invalid arguments: `pattern` must be a string",
            ),
            (
                json!({"pattern": "x", "path": 3}),
                "invalid arguments: `path` must be a string",
            ),
            (
                json!({"limit": "x", "ignoreCase": 1, "pattern": "x", "path": "gone"}),
                "Path not found: gone",
            ),
            (
                json!({"limit": "x", "literal": 1, "ignoreCase": 1, "pattern": "x"}),
                "invalid arguments: `ignoreCase` must be a boolean",
            ),
            (
                json!({"limit": -1, "context": 1.5, "pattern": "x", "glob": null}),
                "invalid arguments: `context` must be a non-negative integer",
            ),
            (
                json!({"pattern": "x", "glob": ["*"]}),
                "invalid arguments: `glob` must be a string",
            ),
            (
                json!("not an object"),
                "invalid arguments: missing required field `pattern`",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(said(args.clone()).await, want, "{args}");
        }
        let ok = run(
            &json!({"pattern": "x", "path": null, "ignoreCase": null, "limit": 5}),
            &ctx(d.path()),
        )
        .await;
        assert!(!ok.is_error, "{}", ok.text());
    }

    #[tokio::test]
    async fn finds_matches_and_respects_gitignore() {
        let d = tree(&[
            (".gitignore", "build/\n"),
            ("src/a.rs", "fn main() {}\nlet needle = 1;\n"),
            ("notes.md", "a needle here\n"),
            ("build/gen.rs", "needle in ignored dir\n"),
            (".hidden/h.rs", "needle hidden\n"),
        ]);
        let out = run(&json!({"pattern": "needle"}), &ctx(d.path())).await;
        assert!(!out.is_error, "{}", out.text());
        assert_eq!(
            out.text(),
            "notes.md:1: a needle here\nsrc/a.rs:2: let needle = 1;"
        );
        let det = out.details.unwrap();
        assert_eq!(
            (det["matches"].as_u64(), det["files"].as_u64()),
            (Some(2), Some(2))
        );
    }

    #[tokio::test]
    async fn glob_ignore_case_literal_and_context() {
        let d = tree(&[("a.rs", "one\nTWO\nthree\n"), ("b.txt", "two\n")]);
        let args = json!({"pattern": "two", "ignoreCase": true, "glob": "*.rs", "context": 1});
        let out = run(&args, &ctx(d.path())).await;
        assert_eq!(out.text(), "a.rs-1- one\na.rs:2: TWO\na.rs-3- three");
        let out = run(&json!({"pattern": "two"}), &ctx(d.path())).await;
        assert_eq!(out.text(), "b.txt:1: two");
        let d2 = tree(&[("x.txt", "a.b\naxb\n")]);
        let out = run(&json!({"pattern": "a.b", "literal": true}), &ctx(d2.path())).await;
        assert_eq!(out.text(), "x.txt:1: a.b");
    }

    #[tokio::test]
    async fn limit_no_matches_invalid_regex_and_long_lines() {
        let body: String = (0..5).map(|i| format!("hit {i}\n")).collect();
        let d = tree(&[
            ("f.txt", &body),
            ("long.txt", &format!("{}hit\n", "z".repeat(600))),
        ]);
        let out = run(&json!({"pattern": "hit \\d", "limit": 3}), &ctx(d.path())).await;
        assert!(out
            .text()
            .starts_with("f.txt:1: hit 0\nf.txt:2: hit 1\nf.txt:3: hit 2\n\n[3 matches limit"));
        assert_eq!(out.details.unwrap()["truncated"], true);
        let out = run(
            &json!({"pattern": "zhit", "path": "long.txt"}),
            &ctx(d.path()),
        )
        .await;
        assert!(out
            .text()
            .starts_with(&format!("long.txt:1: {}…", "z".repeat(500))));
        assert!(out.text().ends_with("[line truncated, 603 chars]"));
        let out = run(&json!({"pattern": "absent"}), &ctx(d.path())).await;
        assert!(!out.is_error);
        assert_eq!(out.text(), "No matches found");
        let out = run(&json!({"pattern": "(unclosed"}), &ctx(d.path())).await;
        assert!(out.is_error);
        assert!(out.text().starts_with("Invalid regex"));
    }

    /// A NUL byte used to end the search of a file silently ("No matches found").
    #[tokio::test]
    async fn a_match_in_a_binary_file_is_reported_like_ripgrep() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("data.bin"),
            b"head\0tail needle\nmore needle\n",
        )
        .unwrap();
        std::fs::write(d.path().join("text.txt"), "a needle\n").unwrap();
        std::fs::write(d.path().join("other.bin"), b"\0\0nothing\n").unwrap();
        let out = run(&json!({"pattern": "needle", "context": 1}), &ctx(d.path())).await;
        assert!(!out.is_error);
        assert_eq!(
            out.text(),
            "data.bin: binary file matches (found \"\\0\" byte around offset 4)\n\
             text.txt:1: a needle"
        );
        let det = out.details.unwrap();
        assert_eq!(
            (det["matches"].as_u64(), det["files"].as_u64()),
            (Some(2), Some(2))
        );
        let out = run(
            &json!({"pattern": "needle", "path": "data.bin"}),
            &ctx(d.path()),
        )
        .await;
        assert_eq!(
            out.text(),
            "data.bin: binary file matches (found \"\\0\" byte around offset 4)"
        );
    }
}
