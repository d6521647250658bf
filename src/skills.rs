//! Skills in the Agent Skills format: a directory with a `SKILL.md` whose frontmatter names
//! and describes it. Only the catalog (name, description, location) goes into the system
//! prompt; the model reads the body with `read` when a task calls for it (progressive
//! disclosure), and `/skill:NAME args` (pi's form) or `/NAME args` (Claude Code's, when no
//! prompt template has the name) sends the body explicitly.
//!
//! Where: the project's `.keel/skills/`, `.agents/skills/` and Claude Code's `.claude/skills/`
//! in the cwd and each parent up to the git root (or `/` outside a repository), then
//! `$KEEL_HOME/skills/`, `~/.agents/skills/` and Claude Code's `~/.claude/skills/`
//! (`$CLAUDE_CONFIG_DIR/skills/`); each holds `NAME/SKILL.md`. The first skill of a name wins (the project
//! before the user), with a warning for the others. Validation is lenient: a bad name is a
//! warning, a missing description skips the skill.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::path::{Path, PathBuf};

/// Longest `name`, in characters (the spec's limit).
pub const NAME_CHARS: usize = 64;
/// Longest `description`, in characters (the spec's limit; longer ones are cut).
pub const DESCRIPTION_CHARS: usize = 1024;
/// The most bytes the catalog may take in the system prompt; skills past it are left out.
pub const CATALOG_BUDGET: usize = 16 * 1024;
/// Skill directories looked at per root, at most.
const MAX_ENTRIES: usize = 2000;

/// One skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The `SKILL.md` file.
    pub path: PathBuf,
    /// `project` or `user`.
    pub scope: &'static str,
    /// `disable-model-invocation: true` keeps it out of the catalog (it stays a command).
    pub model_invocable: bool,
    /// Found in one of Claude Code's directories (`.claude/skills`, `~/.claude/skills`).
    pub claude: bool,
}

/// A directory of skills: where, `project` or `user`, and whether it is Claude Code's.
pub type Root = (PathBuf, &'static str, bool);

impl Skill {
    /// The directory relative references in the body resolve against.
    pub fn base_dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("/"))
    }
}

/// The skill roots for `cwd`, in precedence order, with their scope (`claude_home`: Claude
/// Code's user directory while Claude's files are read; `None`: no `.claude/skills` at all).
pub fn roots(
    keel_home: &Path,
    home: Option<&Path>,
    claude_home: Option<&Path>,
    cwd: &Path,
) -> Vec<Root> {
    let mut out = Vec::new();
    for dir in cwd.ancestors() {
        out.push((dir.join(".keel").join("skills"), "project", false));
        out.push((dir.join(".agents").join("skills"), "project", false));
        if claude_home.is_some() {
            out.push((dir.join(".claude").join("skills"), "project", true));
        }
        if dir.join(".git").exists() {
            break;
        }
    }
    out.push((keel_home.join("skills"), "user", false));
    if let Some(h) = home {
        out.push((h.join(".agents").join("skills"), "user", false));
    }
    if let Some(c) = claude_home {
        out.push((c.join("skills"), "user", true));
    }
    out
}

/// `roots` without the project's own when the project is not trusted (its skills are the
/// repository's instructions to the model, as its agents are: issue 43, point 19), and a
/// warning naming each project root left out that holds any.
pub fn trusted_roots(roots: Vec<Root>, project_trusted: bool) -> (Vec<Root>, Vec<String>) {
    if project_trusted {
        return (roots, Vec::new());
    }
    let mut warnings = Vec::new();
    let kept = roots
        .into_iter()
        .filter(|(dir, scope, _)| {
            if *scope != "project" {
                return true;
            }
            let holds = std::fs::read_dir(dir).is_ok_and(|mut e| e.next().is_some());
            if holds {
                warnings.push(format!(
                    "{}: not trusted, so its skills are not loaded; pass --trust-project to trust \
                     the project for this run, or trust it in keel's TUI",
                    dir.display()
                ));
            }
            false
        })
        .collect();
    (kept, warnings)
}

/// Loads every skill under `roots`; problems come back as warnings.
pub fn load(roots: &[Root]) -> (Vec<Skill>, Vec<String>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut warnings = Vec::new();
    let mut seen_files = std::collections::HashSet::new();
    for (root, scope, claude) in roots {
        let Ok(entries) = std::fs::read_dir(root) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                !name.starts_with('.') && name != "node_modules"
            })
            .take(MAX_ENTRIES)
            .collect();
        dirs.sort();
        for dir in dirs {
            let file = dir.join("SKILL.md");
            if !file.is_file() {
                continue;
            }
            let real = std::fs::canonicalize(&file).unwrap_or_else(|_| file.clone());
            if !seen_files.insert(real) {
                continue;
            }
            match parse(&file, scope, *claude) {
                Ok((skill, mut notes)) => {
                    warnings.append(&mut notes);
                    if let Some(first) = skills.iter().find(|s| s.name == skill.name) {
                        warnings.push(format!(
                            "skill `{}` at {} is shadowed by {}",
                            skill.name,
                            file.display(),
                            first.path.display()
                        ));
                        continue;
                    }
                    skills.push(skill);
                }
                Err(why) => warnings.push(format!("skill {} skipped: {why}", file.display())),
            }
        }
    }
    (skills, warnings)
}

/// Reads one `SKILL.md`: the skill and the warnings about it, or why it cannot be used.
fn parse(file: &Path, scope: &'static str, claude: bool) -> Result<(Skill, Vec<String>), String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let (front, _) = split_frontmatter(&text).ok_or("it has no `---` frontmatter")?;
    let field = |k: &str| frontmatter_value(front, k);
    let dir_name = file
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_string();
    let mut notes = Vec::new();
    let name = match field("name") {
        Some(n) if !n.is_empty() => n,
        _ => dir_name.clone(),
    };
    if !valid_name(&name) {
        notes.push(format!(
            "skill `{name}` ({}): a name is 1-{NAME_CHARS} characters of a-z, 0-9 and single '-'",
            file.display()
        ));
    }
    if name != dir_name {
        notes.push(format!(
            "skill `{name}` ({}): the name differs from its directory `{dir_name}`",
            file.display()
        ));
    }
    let mut description = field("description")
        .filter(|d| !d.is_empty())
        .ok_or("it has no `description`")?;
    if description.chars().count() > DESCRIPTION_CHARS {
        notes.push(format!(
            "skill `{name}`: the description is over {DESCRIPTION_CHARS} characters and was cut"
        ));
        description = description.chars().take(DESCRIPTION_CHARS).collect();
    }
    let model_invocable = field("disable-model-invocation").as_deref() != Some("true");
    let skill = Skill {
        name,
        description,
        path: std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()),
        scope,
        model_invocable,
        claude,
    };
    Ok((skill, notes))
}

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.chars().count() <= NAME_CHARS
        && n.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !n.starts_with('-')
        && !n.ends_with('-')
        && !n.contains("--")
}

/// The frontmatter (between the opening and closing `---` lines) and the body after it.
pub(crate) fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    None
}

/// A scalar frontmatter value, read leniently: `key: value` with optional quotes, or a block
/// (`key: >` / `key: |`) of the indented lines after it, joined with spaces or newlines.
pub(crate) fn frontmatter_value(front: &str, key: &str) -> Option<String> {
    let lines: Vec<&str> = front.lines().collect();
    let i = lines.iter().position(|l| {
        l.strip_prefix(key)
            .is_some_and(|r| r.trim_start().starts_with(':'))
    })?;
    let value = lines[i][key.len()..].trim_start()[1..].trim();
    if value.starts_with('>') || value.starts_with('|') {
        let block: Vec<&str> = lines[i + 1..]
            .iter()
            .take_while(|l| l.starts_with(' ') || l.starts_with('\t') || l.trim().is_empty())
            .map(|l| l.trim())
            .collect();
        let sep = if value.starts_with('>') { " " } else { "\n" };
        return Some(block.join(sep).trim().to_string());
    }
    let unquoted = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
        .unwrap_or(value);
    Some(unquoted.to_string())
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The system prompt's `<skills>` section, or `None` without a `read` tool or without a
/// skill the model may use. Skills past [`CATALOG_BUDGET`] are left out, with a warning.
pub fn catalog(skills: &[Skill], read_tool: bool, warnings: &mut Vec<String>) -> Option<String> {
    if !read_tool {
        return None;
    }
    let mut entries = String::new();
    let mut left_out = Vec::new();
    for s in skills.iter().filter(|s| s.model_invocable) {
        let entry = format!(
            "<skill><name>{}</name><description>{}</description><location>{}</location></skill>\n",
            xml_escape(&s.name),
            xml_escape(&s.description),
            xml_escape(&s.path.display().to_string())
        );
        if entries.len() + entry.len() > CATALOG_BUDGET {
            left_out.push(s.name.clone());
            continue;
        }
        entries.push_str(&entry);
    }
    if !left_out.is_empty() {
        warnings.push(format!(
            "the skill catalog is over its {} KiB budget; left out of the prompt (still usable as /skill:NAME): {}",
            CATALOG_BUDGET / 1024,
            left_out.join(", ")
        ));
    }
    if entries.is_empty() {
        return None;
    }
    Some(format!(
        "<skills>\nThese skills hold instructions for particular tasks. When a task matches a \
         skill's description, read its SKILL.md with the read tool first and follow it. Resolve \
         relative paths in a skill against its directory (the parent of SKILL.md) and use \
         absolute paths in tool calls.\n\n<available_skills>\n{entries}</available_skills>\n</skills>"
    ))
}

/// `/skill:NAME args` → the skill's body wrapped as pi sends it, then the arguments; `None`
/// for any other text (an unknown name passes through unchanged, as in pi).
pub fn expand(text: &str, skills: &[Skill]) -> Option<String> {
    expand_as(text.strip_prefix("/skill:")?, skills)
}

/// `/NAME args`, Claude Code's form of a skill command, expanded as [`expand`] does. The
/// caller looks for a prompt template of the name first: a template wins over a skill.
pub fn expand_named(text: &str, skills: &[Skill]) -> Option<String> {
    let rest = text.strip_prefix('/')?;
    if rest.starts_with("skill:") {
        return None;
    }
    expand_as(rest, skills)
}

/// `NAME args` (after the `/` or `/skill:`) expanded, when a skill has the name.
fn expand_as(rest: &str, skills: &[Skill]) -> Option<String> {
    let (name, args) = match rest.find(char::is_whitespace) {
        Some(i) => (&rest[..i], rest[i..].trim()),
        None => (rest, ""),
    };
    let skill = skills.iter().find(|s| s.name == name)?;
    let text = std::fs::read_to_string(&skill.path).ok()?;
    let body = split_frontmatter(&text).map_or(text.as_str(), |(_, b)| b);
    let mut out = format!(
        "<skill name=\"{}\" location=\"{}\">\nReferences are relative to {}.\n\n{}\n</skill>",
        skill.name,
        skill.path.display(),
        skill.base_dir().display(),
        body.trim()
    );
    if !args.is_empty() {
        out.push_str("\n\n");
        out.push_str(args);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(root: &Path, dir: &str, front: &str, body: &str) -> PathBuf {
        let d = root.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("SKILL.md");
        std::fs::write(&f, format!("---\n{front}\n---\n{body}")).unwrap();
        f
    }

    #[test]
    fn project_skills_come_first_and_the_first_of_a_name_wins() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        let cwd = repo.join("pkg");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        let home = dir.path().join("keel");
        skill(
            &cwd.join(".agents/skills"),
            "lint",
            "name: lint\ndescription: Lints the package.",
            "x",
        );
        skill(
            &repo.join(".keel/skills"),
            "release",
            "name: release\ndescription: \"Cuts a release: tags, notes.\"",
            "x",
        );
        skill(
            &home.join("skills"),
            "lint",
            "name: lint\ndescription: user lint",
            "x",
        );
        skill(&home.join("skills"), "pdf", "name: pdf\ndescription: >\n  Reads PDF files\n  and forms.\ndisable-model-invocation: true", "x");
        // Above the git root: not looked at.
        skill(
            &dir.path().join(".agents/skills"),
            "outside",
            "name: outside\ndescription: no",
            "x",
        );
        let (skills, warnings) = load(&roots(&home, None, None, &cwd));
        let got: Vec<(&str, &str, &str)> = skills
            .iter()
            .map(|s| (s.name.as_str(), s.description.as_str(), s.scope))
            .collect();
        assert_eq!(
            got,
            [
                ("lint", "Lints the package.", "project"),
                ("release", "Cuts a release: tags, notes.", "project"),
                ("pdf", "Reads PDF files and forms.", "user"),
            ]
        );
        assert!(!skills[2].model_invocable);
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("shadowed"), "{warnings:?}");
    }

    #[test]
    fn lenient_validation_warns_and_a_missing_description_skips() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        skill(&root, "Bad_Name", "name: Bad_Name\ndescription: ok", "x");
        skill(&root, "nodesc", "name: nodesc", "x");
        std::fs::create_dir_all(root.join("nofront")).unwrap();
        std::fs::write(root.join("nofront/SKILL.md"), "just text").unwrap();
        let (skills, warnings) = load(&[(root, "user", false)]);
        assert_eq!(skills.len(), 1);
        assert_eq!(skills[0].name, "Bad_Name");
        assert_eq!(warnings.len(), 3, "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("no `description`")));
        assert!(warnings.iter().any(|w| w.contains("no `---` frontmatter")));
    }

    #[test]
    fn the_catalog_lists_what_the_model_may_use_and_the_command_sends_the_body() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        let f = skill(
            &root,
            "lint",
            "name: lint\ndescription: Lints <code> & more.",
            "Run the linter.\n",
        );
        skill(
            &root,
            "secret",
            "name: secret\ndescription: hidden\ndisable-model-invocation: true",
            "s",
        );
        let (skills, _) = load(&[(root.clone(), "user", false)]);
        let mut w = Vec::new();
        let cat = catalog(&skills, true, &mut w).unwrap();
        assert!(cat.contains(
            "<name>lint</name><description>Lints &lt;code&gt; &amp; more.</description>"
        ));
        assert!(cat.contains(&format!("<location>{}</location>", f.display())));
        assert!(!cat.contains("secret") && !cat.contains("Run the linter"));
        assert_eq!(catalog(&skills, false, &mut w), None);
        let sent = expand("/skill:lint src/", &skills).unwrap();
        assert_eq!(
            sent,
            format!(
                "<skill name=\"lint\" location=\"{}\">\nReferences are relative to {}.\n\nRun the linter.\n</skill>\n\nsrc/",
                f.display(),
                root.join("lint").display()
            )
        );
        assert!(
            expand("/skill:secret", &skills).is_some(),
            "a command still"
        );
        assert_eq!(expand("/skill:nope x", &skills), None);
        assert_eq!(expand("hello", &skills), None);
        // Claude Code's `/NAME` is the same command.
        assert_eq!(expand_named("/lint src/", &skills), Some(sent));
        assert_eq!(expand_named("/skill:lint", &skills), None);
        assert_eq!(expand_named("/nope", &skills), None);
        assert_eq!(expand_named("lint", &skills), None);
    }

    #[test]
    fn claudes_skill_directories_are_roots_after_keels_own() {
        let dir = tempfile::tempdir().unwrap();
        let cwd = dir.path().join("proj");
        std::fs::create_dir_all(cwd.join(".git")).unwrap();
        let home = dir.path().join("keel");
        let claude = dir.path().join("u/.claude");
        skill(
            &cwd.join(".claude/skills"),
            "deploy",
            "name: deploy\ndescription: Deploys.",
            "x",
        );
        skill(
            &claude.join("skills"),
            "notes",
            "name: notes\ndescription: Takes notes.",
            "x",
        );
        skill(
            &home.join("skills"),
            "notes",
            "name: notes\ndescription: keel notes.",
            "x",
        );
        let (skills, warnings) = load(&roots(&home, None, Some(&claude), &cwd));
        let got: Vec<(&str, &str, bool)> = skills
            .iter()
            .map(|s| (s.name.as_str(), s.description.as_str(), s.claude))
            .collect();
        assert_eq!(
            got,
            [
                ("deploy", "Deploys.", true),
                ("notes", "keel notes.", false)
            ]
        );
        assert!(warnings[0].contains("shadowed"), "{warnings:?}");
    }
}
