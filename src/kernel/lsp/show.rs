//! What the `lsp` tool returns: the servers' answers (`lsp-types`) as lines the model reads,
//! `path:line:column: text`, paths relative to the session's directory, files the sandbox denies
//! or `.gitignore` leaves out dropped (and counted), at most [`MAX_ITEMS`] items and
//! [`MAX_TEXT`] bytes.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use lsp_types::{
    DocumentSymbol, DocumentSymbolResponse, GotoDefinitionResponse, Hover, HoverContents, Location,
    MarkedString, OneOf, SymbolInformation, SymbolKind, TextEdit, WorkspaceEdit,
    WorkspaceSymbolResponse,
};
use serde_json::{json, Value};

use super::uri;
use crate::kernel::sandbox::SandboxPolicy;
use crate::kernel::tool::ToolOutput;

/// Items (locations, symbols, edits) shown at most.
pub const MAX_ITEMS: usize = 100;
/// The result's text at most (bytes).
pub const MAX_TEXT: usize = 16 * 1024;

/// What a call shows: its text and, for front ends, the items as JSON.
#[derive(Debug, Default)]
pub struct Shown {
    lines: Vec<String>,
    items: Vec<Value>,
    /// Items left out: beyond the cap, or in files left out.
    more: usize,
    hidden: usize,
    empty: &'static str,
}

impl Shown {
    fn new(empty: &'static str) -> Shown {
        Shown {
            empty,
            ..Shown::default()
        }
    }

    fn push(&mut self, line: String, item: Value) {
        if self.lines.len() >= MAX_ITEMS {
            self.more += 1;
            return;
        }
        self.lines.push(line);
        self.items.push(item);
    }

    pub fn into_output(self) -> ToolOutput {
        let mut text = String::new();
        for l in &self.lines {
            if text.len() + l.len() + 1 > MAX_TEXT {
                text.push_str(&format!("… (cut at {MAX_TEXT} bytes)\n"));
                break;
            }
            text.push_str(l);
            text.push('\n');
        }
        if self.lines.is_empty() {
            text.push_str(self.empty);
            text.push('\n');
        }
        if self.more > 0 {
            text.push_str(&format!("… and {} more\n", self.more));
        }
        if self.hidden > 0 {
            text.push_str(&format!(
                "({} in gitignored or unreadable files left out)\n",
                self.hidden
            ));
        }
        ToolOutput::ok(text.trim_end().to_string()).with_details(json!({
            "items": self.items, "more": self.more, "hidden": self.hidden,
        }))
    }
}

/// Which files results may name: not denied by the sandbox, not gitignored under the root.
pub struct Filter<'a> {
    root: &'a Path,
    policy: &'a SandboxPolicy,
    ignores: RefCell<HashMap<PathBuf, Option<Gitignore>>>,
    lines: RefCell<HashMap<PathBuf, Vec<String>>>,
}

impl<'a> Filter<'a> {
    pub fn new(root: &'a Path, policy: &'a SandboxPolicy) -> Filter<'a> {
        Filter {
            root,
            policy,
            ignores: RefCell::default(),
            lines: RefCell::default(),
        }
    }

    /// Whether `path` may be shown.
    fn keeps(&self, path: &Path) -> bool {
        let real = crate::kernel::sandbox::policy::real(path);
        if self.policy.read_denied(&real).is_some() {
            return false;
        }
        let Ok(rel) = path.strip_prefix(self.root) else {
            return true;
        };
        if rel.components().any(|c| c.as_os_str() == ".git") {
            return false;
        }
        // Each directory from the root down to the file's own, with its `.gitignore`.
        let mut dir = self.root.to_path_buf();
        let mut dirs = vec![dir.clone()];
        for c in rel.parent().into_iter().flat_map(|p| p.components()) {
            dir.push(c);
            dirs.push(dir.clone());
        }
        let mut cache = self.ignores.borrow_mut();
        for d in dirs {
            let gi = cache.entry(d.clone()).or_insert_with(|| {
                let file = d.join(".gitignore");
                file.is_file().then(|| {
                    let mut b = GitignoreBuilder::new(&d);
                    b.add(&file);
                    b.build().ok()
                })?
            });
            if let Some(gi) = gi {
                if let Ok(under) = path.strip_prefix(&d) {
                    if gi.matched_path_or_any_parents(under, false).is_ignore() {
                        return false;
                    }
                }
            }
        }
        true
    }

    fn shown(&self, path: &Path) -> String {
        super::tool::shown_path(path, self.root)
            .display()
            .to_string()
    }

    /// The text of 0-based line `n` of `path`, trimmed (empty when unreadable).
    fn line(&self, path: &Path, n: u32) -> String {
        let mut cache = self.lines.borrow_mut();
        let lines = cache.entry(path.to_path_buf()).or_insert_with(|| {
            let small = std::fs::metadata(path).is_ok_and(|m| m.len() < 4 << 20);
            match small {
                true => std::fs::read_to_string(path)
                    .map(|t| t.lines().map(str::to_string).collect())
                    .unwrap_or_default(),
                false => Vec::new(),
            }
        });
        let l = lines.get(n as usize).map_or("", |l| l.trim());
        match l.char_indices().nth(200) {
            Some((cut, _)) => format!("{}…", &l[..cut]),
            None => l.to_string(),
        }
    }
}

/// A location's line: `path:line:column: text`.
fn location_line(filter: &Filter, path: &Path, line: u32, character: u32) -> (String, Value) {
    let shown = filter.shown(path);
    let text = filter.line(path, line);
    (
        format!("{shown}:{}:{}: {text}", line + 1, character + 1),
        json!({"path": shown, "line": line + 1, "column": character + 1, "text": text}),
    )
}

/// `definition`, `implementation` and `references` answers.
pub fn locations(v: &Value, filter: &Filter) -> Shown {
    let mut out = Shown::new("No results.");
    let locs: Vec<(String, u32, u32)> =
        match serde_json::from_value::<GotoDefinitionResponse>(v.clone()) {
            Ok(GotoDefinitionResponse::Scalar(l)) => vec![loc(&l)],
            Ok(GotoDefinitionResponse::Array(ls)) => ls.iter().map(loc).collect(),
            Ok(GotoDefinitionResponse::Link(ls)) => ls
                .iter()
                .map(|l| {
                    let s = l.target_selection_range.start;
                    (l.target_uri.as_str().to_string(), s.line, s.character)
                })
                .collect(),
            Err(_) => Vec::new(),
        };
    for (u, line, character) in locs {
        let Some(path) = uri::to_path(&u) else {
            continue;
        };
        if !filter.keeps(&path) {
            out.hidden += 1;
            continue;
        }
        let (l, item) = location_line(filter, &path, line, character);
        out.push(l, item);
    }
    out
}

fn loc(l: &Location) -> (String, u32, u32) {
    (
        l.uri.as_str().to_string(),
        l.range.start.line,
        l.range.start.character,
    )
}

/// A `hover` answer, as text.
pub fn hover(v: &Value) -> Shown {
    let mut out = Shown::new("No hover information here.");
    let Ok(h) = serde_json::from_value::<Hover>(v.clone()) else {
        return out;
    };
    let marked = |m: &MarkedString| match m {
        MarkedString::String(s) => s.clone(),
        MarkedString::LanguageString(l) => format!("```{}\n{}\n```", l.language, l.value),
    };
    let text = match &h.contents {
        HoverContents::Scalar(m) => marked(m),
        HoverContents::Array(ms) => ms.iter().map(marked).collect::<Vec<_>>().join("\n\n"),
        HoverContents::Markup(m) => m.value.clone(),
    };
    for l in text.trim().lines().take(MAX_ITEMS) {
        out.lines.push(l.to_string());
    }
    out.items.push(json!({"text": text}));
    out
}

fn kind(k: SymbolKind) -> String {
    let s = format!("{k:?}");
    s.to_lowercase()
}

/// A `documentSymbol` answer: one line per symbol, nested ones indented.
pub fn document_symbols(v: &Value, file: &Path, filter: &Filter) -> Shown {
    let mut out = Shown::new("No symbols.");
    fn walk(out: &mut Shown, s: &DocumentSymbol, depth: usize, path: &str) {
        let line = s.selection_range.start.line + 1;
        out.push(
            format!("{}{} {} (line {line})", "  ".repeat(depth), kind(s.kind), s.name),
            json!({"name": s.name, "kind": kind(s.kind), "path": path, "line": line, "depth": depth}),
        );
        for c in s.children.iter().flatten() {
            walk(out, c, depth + 1, path);
        }
    }
    let shown = filter.shown(file);
    match serde_json::from_value::<DocumentSymbolResponse>(v.clone()) {
        Ok(DocumentSymbolResponse::Nested(ss)) => {
            ss.iter().for_each(|s| walk(&mut out, s, 0, &shown))
        }
        Ok(DocumentSymbolResponse::Flat(ss)) => {
            for s in ss {
                let line = s.location.range.start.line + 1;
                let container = s
                    .container_name
                    .map(|c| format!(" in {c}"))
                    .unwrap_or_default();
                out.push(
                    format!("{} {}{container} (line {line})", kind(s.kind), s.name),
                    json!({"name": s.name, "kind": kind(s.kind), "path": shown, "line": line, "depth": 0}),
                );
            }
        }
        Err(_) => {}
    }
    out
}

/// `workspace/symbol` answers (one per server asked).
pub fn workspace_symbols(answers: &[Value], filter: &Filter) -> Shown {
    let mut out = Shown::new("No symbols match.");
    let mut symbol = |name: &str, k: SymbolKind, u: &str, line: u32, character: u32| {
        let Some(path) = uri::to_path(u) else { return };
        if !filter.keeps(&path) {
            out.hidden += 1;
            return;
        }
        let shown = filter.shown(&path);
        out.push(
            format!("{} {name} {shown}:{}:{}", kind(k), line + 1, character + 1),
            json!({"name": name, "kind": kind(k), "path": shown, "line": line + 1, "column": character + 1}),
        );
    };
    for v in answers {
        match serde_json::from_value::<WorkspaceSymbolResponse>(v.clone()) {
            Ok(WorkspaceSymbolResponse::Flat(ss)) => {
                for s in ss {
                    let SymbolInformation {
                        name,
                        kind: k,
                        location: l,
                        ..
                    } = s;
                    let (u, line, c) = loc(&l);
                    symbol(&name, k, &u, line, c);
                }
            }
            Ok(WorkspaceSymbolResponse::Nested(ss)) => {
                for s in ss {
                    match &s.location {
                        OneOf::Left(l) => {
                            let (u, line, c) = loc(l);
                            symbol(&s.name, s.kind, &u, line, c);
                        }
                        OneOf::Right(w) => symbol(&s.name, s.kind, w.uri.as_str(), 0, 0),
                    }
                }
            }
            Err(_) => {}
        }
    }
    out
}

/// A `rename` answer: each edit as `path:line:column: old line` then `→ new line`. Nothing is
/// applied.
pub fn rename(v: &Value, filter: &Filter) -> Shown {
    let mut out = Shown::new("The server proposes no edits for this rename.");
    let Ok(edit) = serde_json::from_value::<WorkspaceEdit>(v.clone()) else {
        return out;
    };
    let mut by_file: Vec<(String, Vec<TextEdit>)> = Vec::new();
    for (u, edits) in edit.changes.unwrap_or_default() {
        by_file.push((u.as_str().to_string(), edits));
    }
    if let Some(lsp_types::DocumentChanges::Edits(docs)) = edit.document_changes {
        for d in docs {
            let edits = d
                .edits
                .into_iter()
                .map(|e| match e {
                    OneOf::Left(t) => t,
                    OneOf::Right(a) => a.text_edit,
                })
                .collect();
            by_file.push((d.text_document.uri.as_str().to_string(), edits));
        }
    }
    by_file.sort_by(|a, b| a.0.cmp(&b.0));
    let files = by_file.len();
    let mut count = 0;
    for (u, mut edits) in by_file {
        let Some(path) = uri::to_path(&u) else {
            continue;
        };
        if !filter.keeps(&path) {
            out.hidden += edits.len();
            continue;
        }
        edits.sort_by_key(|e| (e.range.start.line, e.range.start.character));
        for e in edits {
            count += 1;
            let (line, item) =
                location_line(filter, &path, e.range.start.line, e.range.start.character);
            let mut item = item;
            item["newText"] = json!(e.new_text);
            out.push(format!("{line}\n    → {}", e.new_text), item);
        }
    }
    if count > 0 {
        out.lines.insert(
            0,
            format!("A rename would make {count} edits in {files} files (not applied):"),
        );
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn gitignored_and_denied_files_are_left_out() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::write(root.join(".gitignore"), "build/\n").unwrap();
        std::fs::create_dir_all(root.join("build")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/a.py"), "x = 1\ndef f(): pass\n").unwrap();
        std::fs::write(root.join("build/a.py"), "x = 1\n").unwrap();
        let policy = crate::kernel::sandbox::Sandbox::off(root).policy.clone();
        let filter = Filter::new(root, &policy);
        let at = |p: &str| json!({"uri": uri::from_path(&root.join(p)), "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 5}}});
        let v = json!([at("src/a.py"), at("build/a.py")]);
        let out = locations(&v, &filter).into_output();
        assert_eq!(
            out.text(),
            "src/a.py:2:5: def f(): pass\n(1 in gitignored or unreadable files left out)"
        );
    }
}
