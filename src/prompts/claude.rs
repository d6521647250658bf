//! Claude Code's custom slash commands as prompt templates: every `NAME.md` under
//! `~/.claude/commands/` (`$CLAUDE_CONFIG_DIR/commands/`) and `<project>/.claude/commands/`,
//! subdirectories included, is `/NAME`. As in Claude Code, a subdirectory is not part of the
//! name: it is a namespace shown with the origin (`.claude/commands/frontend/component.md` is
//! `/component`, from `project:frontend`). Frontmatter: `description` and `argument-hint` are
//! shown; `model` (a Claude alias such as `haiku`, a model id or `provider/id`) and
//! `allowed-tools` (Claude's rules, `Bash(git add:*), Read`) are the options the prompt runs
//! with (the host resolves them, the kernel applies them to that prompt's run only; a project's
//! `allowed-tools` only in a trusted project); `disable-model-invocation` needs nothing, as
//! keel's model never invokes a command. `!`cmd`` lines are not run (one warning per file).

use std::path::{Path, PathBuf};

use super::{collect, read_all, Scope, Template};

/// Where templates are read from, in precedence order (later wins).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Dirs {
    /// `$KEEL_HOME/prompts`.
    pub user: PathBuf,
    /// `<cwd>/.keel/prompts`.
    pub project: PathBuf,
    /// `~/.claude/commands` (`$CLAUDE_CONFIG_DIR/commands`); `None` without a home.
    pub claude_user: Option<PathBuf>,
    /// `<project>/.claude/commands` (`<project>`: the git root above the cwd, else the cwd).
    pub claude_project: Option<PathBuf>,
    /// Whether the project is trusted: a project command's `allowed-tools` widen what runs
    /// without asking only then.
    pub trusted: bool,
}

impl Dirs {
    /// The directories of a session in `cwd` of the project at `root` (the git root above
    /// the cwd, else the cwd); `claude_home`: Claude Code's user directory while Claude's files
    /// are read (`None`: neither its commands nor the project's `.claude/commands`).
    pub fn new(keel_home: &Path, claude_home: Option<&Path>, cwd: &Path, root: &Path) -> Dirs {
        Dirs {
            user: keel_home.join("prompts"),
            project: cwd.join(".keel").join("prompts"),
            claude_user: claude_home.map(|h| h.join("commands")),
            claude_project: claude_home.map(|_| root.join(".claude").join("commands")),
            trusted: false,
        }
    }

    /// The same directories in a project that is (or is not) trusted.
    pub fn trusting(self, trusted: bool) -> Dirs {
        Dirs { trusted, ..self }
    }

    /// keel's two directories only.
    pub fn keel(user: PathBuf, project: PathBuf) -> Dirs {
        Dirs {
            user,
            project,
            ..Dirs::default()
        }
    }
}

/// keel's two directories (user, project) only.
impl From<(PathBuf, PathBuf)> for Dirs {
    fn from((user, project): (PathBuf, PathBuf)) -> Dirs {
        Dirs::keel(user, project)
    }
}

/// What a template from Claude's directories carries beyond keel's.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claude {
    /// The commands directory it was found under.
    pub root: PathBuf,
    /// Its subdirectories under `root`, joined by `:` (`frontend`); empty at the top.
    pub namespace: String,
    /// `argument-hint`.
    pub argument_hint: Option<String>,
    /// `model`, as written (`haiku`, `claude-haiku-4-5`, `anthropic/claude-haiku-4-5`).
    pub model: Option<String>,
    /// `allowed-tools`, one rule each (`Bash(git add:*)`); empty in an untrusted project.
    pub allowed_tools: Vec<String>,
}

impl Template {
    /// `argument-hint`, if any.
    pub fn argument_hint(&self) -> Option<&str> {
        self.claude.as_ref()?.argument_hint.as_deref()
    }

    /// The `model` its prompt runs with, if it names one.
    pub fn model(&self) -> Option<&str> {
        self.claude.as_ref()?.model.as_deref()
    }

    /// The `allowed-tools` rules its prompt runs with.
    pub fn allowed_tools(&self) -> &[String] {
        self.claude.as_ref().map_or(&[], |c| &c.allowed_tools)
    }
}

/// Loads every template of `dirs`: Claude's user commands, keel's user templates, Claude's
/// project commands, keel's project templates; a later one of a name replaces an earlier one.
pub fn load_dirs(dirs: &Dirs) -> (Vec<Template>, Vec<String>) {
    let mut templates: Vec<Template> = Vec::new();
    let mut warnings = Vec::new();
    let sources = [
        (dirs.claude_user.as_deref(), Scope::User, true),
        (Some(dirs.user.as_path()), Scope::User, false),
        (dirs.claude_project.as_deref(), Scope::Project, true),
        (Some(dirs.project.as_path()), Scope::Project, false),
    ];
    for (dir, scope, claude) in sources {
        let Some(dir) = dir else { continue };
        let loaded = match claude {
            true => {
                let trusted = scope == Scope::User || dirs.trusted;
                load_claude(dir, scope, trusted, &mut warnings)
            }
            false => super::load_dir(dir, scope, &mut warnings),
        };
        for template in loaded {
            match templates.iter_mut().find(|t| t.name == template.name) {
                Some(slot) => *slot = template,
                None => templates.push(template),
            }
        }
    }
    (templates, warnings)
}

/// One Claude commands directory, subdirectories included; `trusted`: its `allowed-tools`
/// count (else they are left out, with one warning per command).
fn load_claude(
    root: &Path,
    scope: Scope,
    trusted: bool,
    warnings: &mut Vec<String>,
) -> Vec<Template> {
    let mut found = Vec::new();
    collect(root, true, &mut found, warnings);
    let mut templates = read_all(found, scope, warnings);
    for t in &mut templates {
        let text = std::fs::read_to_string(&t.path).unwrap_or_default();
        let text = text.replace("\r\n", "\n");
        let front = super::split_frontmatter(&text).map_or("", |(f, _)| f);
        let field = |k: &str| front_field(front, k);
        let mut allowed_tools = allowed_tools(front);
        if !trusted && !allowed_tools.is_empty() {
            warnings.push(format!(
                "{}: the project is not trusted, so its `allowed-tools` are left out (/{} runs \
                 with the session's permission rules); pass --trust-project to trust it for this \
                 run, or trust it in keel's TUI",
                t.path.display(),
                t.name
            ));
            allowed_tools.clear();
        }
        if t.content.contains("!`") {
            warnings.push(format!(
                "{}: keel does not run its !`command` lines; they stay in the prompt as written",
                t.path.display()
            ));
        }
        let namespace = t
            .path
            .parent()
            .and_then(|d| d.strip_prefix(root).ok())
            .map(|rel| {
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                parts.join(":")
            })
            .unwrap_or_default();
        t.claude = Some(Claude {
            root: root.to_path_buf(),
            namespace,
            argument_hint: field("argument-hint"),
            model: field("model").filter(|m| m != "inherit"),
            allowed_tools,
        });
    }
    templates
}

/// `allowed-tools` as Claude Code reads it: `A, B`, `A B`, `[A, B]` or a block of `- A` lines
/// after the key; rules are split at commas and blanks outside parentheses, so
/// `Bash(git add:*)` stays one rule.
fn allowed_tools(front: &str) -> Vec<String> {
    let key = "allowed-tools";
    let lines: Vec<&str> = front.lines().collect();
    let Some(at) = lines.iter().rposition(|l| {
        l.split_once(':')
            .is_some_and(|(k, _)| k.trim() == key && !l.starts_with(char::is_whitespace))
    }) else {
        return Vec::new();
    };
    let value = lines[at].split_once(':').map_or("", |(_, v)| v.trim());
    let mut out = Vec::new();
    if value.is_empty() {
        for line in lines[at + 1..].iter().map(|l| l.trim()) {
            let Some(item) = line.strip_prefix('-') else {
                break;
            };
            out.extend(split_rules(super::unquote(item.trim())));
        }
        return out;
    }
    let inner = value
        .strip_prefix('[')
        .and_then(|v| v.strip_suffix(']'))
        .unwrap_or(value);
    for item in split_rules(inner) {
        let item = super::unquote(&item).trim().to_string();
        if !item.is_empty() {
            out.push(item);
        }
    }
    out
}

/// Rules separated by commas or blanks outside parentheses.
fn split_rules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && (c == ',' || c.is_whitespace()) {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
            continue;
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// The non-empty value of `key: value` in frontmatter lines, one pair of quotes removed (a
/// later line wins).
fn front_field(front: &str, key: &str) -> Option<String> {
    let mut found = None;
    for line in front.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if k.trim() == key {
            let v = super::unquote(v.trim()).trim();
            found = (!v.is_empty()).then(|| v.to_string());
        }
    }
    found
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn claude_commands_load_with_namespaces_below_keels_own() {
        let t = tempfile::tempdir().unwrap();
        let keel_home = t.path().join("keel");
        let claude_home = t.path().join("u/.claude");
        let cwd = t.path().join("proj");
        std::fs::create_dir_all(cwd.join(".git")).unwrap();
        let project = cwd.join(".claude/commands");
        write(
            &project.join("frontend/component.md"),
            "---\ndescription: Make a component\nargument-hint: <name> <size>\nmodel: haiku\n---\nMake $1 ($ARGUMENTS)\n",
        );
        write(&project.join("deep/er/x.md"), "Deep one\n");
        write(&project.join("review.md"), "Claude review\n!`git diff`\n");
        write(&cwd.join(".keel/prompts/review.md"), "keel review\n");
        write(&claude_home.join("commands/hello.md"), "Say hello\n");
        write(
            &claude_home.join("commands/component.md"),
            "user component\n",
        );
        let dirs = Dirs::new(&keel_home, Some(&claude_home), &cwd, &cwd);
        let (templates, warnings) = load_dirs(&dirs);
        let by = |n: &str| templates.iter().find(|t| t.name == n).unwrap();
        let c = by("component");
        let ns = |t: &Template| t.claude.as_ref().map(|c| c.namespace.clone());
        assert_eq!(ns(c).as_deref(), Some("frontend"));
        assert_eq!(c.scope, Scope::Project);
        assert_eq!(c.argument_hint(), Some("<name> <size>"));
        assert_eq!(c.description, "Make a component");
        assert_eq!(
            super::super::expand("/component Button big", &templates).unwrap(),
            "Make Button (Button big)\n"
        );
        assert_eq!(ns(by("x")).as_deref(), Some("deep:er"));
        assert_eq!(ns(by("hello")).as_deref(), Some(""));
        assert_eq!(by("hello").scope, Scope::User);
        // keel's own directory wins at one scope.
        assert_eq!(ns(by("review")), None);
        assert_eq!(by("review").content, "keel review\n");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("review.md: keel does not run its !`command` lines")),
            "{warnings:?}"
        );
        assert_eq!(c.model(), Some("haiku"));
        assert!(
            !warnings.iter().any(|w| w.contains("does not honour")),
            "{warnings:?}"
        );
    }

    #[test]
    fn allowed_tools_read_as_claude_writes_them() {
        let rules = |front: &str| allowed_tools(front);
        assert_eq!(
            rules("allowed-tools: Bash(git add:*), Bash(git status:*), Read\n"),
            ["Bash(git add:*)", "Bash(git status:*)", "Read"]
        );
        assert_eq!(
            rules("allowed-tools: Read Grep Bash(npm run test:*)"),
            ["Read", "Grep", "Bash(npm run test:*)"]
        );
        assert_eq!(
            rules("allowed-tools: [\"Read\", 'Bash(ls:*)']"),
            ["Read", "Bash(ls:*)"]
        );
        assert_eq!(
            rules("description: x\nallowed-tools:\n  - Read\n  - Bash(git diff:*)\nmodel: haiku"),
            ["Read", "Bash(git diff:*)"]
        );
        assert!(rules("description: no tools").is_empty());
        assert!(rules("allowed-tools:").is_empty());
    }

    #[test]
    fn a_projects_allowed_tools_count_only_when_it_is_trusted() {
        let t = tempfile::tempdir().unwrap();
        let claude_home = t.path().join("u/.claude");
        let cwd = t.path().join("proj");
        let front = "---\nallowed-tools: Bash(touch:*)\nmodel: inherit\n---\nTouch\n";
        write(&cwd.join(".claude/commands/touch.md"), front);
        write(&claude_home.join("commands/mine.md"), front);
        let dirs = Dirs::new(&t.path().join("keel"), Some(&claude_home), &cwd, &cwd);
        let (templates, warnings) = load_dirs(&dirs);
        let by = |ts: &[Template], n: &str| ts.iter().find(|t| t.name == n).unwrap().clone();
        assert!(by(&templates, "touch").allowed_tools().is_empty());
        assert_eq!(by(&templates, "mine").allowed_tools(), ["Bash(touch:*)"]);
        assert_eq!(
            by(&templates, "mine").model(),
            None,
            "inherit is the session's"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("touch.md: the project is not trusted")),
            "{warnings:?}"
        );
        let (templates, warnings) = load_dirs(&dirs.trusting(true));
        assert_eq!(by(&templates, "touch").allowed_tools(), ["Bash(touch:*)"]);
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}
