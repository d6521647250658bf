//! Agent definitions (`DESIGN.md` §17): the built-ins `general` and `explore`, then
//! `$KEEL_HOME/agents/*.md`, then `<project>/.keel/agents/*.md` (only in a trusted project),
//! each a Markdown file with Claude's frontmatter (`name`, `description`, `tools`, `model`;
//! other keys are read by Claude and ignored here) and its body as the system prompt. A later
//! definition of a name replaces an earlier one (project over user over built-in). Reads
//! files; never writes.

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
];

/// The definitions a session in `cwd` may use, and warnings about files left out.
/// `project_trusted`: the project's own definitions load.
pub fn load(keel_home: &Path, cwd: &Path, project_trusted: bool) -> (Vec<AgentDef>, Vec<String>) {
    let mut agents = AgentDef::built_ins();
    let mut warnings = Vec::new();
    let project = crate::settings::project_root(cwd)
        .join(".keel")
        .join("agents");
    let dirs = [(keel_home.join("agents"), false), (project.clone(), true)];
    for (dir, in_project) in dirs {
        let files = md_files(&dir);
        if in_project && !project_trusted {
            if !files.is_empty() {
                warnings.push(format!(
                    "{}: not trusted, so its agent definitions are not loaded; pass --trust-project to trust the project for this run, or trust it in keel's TUI",
                    dir.display()
                ));
            }
            continue;
        }
        for file in files {
            let origin = match in_project {
                true => Origin::Project(file.clone()),
                false => Origin::User(file.clone()),
            };
            match parse(&file, origin) {
                Ok((def, mut notes)) => {
                    warnings.append(&mut notes);
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
    let tools = field("tools").map(|list| {
        let mut out: Vec<String> = Vec::new();
        for t in list.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let keel: Vec<String> = match CLAUDE_TOOLS.iter().find(|(c, _)| *c == t) {
                Some((_, ours)) => ours.iter().map(|s| s.to_string()).collect(),
                None if crate::kernel::tool::spec(t).is_some() => vec![t.to_string()],
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
    Ok((
        AgentDef {
            name,
            description,
            tools,
            model: field("model"),
            system_prompt: body.trim().to_string(),
            origin,
        },
        warnings,
    ))
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
        let (agents, warnings) = load(&home, &cwd, false);
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
        let (agents, warnings) = load(&home, &cwd, true);
        let explore = agents.iter().find(|a| a.name == "explore").unwrap();
        assert_eq!(explore.description, "Project explorer.");
        assert!(matches!(explore.origin, Origin::Project(_)));
        assert!(warnings
            .iter()
            .any(|w| w.contains("bad.md: agent definition skipped: it has no `---` frontmatter")));
    }
}
