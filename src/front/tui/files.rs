//! The `@` file menu of the composer: typing `@` and part of a path shows the project's files
//! that match (fuzzy, as fzf would rank them), and Tab or Enter puts `@path ` in its place.
//! The files are listed once, on the first `@`, with ripgrep's walker (`.gitignore`,
//! `.ignore` and hidden files are left out, as `rg --files` would) and at most [`MAX_FILES`]
//! of them; ranking is `nucleo-matcher`'s path scoring. What a submitted `@path` becomes is
//! `crate::mentions`' business, not this file's.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};

use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
use nucleo_matcher::{Config, Matcher, Utf32Str};

/// The most files listed for the menu (a huge tree is cut, and the menu says so).
pub const MAX_FILES: usize = 20_000;
/// Matches the menu lists (it shows a window of them and scrolls).
pub const MENU_MATCHES: usize = 100;

/// The files under a directory, listed on first use.
pub struct FileIndex {
    root: PathBuf,
    /// Paths relative to `root`, `/`-separated, shallow ones first; `None` until listed.
    paths: Option<Vec<String>>,
    /// The walk stopped at [`MAX_FILES`].
    pub truncated: bool,
    matcher: Matcher,
}

impl FileIndex {
    /// The files of `root`, listed when first asked for.
    pub fn new(root: &Path) -> FileIndex {
        FileIndex {
            root: root.to_path_buf(),
            paths: None,
            truncated: false,
            matcher: Matcher::new(Config::DEFAULT.match_paths()),
        }
    }

    /// An index of these paths (no walk).
    pub fn of(paths: Vec<String>) -> FileIndex {
        let mut index = FileIndex::new(Path::new(""));
        index.paths = Some(sorted(paths));
        index
    }

    fn paths(&mut self) -> &[String] {
        if self.paths.is_none() {
            let (paths, truncated) = walk(&self.root);
            self.truncated = truncated;
            self.paths = Some(sorted(paths));
        }
        self.paths.as_deref().unwrap_or_default()
    }

    /// The best `limit` paths for `query` (best first); with an empty query, the shallowest.
    pub fn matches(&mut self, query: &str, limit: usize) -> Vec<String> {
        if query.is_empty() {
            return self.paths().iter().take(limit).cloned().collect();
        }
        let pattern = Pattern::parse(query, CaseMatching::Smart, Normalization::Smart);
        let paths = self.paths.take().unwrap_or_else(|| {
            let (paths, truncated) = walk(&self.root);
            self.truncated = truncated;
            sorted(paths)
        });
        let mut buf = Vec::new();
        let mut found: Vec<(u32, usize)> = paths
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let score = pattern.score(Utf32Str::new(p, &mut buf), &mut self.matcher)?;
                Some((score, i))
            })
            .collect();
        // Equal scores keep the index's order (shallow first).
        found.sort_by_key(|&(score, i)| (std::cmp::Reverse(score), i));
        let best = found
            .into_iter()
            .take(limit)
            .map(|(_, i)| paths[i].clone())
            .collect();
        self.paths = Some(paths);
        best
    }
}

/// Shallow paths first, then by name.
fn sorted(mut paths: Vec<String>) -> Vec<String> {
    paths.sort_by(|a, b| {
        let depth = |p: &str| p.matches('/').count();
        depth(a).cmp(&depth(b)).then_with(|| a.cmp(b))
    });
    paths
}

/// The files under `root` (relative, `/`-separated) and whether the walk was cut.
fn walk(root: &Path) -> (Vec<String>, bool) {
    let mut out = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .hidden(true)
        .git_ignore(true)
        .require_git(false)
        .build();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        if out.len() == MAX_FILES {
            return (out, true);
        }
        if let Ok(rel) = entry.path().strip_prefix(root) {
            let rel: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(rel.join("/"));
        }
    }
    (out, false)
}

/// The menu open under the editor while an `@` word is typed.
#[derive(Debug, Clone, PartialEq)]
pub struct Menu {
    /// The `@` word it completes (without the `@`).
    pub query: String,
    pub matches: Vec<String>,
    /// Which match is highlighted and how far the window is scrolled.
    pub choice: super::picker::rows::Choice,
}

impl Menu {
    /// A menu of `matches` (best first) with the first one highlighted.
    pub fn new(query: &str, matches: Vec<String>) -> Menu {
        let mut choice = super::picker::rows::Choice::default();
        choice.set_matches((0..matches.len()).collect());
        Menu {
            query: query.to_string(),
            matches,
            choice,
        }
    }
}

/// The query of an `@` word (`@src/ma` → `src/ma`), or `None` for any other word (an escaped
/// `\@`, an email address, a word without `@` at its start).
pub fn mention_query(word: &str) -> Option<&str> {
    word.strip_prefix('@')
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn index() -> FileIndex {
        FileIndex::of(
            [
                "src/main.rs",
                "src/front/tui/mod.rs",
                "README.md",
                "src/mentions.rs",
                "Cargo.toml",
            ]
            .map(String::from)
            .to_vec(),
        )
    }

    #[test]
    fn an_empty_query_shows_the_shallowest_files_first() {
        assert_eq!(
            index().matches("", 3),
            ["Cargo.toml", "README.md", "src/main.rs"]
        );
    }

    #[test]
    fn a_fuzzy_query_ranks_the_closest_paths_first() {
        let got = index().matches("men", 5);
        assert_eq!(got.first().map(String::as_str), Some("src/mentions.rs"));
        assert!(index()
            .matches("tuimod", 5)
            .contains(&"src/front/tui/mod.rs".to_string()));
        assert!(index().matches("zzz", 5).is_empty());
    }

    #[test]
    fn the_walk_respects_gitignore_and_leaves_out_hidden_files() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::create_dir_all(root.join("target/debug")).unwrap();
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        std::fs::write(root.join("src/lib.rs"), "").unwrap();
        std::fs::write(root.join("target/debug/out"), "").unwrap();
        std::fs::write(root.join(".env"), "").unwrap();
        let mut index = FileIndex::new(root);
        assert_eq!(index.matches("", 10), ["src/lib.rs"]);
        assert!(!index.truncated);
    }

    #[test]
    fn only_words_starting_with_at_are_mentions() {
        assert_eq!(mention_query("@src/ma"), Some("src/ma"));
        assert_eq!(mention_query("@"), Some(""));
        assert_eq!(mention_query("me@host"), None);
        assert_eq!(mention_query("\\@x"), None);
    }
}
