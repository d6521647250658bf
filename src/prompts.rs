//! Prompt templates: Markdown files that become slash commands.
//!
//! Every `NAME.md` in `$KEEL_HOME/prompts/` (scope "user") or `<project>/.keel/prompts/` (scope
//! "project") is a template invoked as `/NAME arg…`; so is every `NAME.md` under Claude Code's
//! `~/.claude/commands/` and `<project>/.claude/commands/`, subdirectories included (a
//! subdirectory is a namespace shown beside the description, not part of the name; the
//! `claude` submodule). [`load_dirs`] reads them all: project over user, and at one scope keel's
//! directory over Claude's; [`expand`] turns a prompt that starts with `/NAME` into the template
//! body with its arguments substituted. An optional frontmatter block (`---` … `---`) may carry
//! a `description:`; otherwise the first body line describes it.
//!
//! Pure apart from reading the directories; problems come back as warning strings and
//! nothing is ever printed.

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

mod claude;
pub use claude::{load_dirs, Dirs};

/// Longest description, in characters, taken from a body line before it is cut with `…`.
const DESCRIPTION_CHARS: usize = 60;

/// One prompt template loaded from disk.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// The command name: the file name without `.md` (`review.md` → `review`).
    pub name: String,
    /// The frontmatter `description:`, else the first non-empty body line (cut to 60 chars).
    pub description: String,
    /// The body, frontmatter removed, line endings normalised to `\n`.
    pub content: String,
    /// The file the template came from.
    pub path: PathBuf,
    /// Which directory the template came from.
    pub scope: Scope,
    /// Claude's extras; `None` for keel's own templates.
    pub claude: Option<claude::Claude>,
}

/// Where a template was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// `$KEEL_HOME/prompts/`.
    User,
    /// `<project>/.keel/prompts/`.
    Project,
}

impl Scope {
    /// The scope's label: `"user"` or `"project"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::User => "user",
            Scope::Project => "project",
        }
    }
}

/// Loads templates from keel's `user_dir`, then `project_dir` (see [`load_dirs`]).
///
/// Each directory is read non-recursively; only regular `*.md` files count, taken in name
/// order. A missing directory contributes nothing. A project template whose name matches a
/// user template replaces it in place. Files that cannot be read, are not UTF-8, or have an
/// unusable name are skipped, each with one warning in the second vector.
#[cfg(test)]
fn load(user_dir: &Path, project_dir: &Path) -> (Vec<Template>, Vec<String>) {
    load_dirs(&Dirs::keel(
        user_dir.to_path_buf(),
        project_dir.to_path_buf(),
    ))
}

/// Reads one directory's templates, sorted by name.
fn load_dir(dir: &Path, scope: Scope, warnings: &mut Vec<String>) -> Vec<Template> {
    let mut found = Vec::new();
    collect(dir, false, &mut found, warnings);
    read_all(found, scope, warnings)
}

/// The `(name, path)` of every candidate file in `dir` (and, with `recursive`, in its
/// subdirectories but hidden ones), before reading any.
fn collect(
    dir: &Path,
    recursive: bool,
    found: &mut Vec<(String, PathBuf)>,
    warnings: &mut Vec<String>,
) {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return,
        Err(e) => {
            warnings.push(format!(
                "prompt templates: cannot read {}: {e}",
                dir.display()
            ));
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                warnings.push(format!(
                    "prompt templates: cannot list {}: {e}",
                    dir.display()
                ));
                continue;
            }
        };
        let path = entry.path();
        let file_name = entry.file_name();
        let Some(file_name) = file_name.to_str() else {
            // A name that is not UTF-8 cannot be typed as a command; only mention it if it
            // looks like a template.
            if file_name.as_encoded_bytes().ends_with(b".md") {
                warnings.push(format!(
                    "prompt template {}: file name is not UTF-8, skipped",
                    path.display()
                ));
            }
            continue;
        };
        // A real directory only (a linked one could loop).
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if recursive && is_dir && !file_name.starts_with('.') {
            collect(&path, true, found, warnings);
            continue;
        }
        let Some(stem) = file_name.strip_suffix(".md") else {
            continue;
        };
        // Follows symlinks, so a linked file counts and a directory named `x.md` does not.
        match fs::metadata(&path) {
            Ok(meta) if meta.is_file() => {}
            Ok(_) => continue,
            Err(e) => {
                warnings.push(format!("prompt template {}: {e}, skipped", path.display()));
                continue;
            }
        }
        if stem.is_empty() || stem.chars().any(char::is_whitespace) {
            warnings.push(format!(
                "prompt template {}: name must be non-empty with no whitespace, skipped",
                path.display()
            ));
            continue;
        }
        found.push((stem.to_string(), path));
    }
}

/// Reads the files `collect` found, sorted by name.
fn read_all(
    mut found: Vec<(String, PathBuf)>,
    scope: Scope,
    warnings: &mut Vec<String>,
) -> Vec<Template> {
    found.sort();
    let mut templates = Vec::with_capacity(found.len());
    for (name, path) in found {
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) => {
                warnings.push(format!(
                    "prompt template {}: cannot read: {e}, skipped",
                    path.display()
                ));
                continue;
            }
        };
        let Ok(text) = String::from_utf8(bytes) else {
            warnings.push(format!(
                "prompt template {}: not valid UTF-8, skipped",
                path.display()
            ));
            continue;
        };
        let (description, content) = parse(&text);
        templates.push(Template {
            name,
            description,
            content,
            path,
            scope,
            claude: None,
        });
    }
    templates
}

/// Splits a template file into (description, body).
fn parse(text: &str) -> (String, String) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n");
    let (declared, body) = match split_frontmatter(&text) {
        Some((front, body)) => (front_description(front), body),
        None => (None, text.as_str()),
    };
    let description = declared.unwrap_or_else(|| first_line_description(body));
    (description, body.to_string())
}

/// With frontmatter present, returns (frontmatter lines, body after the closing `---`). The
/// body loses the blank lines that usually separate it from the frontmatter.
fn split_frontmatter(text: &str) -> Option<(&str, &str)> {
    let (first, rest) = text.split_once('\n')?;
    if first.trim_end() != "---" {
        return None;
    }
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            let front = &rest[..offset];
            let body = rest[offset + line.len()..].trim_start_matches('\n');
            return Some((front, body));
        }
        offset += line.len();
    }
    None
}

/// The non-empty `description:` value from frontmatter lines, quotes removed. A later key
/// wins over an earlier one.
fn front_description(front: &str) -> Option<String> {
    let mut found = None;
    for line in front.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        if key.trim() != "description" {
            continue;
        }
        let value = unquote(value.trim()).trim();
        found = if value.is_empty() {
            None
        } else {
            Some(value.to_string())
        };
    }
    found
}

/// Removes one pair of matching surrounding `"` or `'` quotes.
fn unquote(value: &str) -> &str {
    for quote in ['"', '\''] {
        if let Some(inner) = value
            .strip_prefix(quote)
            .and_then(|v| v.strip_suffix(quote))
        {
            return inner;
        }
    }
    value
}

/// The first non-empty body line, trimmed, cut to [`DESCRIPTION_CHARS`] characters plus `…`.
fn first_line_description(body: &str) -> String {
    let line = body
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    match line.char_indices().nth(DESCRIPTION_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

/// Expands `text` when it starts with `/NAME` naming a template in `templates`.
///
/// `NAME` runs to the first whitespace (or the end). Everything after it, trimmed, is the
/// argument text, split shell-style: whitespace separates arguments, and single or double
/// quotes group (the quotes themselves are dropped). In the template content, `$1`…`$9` are
/// positional arguments (empty when missing), `$@` and `$ARGUMENTS` are all arguments joined by
/// one space, `${@:N}` is the arguments from the N-th (1-based) on and `${@:N:L}` is L of them.
/// Substitution is a single pass, so argument text is never scanned for placeholders. When the
/// content has no placeholder at all and arguments were given, the raw argument text is
/// appended after a blank line. When several templates share the name, the last one is used.
pub fn expand(text: &str, templates: &[Template]) -> Option<String> {
    let template = invoked(text, templates)?;
    let after_slash = &text[1..];
    let name_end = template.name.len();
    let raw_args = after_slash[name_end..].trim();
    let args = split_args(raw_args);
    let (expanded, used_placeholder) = substitute(&template.content, &args);
    if used_placeholder || raw_args.is_empty() {
        return Some(expanded);
    }
    Some(format!("{}\n\n{raw_args}", expanded.trim_end()))
}

/// The template `text` invokes (`/NAME …`), if any: the last of the name.
pub fn invoked<'a>(text: &str, templates: &'a [Template]) -> Option<&'a Template> {
    let after_slash = text.strip_prefix('/')?;
    let name_end = after_slash
        .find(char::is_whitespace)
        .unwrap_or(after_slash.len());
    let name = &after_slash[..name_end];
    if name.is_empty() {
        return None;
    }
    templates.iter().rev().find(|t| t.name == name)
}

/// Shell-style word splitting: whitespace separates; `'…'` and `"…"` group and are removed.
/// An unclosed quote runs to the end; `""` is an empty argument.
fn split_args(raw: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in raw.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => current.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                in_word = true;
            }
            None if c.is_whitespace() => {
                if in_word {
                    args.push(std::mem::take(&mut current));
                    in_word = false;
                }
            }
            None => {
                current.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        args.push(current);
    }
    args
}

/// Replaces placeholders in `content` in one left-to-right pass. Returns the result and
/// whether any placeholder was found. A `$` that starts no placeholder is kept as is.
fn substitute(content: &str, args: &[String]) -> (String, bool) {
    let mut out = String::with_capacity(content.len());
    let mut used = false;
    let mut rest = content;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..dollar]);
        let after = &rest[dollar + 1..];
        match placeholder(after, args) {
            Some((value, consumed)) => {
                out.push_str(&value);
                used = true;
                rest = &after[consumed..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    (out, used)
}

/// Recognises a placeholder at the start of `after` (the text following a `$`). Returns its
/// value and how many bytes of `after` it spans.
fn placeholder(after: &str, args: &[String]) -> Option<(String, usize)> {
    let first = after.chars().next()?;
    if let Some(digit) = first.to_digit(10).filter(|d| *d >= 1) {
        let value = args.get(digit as usize - 1).cloned().unwrap_or_default();
        return Some((value, 1));
    }
    if first == '@' {
        return Some((args.join(" "), 1));
    }
    if after.starts_with("ARGUMENTS") {
        return Some((args.join(" "), "ARGUMENTS".len()));
    }
    let inner_start = after.strip_prefix("{@:")?;
    let close = inner_start.find('}')?;
    let inner = &inner_start[..close];
    let (start, len) = match inner.split_once(':') {
        Some((start, len)) => (start, Some(len)),
        None => (inner, None),
    };
    let start = parse_count(start).filter(|n| *n >= 1)?;
    let len = match len {
        Some(len) => parse_count(len)?,
        None => usize::MAX,
    };
    let value = args
        .iter()
        .skip(start - 1)
        .take(len)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(" ");
    Some((value, "{@:".len() + close + 1))
}

/// A plain decimal count: ASCII digits only (no sign, no spaces).
fn parse_count(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, contents: &[u8]) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join(name), contents).unwrap();
    }

    fn template(name: &str, content: &str) -> Template {
        Template {
            name: name.to_string(),
            description: String::new(),
            content: content.to_string(),
            path: PathBuf::from(format!("{name}.md")),
            scope: Scope::User,
            claude: None,
        }
    }

    fn run(content: &str, text: &str) -> Option<String> {
        expand(text, &[template("t", content)])
    }

    #[test]
    fn scope_labels() {
        assert_eq!(Scope::User.as_str(), "user");
        assert_eq!(Scope::Project.as_str(), "project");
    }

    #[test]
    fn loads_both_scopes_sorted_by_name() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        let project = tmp.path().join("project");
        write(&user, "zeta.md", b"Zeta body");
        write(&user, "alpha.md", b"Alpha body");
        write(&project, "mid.md", b"Mid body");

        let (templates, warnings) = load(&user, &project);
        assert!(warnings.is_empty(), "{warnings:?}");
        let names: Vec<_> = templates.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["alpha", "zeta", "mid"]);
        assert_eq!(templates[0].scope, Scope::User);
        assert_eq!(templates[2].scope, Scope::Project);
        assert_eq!(templates[0].content, "Alpha body");
        assert_eq!(templates[0].path, user.join("alpha.md"));
        assert_eq!(templates[2].path, project.join("mid.md"));
    }

    #[test]
    fn project_template_overrides_user_template() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        let project = tmp.path().join("project");
        write(&user, "a.md", b"user a");
        write(&user, "review.md", b"user review");
        write(&project, "review.md", b"project review");

        let (templates, warnings) = load(&user, &project);
        assert!(warnings.is_empty());
        assert_eq!(templates.len(), 2);
        let review = templates.iter().find(|t| t.name == "review").unwrap();
        assert_eq!(review.scope, Scope::Project);
        assert_eq!(review.content, "project review");
        assert_eq!(review.path, project.join("review.md"));
    }

    #[test]
    fn missing_directories_are_not_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let (templates, warnings) = load(&tmp.path().join("nope"), &tmp.path().join("nada"));
        assert!(templates.is_empty());
        assert!(warnings.is_empty());

        write(&tmp.path().join("user"), "x.md", b"x");
        let (templates, warnings) = load(&tmp.path().join("user"), &tmp.path().join("nada"));
        assert_eq!(templates.len(), 1);
        assert!(warnings.is_empty());
    }

    #[test]
    fn only_md_files_at_top_level_count() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        write(&user, "notes.txt", b"no");
        write(&user, "README", b"no");
        write(&user, "draft.md.bak", b"no");
        write(&user, "upper.MD", b"no");
        write(&user.join("nested"), "deep.md", b"no");
        fs::create_dir_all(user.join("dir.md")).unwrap();
        write(&user, "ok.md", b"yes");

        let (templates, warnings) = load(&user, &tmp.path().join("none"));
        assert!(warnings.is_empty(), "{warnings:?}");
        let names: Vec<_> = templates.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["ok"]);
    }

    #[test]
    fn bad_names_are_skipped_with_warnings() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        write(&user, "two words.md", b"x");
        write(&user, ".md", b"x");
        write(&user, "fine.md", b"x");

        let (templates, warnings) = load(&user, &tmp.path().join("none"));
        assert_eq!(templates.len(), 1);
        assert_eq!(templates[0].name, "fine");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings.iter().any(|w| w.contains("two words.md")));
    }

    #[test]
    fn non_utf8_file_is_skipped_with_warning() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        write(&user, "bad.md", &[0x66, 0xff, 0xfe, 0x0a]);
        write(&user, "good.md", b"good");

        let (templates, warnings) = load(&user, &tmp.path().join("none"));
        assert_eq!(templates.len(), 1);
        assert_eq!(templates[0].name, "good");
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("bad.md"), "{}", warnings[0]);
        assert!(warnings[0].contains("UTF-8"), "{}", warnings[0]);
    }

    #[test]
    fn description_from_frontmatter() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        write(
            &user,
            "a.md",
            b"---\nauthor: me\ndescription: Review the diff\n---\n\nBody line\n",
        );
        write(
            &user,
            "b.md",
            b"---\ndescription: \"Quoted: yes\"\n---\nB\n",
        );
        write(&user, "c.md", b"---\ndescription: 'single'\n---\nC\n");
        write(&user, "d.md", b"---\ndescription:\n---\nFallback line\n");

        let (t, warnings) = load(&user, &tmp.path().join("none"));
        assert!(warnings.is_empty());
        assert_eq!(t[0].description, "Review the diff");
        assert_eq!(t[0].content, "Body line\n");
        assert_eq!(t[1].description, "Quoted: yes");
        assert_eq!(t[1].content, "B\n");
        assert_eq!(t[2].description, "single");
        assert_eq!(t[3].description, "Fallback line");
    }

    #[test]
    fn description_from_first_non_empty_line() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        write(&user, "a.md", b"\n   \n   Explain this code  \nmore\n");
        write(&user, "b.md", b"");

        let (t, _) = load(&user, &tmp.path().join("none"));
        assert_eq!(t[0].description, "Explain this code");
        assert_eq!(t[0].content, "\n   \n   Explain this code  \nmore\n");
        assert_eq!(t[1].description, "");
        assert_eq!(t[1].content, "");
    }

    #[test]
    fn description_truncates_on_char_boundary() {
        let exact = "é".repeat(60);
        assert_eq!(first_line_description(&exact), exact);

        let long = format!("{}ü tail", "日".repeat(59));
        let expected = format!("{}ü…", "日".repeat(59));
        assert_eq!(first_line_description(&long), expected);
        assert_eq!(first_line_description(&long).chars().count(), 61);
    }

    #[test]
    fn unclosed_frontmatter_is_body() {
        let (description, content) = parse("---\ndescription: nope\nstill body\n");
        assert_eq!(description, "---");
        assert_eq!(content, "---\ndescription: nope\nstill body\n");
    }

    #[test]
    fn crlf_files_are_normalised() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        write(
            &user,
            "a.md",
            b"---\r\ndescription: \"Windows\"\r\n---\r\nLine one\r\nLine two $1\r\n",
        );
        write(&user, "b.md", b"First line\r\nsecond\r\n");

        let (t, warnings) = load(&user, &tmp.path().join("none"));
        assert!(warnings.is_empty());
        assert_eq!(t[0].description, "Windows");
        assert_eq!(t[0].content, "Line one\nLine two $1\n");
        assert_eq!(t[1].description, "First line");
        assert_eq!(t[1].content, "First line\nsecond\n");
    }

    #[test]
    fn expands_positional_arguments() {
        assert_eq!(
            run("from $1 to $2, not $3.", "/t a b").unwrap(),
            "from a to b, not ."
        );
        assert_eq!(run("$9$1", "/t 1 2 3 4 5 6 7 8 9").unwrap(), "91");
        // `$10` is `$1` followed by `0`.
        assert_eq!(run("$10", "/t x").unwrap(), "x0");
    }

    #[test]
    fn expands_all_arguments() {
        assert_eq!(run("[$@]", "/t a   b\tc").unwrap(), "[a b c]");
        assert_eq!(run("[$ARGUMENTS]", "/t a b").unwrap(), "[a b]");
        assert_eq!(run("[$@]", "/t").unwrap(), "[]");
    }

    #[test]
    fn expands_argument_slices() {
        let text = "/t a b c d";
        assert_eq!(run("${@:2}", text).unwrap(), "b c d");
        assert_eq!(run("${@:2:2}", text).unwrap(), "b c");
        assert_eq!(run("${@:3:10}", text).unwrap(), "c d");
        assert_eq!(run("[${@:9}]", text).unwrap(), "[]");
        assert_eq!(run("[${@:1:0}]", text).unwrap(), "[]");
    }

    #[test]
    fn malformed_placeholders_stay_literal() {
        assert_eq!(
            run("$0 $x ${@:0} ${@:a} ${@:1", "/t a").unwrap(),
            "$0 $x ${@:0} ${@:a} ${@:1\n\na"
        );
        assert_eq!(run("cost: 5$", "/t").unwrap(), "cost: 5$");
    }

    #[test]
    fn quotes_group_arguments() {
        assert_eq!(
            run("1=$1|2=$2|3=$3", "/t \"two words\" 'single q' plain").unwrap(),
            "1=two words|2=single q|3=plain"
        );
        assert_eq!(
            run("1=$1|2=$2", "/t it's\" \"ok x").unwrap(),
            "1=its\" \"ok x|2="
        );
        assert_eq!(run("[$1][$2]", "/t \"\" b").unwrap(), "[][b]");
        assert_eq!(run("[$1]", "/t ab\"c d\"e").unwrap(), "[abc de]");
    }

    #[test]
    fn inserted_arguments_are_not_rescanned() {
        assert_eq!(run("$1 and $2", "/t '$2' x").unwrap(), "$2 and x");
        assert_eq!(
            run("$@", "/t $ARGUMENTS ${@:1}").unwrap(),
            "$ARGUMENTS ${@:1}"
        );
    }

    #[test]
    fn appends_raw_arguments_without_placeholders() {
        assert_eq!(
            run("Review the code.\n", "/t  focus on \"errors\"  ").unwrap(),
            "Review the code.\n\nfocus on \"errors\""
        );
        assert_eq!(
            run("Review.", "/t\nline one\nline two").unwrap(),
            "Review.\n\nline one\nline two"
        );
    }

    #[test]
    fn name_alone_expands_to_content() {
        assert_eq!(run("Plain body\n", "/t").unwrap(), "Plain body\n");
        assert_eq!(run("Plain body\n", "/t \n ").unwrap(), "Plain body\n");
        assert_eq!(run("Hi $1!", "/t").unwrap(), "Hi !");
    }

    #[test]
    fn arguments_may_span_lines() {
        assert_eq!(run("<$@>", "/t a\nb").unwrap(), "<a b>");
        assert_eq!(run("<$1>", "/t\tx").unwrap(), "<x>");
    }

    #[test]
    fn no_expansion_without_a_matching_name() {
        assert_eq!(run("body", "/other x"), None);
        assert_eq!(run("body", "/t-suffix x"), None);
        assert_eq!(run("body", "/tt"), None);
        assert_eq!(run("body", " /t"), None);
        assert_eq!(run("body", "t"), None);
        assert_eq!(run("body", "/"), None);
        assert_eq!(run("body", "/ t"), None);
        assert_eq!(run("body", ""), None);
    }

    #[test]
    fn expand_uses_loaded_templates() {
        let tmp = tempfile::tempdir().unwrap();
        let user = tmp.path().join("user");
        let project = tmp.path().join("project");
        write(
            &user,
            "fix.md",
            b"---\ndescription: Fix\n---\nFix issue #$1 in ${@:2}\n",
        );
        write(&project, "fix.md", b"Project fix $1\n");
        write(&user, "explain.md", b"Explain it.\n");

        let (t, _) = load(&user, &project);
        assert_eq!(expand("/fix 42", &t).unwrap(), "Project fix 42\n");
        assert_eq!(
            expand("/explain src/main.rs", &t).unwrap(),
            "Explain it.\n\nsrc/main.rs"
        );
    }
}
