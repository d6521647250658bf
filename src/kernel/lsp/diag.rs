//! Diagnostics as `edit` and `write` report them: the edited file's (errors, or all by the
//! setting) and the errors the edit introduced elsewhere (a diff against the set before it),
//! bounded in count and in bytes.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use lsp_types::{Diagnostic, DiagnosticSeverity, NumberOrString};
use serde::{Deserialize, Serialize};

use super::config::DiagnosticsMode;
use super::server::Published;

/// Errors of other files reported after one edit, at most.
pub const MAX_OTHER: usize = 10;
/// The appended text, at most (bytes).
pub const MAX_TEXT: usize = 2048;

/// One diagnostic as front ends read it from `edit` and `write` details.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDiagnostic {
    /// Relative to the session's directory when inside it.
    pub path: String,
    /// 1-based.
    pub line: u32,
    /// 1-based (UTF-16 code units, as the server counts).
    pub column: u32,
    /// `error`, `warning`, `info` or `hint`.
    pub severity: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

/// What the language server said about an edit, in the tool's `details.lsp`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LspReport {
    /// The server asked.
    pub server: String,
    /// The edited file's diagnostics (by the setting: errors, or all).
    #[serde(default)]
    pub file: Vec<FileDiagnostic>,
    /// Errors this edit introduced in other files.
    #[serde(default)]
    pub other: Vec<FileDiagnostic>,
    /// No diagnostics of this change came in time.
    #[serde(default)]
    pub timed_out: bool,
    /// A note for the model (a server missing, restarted, timed out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

fn severity(d: &Diagnostic) -> DiagnosticSeverity {
    d.severity.unwrap_or(DiagnosticSeverity::ERROR)
}

fn kept(d: &Diagnostic, mode: DiagnosticsMode) -> bool {
    match mode {
        DiagnosticsMode::Off => false,
        DiagnosticsMode::Errors => severity(d) == DiagnosticSeverity::ERROR,
        DiagnosticsMode::All => severity(d) != DiagnosticSeverity::HINT,
    }
}

/// `d` of the document at `path`, `path` shown relative to `root`.
pub fn describe(path: &Path, root: &Path, d: &Diagnostic) -> FileDiagnostic {
    let shown = path.strip_prefix(root).unwrap_or(path);
    FileDiagnostic {
        path: shown.display().to_string(),
        line: d.range.start.line + 1,
        column: d.range.start.character + 1,
        severity: match severity(d) {
            DiagnosticSeverity::WARNING => "warning",
            DiagnosticSeverity::INFORMATION => "info",
            DiagnosticSeverity::HINT => "hint",
            _ => "error",
        }
        .into(),
        message: d.message.clone(),
        source: d.source.clone(),
        code: d.code.as_ref().map(|c| match c {
            NumberOrString::Number(n) => n.to_string(),
            NumberOrString::String(s) => s.clone(),
        }),
    }
}

/// What identifies an error across two snapshots.
type Key = (String, u32, String);

/// The errors of every document but `except`, as keys.
pub fn error_keys(all: &HashMap<String, Published>, except: &str) -> HashSet<Key> {
    all.iter()
        .filter(|(uri, _)| uri.as_str() != except)
        .flat_map(|(uri, p)| {
            p.diagnostics
                .iter()
                .filter(|d| severity(d) == DiagnosticSeverity::ERROR)
                .map(move |d| (uri.clone(), d.range.start.line, d.message.clone()))
        })
        .collect()
}

/// The edited file's diagnostics kept by `mode`, and the errors elsewhere that `before` did
/// not have (at most [`MAX_OTHER`]).
pub fn report(
    server: &str,
    (path, published): (&Path, &Published),
    now: &HashMap<String, Published>,
    before: &HashSet<Key>,
    root: &Path,
    mode: DiagnosticsMode,
) -> LspReport {
    let uri = super::uri::from_path(path);
    let file = published
        .diagnostics
        .iter()
        .filter(|d| kept(d, mode))
        .map(|d| describe(path, root, d))
        .collect();
    let mut other: Vec<FileDiagnostic> = Vec::new();
    let mut uris: Vec<&String> = now.keys().filter(|u| **u != uri).collect();
    uris.sort();
    for u in uris {
        let Some(p) = super::uri::to_path(u) else {
            continue;
        };
        for d in &now[u].diagnostics {
            let key = (u.clone(), d.range.start.line, d.message.clone());
            if severity(d) == DiagnosticSeverity::ERROR && !before.contains(&key) {
                other.push(describe(&p, root, d));
            }
        }
    }
    other.truncate(MAX_OTHER);
    LspReport {
        server: server.into(),
        file,
        other,
        ..LspReport::default()
    }
}

/// The text appended to the tool's result: nothing when there is nothing to say.
pub fn text(r: &LspReport) -> Option<String> {
    let mut out = String::new();
    let line = |d: &FileDiagnostic| {
        let code = d
            .code
            .as_ref()
            .map(|c| format!(" [{c}]"))
            .unwrap_or_default();
        format!(
            "{} {}:{}:{} {}{code}\n",
            d.severity.to_uppercase(),
            d.path,
            d.line,
            d.column,
            d.message.replace('\n', " ")
        )
    };
    if !r.file.is_empty() {
        out.push_str(&format!(
            "Diagnostics from {} after this change:\n",
            r.server
        ));
        r.file.iter().for_each(|d| out.push_str(&line(d)));
    }
    if !r.other.is_empty() {
        out.push_str("Errors this change introduced in other files:\n");
        r.other.iter().for_each(|d| out.push_str(&line(d)));
    }
    if let Some(note) = &r.note {
        out.push_str(note);
        out.push('\n');
    }
    if out.is_empty() {
        return None;
    }
    if out.len() > MAX_TEXT {
        let total = r.file.len() + r.other.len();
        let mut cut = MAX_TEXT - 80;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(out[..cut].rfind('\n').map_or(cut, |i| i + 1));
        let shown = out.lines().filter(|l| l.contains(':')).count().min(total);
        out.push_str(&format!(
            "… (cut at {MAX_TEXT} bytes; about {} more)\n",
            total.saturating_sub(shown)
        ));
    }
    Some(out.trim_end().to_string())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use lsp_types::{Position, Range};

    fn diag(line: u32, sev: DiagnosticSeverity, msg: &str) -> Diagnostic {
        Diagnostic {
            range: Range::new(Position::new(line, 2), Position::new(line, 5)),
            severity: Some(sev),
            message: msg.into(),
            ..Default::default()
        }
    }

    #[test]
    fn only_errors_of_the_file_and_new_errors_elsewhere() {
        let root = Path::new("/w");
        let (a, b) = (Path::new("/w/a.py"), Path::new("/w/b.py"));
        let published = Published {
            version: Some(2),
            seq: 3,
            diagnostics: vec![
                diag(0, DiagnosticSeverity::ERROR, "bad"),
                diag(1, DiagnosticSeverity::WARNING, "meh"),
            ],
        };
        let old = Published {
            diagnostics: vec![diag(4, DiagnosticSeverity::ERROR, "old")],
            ..Default::default()
        };
        let mut now = HashMap::new();
        now.insert(super::super::uri::from_path(b), old.clone());
        let before = error_keys(&now, "");
        now.get_mut(&super::super::uri::from_path(b))
            .unwrap()
            .diagnostics
            .push(diag(7, DiagnosticSeverity::ERROR, "new"));
        let r = report(
            "pyright",
            (a, &published),
            &now,
            &before,
            root,
            DiagnosticsMode::Errors,
        );
        assert_eq!(
            text(&r).unwrap(),
            "Diagnostics from pyright after this change:\nERROR a.py:1:3 bad\n\
             Errors this change introduced in other files:\nERROR b.py:8:3 new"
        );
        let all = report(
            "p",
            (a, &published),
            &now,
            &before,
            root,
            DiagnosticsMode::All,
        );
        assert_eq!(all.file.len(), 2);
    }

    #[test]
    fn front_ends_read_the_report_from_typed_details() {
        use crate::kernel::tool::details::ToolDetails;
        let v = serde_json::json!({"path": "/w/a.py", "bytes": 6, "created": true, "lsp": {
            "server": "pyright", "file": [{"path": "a.py", "line": 2, "column": 12,
            "severity": "error", "message": "bad"}], "other": [], "timedOut": false}});
        let Some(ToolDetails::Write(w)) = ToolDetails::read("write", &v) else {
            panic!("not write details")
        };
        let report = w.lsp.unwrap();
        assert_eq!(
            (report.server.as_str(), report.file[0].line),
            ("pyright", 2)
        );
    }

    #[test]
    fn the_text_is_bounded() {
        let d = FileDiagnostic {
            path: "a.py".into(),
            line: 1,
            column: 1,
            severity: "error".into(),
            message: "x".repeat(100),
            source: None,
            code: None,
        };
        let r = LspReport {
            server: "s".into(),
            file: vec![d; 60],
            ..Default::default()
        };
        let t = text(&r).unwrap();
        assert!(t.len() <= MAX_TEXT, "{}", t.len());
        assert!(t.ends_with("more)"), "{t}");
    }
}
