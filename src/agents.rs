//! Agent definitions (`DESIGN.md` §17): the built-ins `general` and `explore`, then the user's
//! (`~/.claude/agents/*.md` or `$CLAUDE_CONFIG_DIR/agents/*.md`, then `$KEEL_HOME/agents/*.md`),
//! then the project's (`<project>/.claude/agents/*.md`, then `<project>/.keel/agents/*.md`, only
//! in a trusted project), each a Markdown file with Claude's frontmatter (`name`,
//! `description`, `tools`, `model`, `isolation`; other keys are read by Claude and ignored
//! here) and its body as the system prompt. A later definition of a name replaces an earlier
//! one: project over user over built-in, and at one scope keel's directory over Claude's (with
//! one warning naming both files). Reads files; never writes.

use std::path::{Path, PathBuf};

use crate::kernel::subagent::{AgentDef, Origin};
use crate::skills::{frontmatter_value, split_frontmatter};

/// Claude's tool names and the keel tools each stands for.
const CLAUDE_TOOLS: &[(&str, &[&str])] = &[
    ("Read", &["read"]),
    ("Write", &["write"]),
    ("Edit", &["edit"]),
    ("MultiEdit", &["edit"]),
    ("Bash", &["bash"]),
    ("Grep", &["grep"]),
    ("Glob", &["find"]),
    ("LS", &["ls"]),
    ("TodoWrite", &["todo_write"]),
    ("Task", &["task"]),
    ("Agent", &["task"]),
];

/// One directory of definitions and what a file in it is.
struct Dir {
    path: PathBuf,
    project: bool,
    claude: bool,
}

/// The definitions a session in `cwd` may use, and warnings about files left out.
/// `claude_home`: Claude Code's user directory while Claude's files are read (`None`: neither
/// it nor the project's `.claude/agents` is read; see `setup::Settings::claude_home`).
/// `project_trusted`: the project's own definitions load.
pub fn load(
    keel_home: &Path,
    claude_home: Option<&Path>,
    cwd: &Path,
    project_trusted: bool,
) -> (Vec<AgentDef>, Vec<String>) {
    let mut agents = AgentDef::built_ins();
    let mut warnings = Vec::new();
    let root = crate::settings::project_root(cwd);
    let mut dirs = Vec::new();
    if let Some(home) = claude_home {
        dirs.push(Dir {
            path: home.join("agents"),
            project: false,
            claude: true,
        });
    }
    for (path, project, claude) in [
        (keel_home.join("agents"), false, false),
        (root.join(".claude").join("agents"), true, true),
        (root.join(".keel").join("agents"), true, false),
    ] {
        if claude && claude_home.is_none() {
            continue;
        }
        dirs.push(Dir {
            path,
            project,
            claude,
        });
    }
    let claude_dirs: Vec<PathBuf> = dirs
        .iter()
        .filter(|d| d.claude)
        .map(|d| d.path.clone())
        .collect();
    for dir in dirs {
        let files = md_files(&dir.path);
        if dir.project && !project_trusted {
            if !files.is_empty() {
                warnings.push(format!(
                    "{}: not trusted, so its agent definitions are not loaded; pass --trust-project to trust the project for this run, or trust it in keel's TUI",
                    dir.path.display()
                ));
            }
            continue;
        }
        for file in files {
            let origin = match dir.project {
                true => Origin::Project(file.clone()),
                false => Origin::User(file.clone()),
            };
            match parse(&file, origin) {
                Ok((def, mut notes)) => {
                    warnings.append(&mut notes);
                    if let Some(old) = agents.iter().find(|a| a.name == def.name) {
                        let old_dir = old.origin.path().and_then(Path::parent);
                        let claudes = old_dir.is_some_and(|d| claude_dirs.iter().any(|c| c == d));
                        if claudes && !dir.claude && old.origin.word() == def.origin.word() {
                            warnings.push(format!(
                                "agent `{}`: {} is used; Claude's {} of the same name is not",
                                def.name,
                                file.display(),
                                old.origin
                                    .path()
                                    .map_or(String::new(), |p| p.display().to_string())
                            ));
                        }
                    }
                    agents.retain(|a| a.name != def.name);
                    agents.push(def);
                }
                Err(why) => warnings.push(format!(
                    "{}: agent definition skipped: {why}",
                    file.display()
                )),
            }
        }
    }
    (agents, warnings)
}

/// The `*.md` files of `dir`, by name.
fn md_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = read
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md") && p.is_file())
        .collect();
    files.sort();
    files
}

/// One definition file, with warnings about what in it is not used.
fn parse(file: &Path, origin: Origin) -> Result<(AgentDef, Vec<String>), String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let (front, body) = split_frontmatter(&text).ok_or("it has no `---` frontmatter")?;
    let field = |k: &str| frontmatter_value(front, k).filter(|v| !v.trim().is_empty());
    let name = field("name").ok_or("`name` is missing")?;
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
    {
        return Err(format!(
            "`name` {name:?} must be lowercase letters, digits and hyphens"
        ));
    }
    let description = field("description").ok_or("`description` is missing")?;
    let mut warnings = Vec::new();
    let tools = list_value(front, "tools").map(|list| {
        let mut out: Vec<String> = Vec::new();
        for t in list.iter().map(|t| t.trim()).filter(|t| !t.is_empty()) {
            let keel: Vec<String> = match CLAUDE_TOOLS.iter().find(|(c, _)| *c == t) {
                Some((_, ours)) => ours.iter().map(|s| s.to_string()).collect(),
                None if crate::kernel::tool::spec(t).is_some() || t == "task" => {
                    vec![t.to_string()]
                }
                None if t.starts_with("mcp__") => {
                    warnings.push(format!(
                        "{}: MCP tool `{t}`: a subagent with a `tools` list gets no MCP tools yet; left out",
                        file.display()
                    ));
                    Vec::new()
                }
                None => {
                    warnings.push(format!(
                        "{}: tool `{t}` is not a keel tool; left out",
                        file.display()
                    ));
                    Vec::new()
                }
            };
            for k in keel {
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
        out
    });
    // Claude's aliases name Anthropic's current models; `inherit` is the parent's model.
    let model = field("model").and_then(|m| match m.trim() {
        "inherit" => None,
        word => Some(match crate::kernel::provider::catalog::claude_alias(word) {
            Some(id) => format!("anthropic/{id}"),
            None => word.to_string(),
        }),
    });
    Ok((
        AgentDef {
            name,
            description,
            tools,
            model,
            system_prompt: body.trim().to_string(),
            origin,
            isolation: field("isolation").map(|i| i.trim().to_string()),
        },
        warnings,
    ))
}

/// A list in frontmatter: `key: A, B`, `key: [A, B]` or a block of `- A` lines after `key:`.
/// `None` when the key is absent or empty.
fn list_value(front: &str, key: &str) -> Option<Vec<String>> {
    let value = frontmatter_value(front, key)?;
    let value = value.trim();
    let items: Vec<String> = if value.is_empty() {
        let lines: Vec<&str> = front.lines().collect();
        let at = lines.iter().position(|l| {
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        })?;
        lines[at + 1..]
            .iter()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with('-'))
            .map(|l| unquote(l[1..].trim()).to_string())
            .collect()
    } else {
        let inner = value
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(value);
        inner
            .split(',')
            .map(|t| unquote(t.trim()).to_string())
            .collect()
    };
    let items: Vec<String> = items.into_iter().filter(|t| !t.is_empty()).collect();
    (!items.is_empty()).then_some(items)
}

/// One pair of surrounding quotes removed.
fn unquote(v: &str) -> &str {
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(name), text).unwrap();
    }

    #[test]
    fn user_and_trusted_project_definitions_load_with_claudes_tool_names() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let cwd = t.path().join("proj");
        std::fs::create_dir_all(cwd.join(".git")).unwrap();
        write(
            &home.join("agents"),
            "rev.md",
            "---\nname: reviewer\ndescription: Reviews diffs.\ntools: Read, Grep, Glob, WebFetch\nmodel: openai/gpt-4.1\n---\nYou review.\n",
        );
        write(
            &cwd.join(".keel/agents"),
            "explore.md",
            "---\nname: explore\ndescription: Project explorer.\ntools: read, ls\n---\nLook.\n",
        );
        write(&cwd.join(".keel/agents"), "bad.md", "no frontmatter\n");
        let (agents, warnings) = load(&home, None, &cwd, false);
        let names: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["general", "explore", "reviewer"]);
        let rev = &agents[2];
        assert_eq!(
            rev.tools.as_deref(),
            Some(&["read".to_string(), "grep".into(), "find".into()][..])
        );
        assert_eq!(rev.model.as_deref(), Some("openai/gpt-4.1"));
        assert_eq!(rev.system_prompt, "You review.");
        assert!(warnings
            .iter()
            .any(|w| w.contains("`WebFetch` is not a keel tool")));
        assert!(
            warnings.iter().any(|w| w.contains("not trusted")),
            "{warnings:?}"
        );
        let (agents, warnings) = load(&home, None, &cwd, true);
        let explore = agents.iter().find(|a| a.name == "explore").unwrap();
        assert_eq!(explore.description, "Project explorer.");
        assert!(matches!(explore.origin, Origin::Project(_)));
        assert!(warnings
            .iter()
            .any(|w| w.contains("bad.md: agent definition skipped: it has no `---` frontmatter")));
    }

    #[test]
    fn claudes_directories_load_below_keels_with_claudes_frontmatter() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("keel");
        let claude = t.path().join("u/.claude");
        let cwd = t.path().join("proj");
        std::fs::create_dir_all(cwd.join(".git")).unwrap();
        std::fs::create_dir_all(cwd.join("sub")).unwrap();
        write(
            &claude.join("agents"),
            "rev.md",
            "---\nname: reviewer\ndescription: Claude's reviewer.\ntools: Read, Grep, mcp__gh__issue\nmodel: sonnet\nisolation: worktree\ncolor: red\n---\nReview.\n",
        );
        write(
            &claude.join("agents"),
            "mine.md",
            "---\nname: mine\ndescription: Mine.\ntools:\n  - Read\n  - Bash\nmodel: inherit\n---\nMine.\n",
        );
        write(
            &home.join("agents"),
            "mine.md",
            "---\nname: mine\ndescription: keel's own.\n---\nOwn.\n",
        );
        write(
            &cwd.join(".claude/agents"),
            "x.md",
            "---\nname: xer\ndescription: Project X.\ntools: [Edit, Write]\nmodel: haiku\n---\nX.\n",
        );
        let (agents, warnings) = load(&home, Some(&claude), &cwd.join("sub"), true);
        let by = |n: &str| agents.iter().find(|a| a.name == n).unwrap();
        let rev = by("reviewer");
        assert_eq!(
            rev.tools.as_deref(),
            Some(&["read".to_string(), "grep".into()][..])
        );
        assert_eq!(rev.model.as_deref(), Some("anthropic/claude-sonnet-5-5"));
        assert_eq!(rev.isolation.as_deref(), Some("worktree"));
        assert_eq!(rev.origin, Origin::User(claude.join("agents/rev.md")));
        // keel's own directory wins at one scope, with one line naming both files.
        let mine = by("mine");
        assert_eq!(mine.description, "keel's own.");
        let shadow: Vec<_> = warnings.iter().filter(|w| w.contains("`mine`")).collect();
        assert_eq!(shadow.len(), 1, "{warnings:?}");
        assert!(
            shadow[0].contains("mine.md is used; Claude's"),
            "{}",
            shadow[0]
        );
        let x = by("xer");
        assert_eq!(
            x.tools.as_deref(),
            Some(&["edit".to_string(), "write".into()][..])
        );
        assert_eq!(x.model.as_deref(), Some("anthropic/claude-haiku-4-5"));
        assert_eq!(x.origin.label(), "project (.claude/agents/x.md)");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("MCP tool `mcp__gh__issue`")),
            "{warnings:?}"
        );
        // Untrusted: the project's Claude agents are left out with a warning.
        let (agents, warnings) = load(&home, Some(&claude), &cwd, false);
        assert!(agents.iter().all(|a| a.name != "xer"));
        assert!(warnings
            .iter()
            .any(|w| w.contains(".claude/agents: not trusted")));
        // A block list of Claude names.
        let (agents, _) = load(t.path().join("none").as_path(), Some(&claude), &cwd, false);
        let mine = agents.iter().find(|a| a.name == "mine").unwrap();
        assert_eq!(
            mine.tools.as_deref(),
            Some(&["read".to_string(), "bash".into()][..])
        );
        assert_eq!(mine.model, None);
    }
}
