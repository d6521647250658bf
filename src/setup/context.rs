//! Project context files (`AGENTS.md` and friends) and the system prompt built around them.
//! Lookup follows pi 1.6: one file per directory (the first of [`NAMES`] that is a regular
//! file), the global one in `$KEEL_HOME` first, then every directory from `/` down to the cwd;
//! a BOM is stripped and a file reached twice (same real path) is read once. keel adds byte
//! budgets: a file over [`FILE_BUDGET`] or past [`TOTAL_BUDGET`] is cut at a character
//! boundary with a visible marker and a warning, never silently.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};

use crate::kernel::tool;

/// The names a directory's context file may have, in the order they are tried.
pub const NAMES: &[&str] = &[
    "AGENTS.override.md",
    "AGENTS.md",
    "AGENTS.MD",
    "CLAUDE.md",
    "CLAUDE.MD",
];

/// Claude Code's other place for a project's memory, tried after [`NAMES`] while Claude's files
/// are read (not in the directory holding the Claude home: that one is the user's memory).
const CLAUDE_PROJECT: &str = ".claude/CLAUDE.md";

/// The most of one context file the model sees.
pub const FILE_BUDGET: usize = 32 * 1024;
/// The most of all context files together the model sees. Files nearer the cwd are served
/// first: a deep chain loses its outermost files' text before the project's own.
pub const TOTAL_BUDGET: usize = 64 * 1024;

/// One loaded context file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextFile {
    pub path: PathBuf,
    /// The file's size in bytes (after the BOM).
    pub bytes: usize,
    /// The text the model sees (cut to the budget, with the marker).
    pub text: String,
    /// Bytes left out by the budgets.
    pub cut: usize,
}

/// The context files of a directory, and what went wrong finding them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    pub files: Vec<ContextFile>,
    pub warnings: Vec<String>,
}

/// Finds and reads the context files for `cwd`, the global one first: `keel_home`'s, else
/// Claude Code's user memory `CLAUDE.md` in `claude_home` (`~/.claude`; `None` when Claude's
/// files are off).
pub fn load(keel_home: &Path, claude_home: Option<&Path>, cwd: &Path) -> Context {
    let file_in = |dir: &Path| {
        let claude = claude_home
            .filter(|c| dir.join(".claude") != *c)
            .map(|_| CLAUDE_PROJECT);
        NAMES
            .iter()
            .copied()
            .chain(claude)
            .map(|n| dir.join(n))
            .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file()))
    };
    let global = match claude_home {
        Some(claude) if file_in(keel_home).is_none() => claude.to_path_buf(),
        _ => keel_home.to_path_buf(),
    };
    let mut dirs = vec![global];
    let mut chain: Vec<PathBuf> = cwd.ancestors().map(Path::to_path_buf).collect();
    chain.reverse();
    dirs.extend(chain);
    let mut seen = std::collections::HashSet::new();
    let mut ctx = Context::default();
    let mut found: Vec<(PathBuf, String)> = Vec::new();
    for dir in dirs {
        let Some(path) = file_in(&dir) else {
            continue;
        };
        let real = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
        if !seen.insert(real) {
            continue;
        }
        match std::fs::read(&path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let text = text.strip_prefix('\u{feff}').unwrap_or(&text).to_string();
                found.push((path, text));
            }
            Err(e) => ctx
                .warnings
                .push(format!("cannot read context file {}: {e}", path.display())),
        }
    }
    // Budgets, nearest file first.
    let mut left = TOTAL_BUDGET;
    let mut files: Vec<ContextFile> = Vec::new();
    for (path, text) in found.into_iter().rev() {
        let budget = FILE_BUDGET.min(left);
        let bytes = text.len();
        let (kept, cut) = cut_to(&text, budget);
        left -= kept.len();
        if cut > 0 {
            let why = if budget < FILE_BUDGET {
                format!(
                    "the {} KiB budget of all context files",
                    TOTAL_BUDGET / 1024
                )
            } else {
                format!("the {} KiB budget of one context file", FILE_BUDGET / 1024)
            };
            ctx.warnings.push(format!(
                "context file {} is {bytes} bytes; {cut} bytes past {why} were left out",
                path.display()
            ));
        }
        let mut shown = kept.to_string();
        if cut > 0 {
            shown.push_str(&format!("\n[… truncated {cut} bytes …]"));
        }
        files.push(ContextFile {
            path,
            bytes,
            text: shown,
            cut,
        });
    }
    files.reverse();
    ctx.files = files;
    ctx
}

/// `text` cut to at most `budget` bytes at a character boundary, and how many bytes were cut.
fn cut_to(text: &str, budget: usize) -> (&str, usize) {
    if text.len() <= budget {
        return (text, 0);
    }
    let mut end = budget;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], text.len() - end)
}

/// What the system prompt is made of.
pub struct PromptParts<'a> {
    /// `--system-prompt`, replacing the base prompt; `None` for keel's own.
    pub base: Option<&'a str>,
    pub tools: &'a [String],
    /// `--append-system-prompt` texts.
    pub append: &'a [String],
    pub context: &'a Context,
    /// The `<skills>` catalog section, if any (see [`crate::skills::catalog`]).
    pub skills: Option<&'a str>,
    pub cwd: &'a Path,
    /// `YYYY-MM-DD`.
    pub date: &'a str,
}

/// The system prompt, in sections that change least first (the date last, so that a new day
/// keeps the cached prefix): base prompt, tools, additions, project context, environment,
/// date. The same inputs give the same bytes, so the prompt is stable across a session's turns.
pub fn system_prompt(p: &PromptParts<'_>) -> String {
    let mut sections: Vec<String> = Vec::new();
    sections.push(match p.base {
        Some(base) => base.to_string(),
        None => base_prompt(p.tools),
    });
    let tools: Vec<String> = p
        .tools
        .iter()
        .filter_map(|t| tool::spec(t))
        .map(|s| format!("- {}: {}", s.name, first_sentence(&s.description)))
        .collect();
    if !tools.is_empty() {
        sections.push(format!("<tools>\n{}\n</tools>", tools.join("\n")));
    }
    sections.extend(p.append.iter().cloned());
    if !p.context.files.is_empty() {
        let mut s = String::from(
            "<project_context>\nProject-specific instructions and guidelines (the file nearest \
             the working directory takes precedence; the user's requests override them all):\n",
        );
        for f in &p.context.files {
            s.push_str(&format!(
                "\n<project_instructions path=\"{}\">\n{}\n</project_instructions>\n",
                f.path.display(),
                f.text.trim_end()
            ));
        }
        s.push_str("</project_context>");
        sections.push(s);
    }
    if let Some(catalog) = p.skills {
        sections.push(catalog.to_string());
    }
    sections.push(format!(
        "<environment>\nWorking directory: {}\nPlatform: {} ({})\nShell used by the bash tool: \
         bash (sh where bash is missing)\n</environment>",
        p.cwd.display(),
        std::env::consts::OS,
        std::env::consts::ARCH,
    ));
    sections.push(format!("<date>\nToday's date: {}\n</date>", p.date));
    sections.join("\n\n")
}

/// The first sentence of a tool's description, for the prompt's list: up to the first ". "
/// outside parentheses that does not end an abbreviation (`e.g.`, `i.e.`, `etc.`, `vs.`).
fn first_sentence(text: &str) -> &str {
    let line = text.lines().next().unwrap_or("");
    let mut depth = 0i32;
    for (i, c) in line.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            '.' if depth <= 0 && line[i + 1..].starts_with(' ') => {
                let word = line[..i].rsplit(' ').next().unwrap_or("");
                let word = word.trim_start_matches('(');
                let abbreviation = ["e.g", "i.e", "etc", "vs"]
                    .iter()
                    .any(|a| word.eq_ignore_ascii_case(a));
                if !abbreviation {
                    return &line[..=i];
                }
            }
            _ => {}
        }
    }
    line
}

/// keel's base prompt: who it is and how its tools are meant to be used (only the tools it has).
fn base_prompt(tools: &[String]) -> String {
    let has = |t: &str| tools.iter().any(|x| x == t);
    let mut rules: Vec<&str> = Vec::new();
    if has("read") || has("grep") || has("find") || has("ls") {
        rules.push(
            "Look before you act: read the files you will change before changing them, and \
             search the project instead of guessing at code you have not seen.",
        );
    }
    if has("edit") {
        rules.push(
            "Edit exactly: `edit` replaces text that must match the file byte for byte and \
             occur once; read the region first and keep each edit small.",
        );
    }
    if has("write") {
        rules.push("Use `write` for new files and whole rewrites, not for small changes.");
    }
    if has("bash") {
        rules.push(
            "Prove the change: run the project's tests, build or linter (the README, a \
             Makefile, package.json, Cargo.toml or the project's instructions say how) and \
             report failures you could not fix.",
        );
    }
    rules.push("Stay in scope: change what the task needs and leave unrelated code alone.");
    rules.push(
        "Stop and ask when the request is ambiguous or a step is destructive or hard to undo \
         (deleting data, rewriting history, touching files outside the project).",
    );
    rules.push(
        "Be concise: say what you changed and how you checked it, with file paths as they are.",
    );
    let mut s = String::from(
        "You are keel, a coding agent working in a software project on the user's machine. \
         You carry out the user's task with the tools you have and finish it.\n\nHow to work:",
    );
    for r in rules {
        s.push_str("\n- ");
        s.push_str(r);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &[u8]) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_first_sentence_ends_at_a_full_stop_not_at_an_abbreviation() {
        let find = crate::kernel::tool::spec("find").unwrap();
        assert!(
            first_sentence(&find.description).ends_with("relative to the search path."),
            "{}",
            first_sentence(&find.description)
        );
        assert_eq!(
            first_sentence("Use a tool, e.g. sed. Then more."),
            "Use a tool, e.g. sed."
        );
        assert_eq!(first_sentence("One (a. b) two. Three."), "One (a. b) two.");
        assert_eq!(first_sentence("No stop at all"), "No stop at all");
    }

    #[test]
    fn one_file_per_directory_global_first_then_root_down_to_cwd() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let root = dir.path().join("repo");
        let cwd = root.join("pkg").join("sub");
        std::fs::create_dir_all(&cwd).unwrap();
        write(&home.join("AGENTS.md"), b"global rules");
        write(&root.join("AGENTS.md"), b"\xEF\xBB\xBFrepo rules");
        write(&root.join("CLAUDE.md"), b"not read: AGENTS.md wins here");
        write(
            &root.join("pkg").join("AGENTS.override.md"),
            b"pkg override",
        );
        write(
            &root.join("pkg").join("AGENTS.md"),
            b"not read: the override wins",
        );
        write(&cwd.join("CLAUDE.md"), b"sub rules");
        let ctx = load(&home, None, &cwd);
        let got: Vec<(String, String)> = ctx
            .files
            .iter()
            .map(|f| {
                let p = f
                    .path
                    .strip_prefix(dir.path())
                    .unwrap()
                    .display()
                    .to_string();
                (p, f.text.clone())
            })
            .collect();
        assert_eq!(
            got,
            [
                ("home/AGENTS.md".into(), "global rules".into()),
                ("repo/AGENTS.md".into(), "repo rules".into()),
                ("repo/pkg/AGENTS.override.md".into(), "pkg override".into()),
                ("repo/pkg/sub/CLAUDE.md".into(), "sub rules".into()),
            ]
        );
        assert!(ctx.warnings.is_empty());
    }

    #[test]
    fn claudes_memory_files_are_context_files_below_keels_own() {
        let dir = tempfile::tempdir().unwrap();
        let (home, claude) = (dir.path().join("home"), dir.path().join(".claude"));
        let cwd = dir.path().join("repo");
        std::fs::create_dir_all(&home).unwrap();
        write(&claude.join("CLAUDE.md"), b"claude user memory");
        write(&cwd.join(".claude").join("CLAUDE.md"), b"project memory");
        let texts =
            |ctx: Context| -> Vec<String> { ctx.files.into_iter().map(|f| f.text).collect() };
        let got = texts(load(&home, Some(&claude), &cwd));
        assert_eq!(got, ["claude user memory", "project memory"]);
        // Claude's files off: neither (a `CLAUDE.md` beside the project's files still counts).
        assert!(texts(load(&home, None, &cwd)).is_empty());
        // keel's own global file wins over Claude's.
        write(&home.join("AGENTS.md"), b"keel global");
        let got = texts(load(&home, Some(&claude), &cwd));
        assert_eq!(got, ["keel global", "project memory"]);
    }

    #[test]
    fn a_file_reached_twice_is_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("work");
        std::fs::create_dir_all(&cwd).unwrap();
        write(&cwd.join("AGENTS.md"), b"once");
        // KEEL_HOME is the cwd itself.
        let ctx = load(&cwd, None, &cwd);
        assert_eq!(ctx.files.len(), 1);
    }

    #[test]
    fn budgets_cut_at_a_character_boundary_with_a_marker_and_a_warning() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let cwd = dir.path().join("work");
        std::fs::create_dir_all(&cwd).unwrap();
        // 3-byte characters: 32 KiB is not a multiple of 3, so the cut must step back.
        let big = "é€".repeat(8000); // 40,000 bytes
        write(&cwd.join("AGENTS.md"), big.as_bytes());
        let ctx = load(&home, None, &cwd);
        let f = &ctx.files[0];
        assert_eq!(f.bytes, big.len());
        let kept = f.text.split("\n[… truncated").next().unwrap();
        assert!(kept.len() <= FILE_BUDGET && kept.len() > FILE_BUDGET - 3);
        assert_eq!(f.cut, big.len() - kept.len());
        assert!(f
            .text
            .ends_with(&format!("[… truncated {} bytes …]", f.cut)));
        assert_eq!(ctx.warnings.len(), 1, "{:?}", ctx.warnings);
        assert!(ctx.warnings[0].contains("32 KiB budget of one context file"));
    }

    #[test]
    fn the_total_budget_spares_the_nearest_files() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().join("home");
        let cwd = dir.path().join("a").join("b");
        std::fs::create_dir_all(&cwd).unwrap();
        let x = "x".repeat(30 * 1024);
        write(&home.join("AGENTS.md"), x.as_bytes());
        write(&dir.path().join("a").join("AGENTS.md"), x.as_bytes());
        write(&cwd.join("AGENTS.md"), x.as_bytes());
        let ctx = load(&home, None, &cwd);
        let cuts: Vec<usize> = ctx.files.iter().map(|f| f.cut).collect();
        // Nearest two whole (60 KiB), the global one gets the last 4 KiB.
        assert_eq!(cuts, [26 * 1024, 0, 0]);
        assert!(ctx.warnings[0].contains("64 KiB budget of all context files"));
    }

    #[test]
    fn the_prompt_names_each_file_and_keeps_the_date_last() {
        let ctx = Context {
            files: vec![ContextFile {
                path: "/p/AGENTS.md".into(),
                bytes: 5,
                text: "rules".into(),
                cut: 0,
            }],
            warnings: vec![],
        };
        let tools: Vec<String> = ["read", "edit"].iter().map(|s| s.to_string()).collect();
        let parts = PromptParts {
            base: None,
            tools: &tools,
            append: &["extra".to_string()],
            context: &ctx,
            skills: Some("<skills>\nS\n</skills>"),
            cwd: Path::new("/p"),
            date: "2026-12-01",
        };
        let p = system_prompt(&parts);
        assert!(p.starts_with("You are keel"));
        assert!(p.contains(
            "<project_instructions path=\"/p/AGENTS.md\">\nrules\n</project_instructions>"
        ));
        assert!(p.contains("- read: ") && !p.contains("- bash: "));
        assert!(p.contains("Edit exactly") && !p.contains("Prove the change"));
        assert!(p.ends_with("<date>\nToday's date: 2026-12-01\n</date>"));
        let order = [
            "You are keel",
            "<tools>",
            "extra",
            "<project_context>",
            "<environment>",
            "<date>",
        ];
        let at: Vec<usize> = order.iter().map(|s| p.find(s).unwrap()).collect();
        assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
        // Replacing the base keeps every other section.
        let own = system_prompt(&PromptParts {
            base: Some("Be a pirate."),
            ..parts
        });
        assert!(own.starts_with("Be a pirate.\n\n<tools>") && own.contains("<project_context>"));
    }
}
