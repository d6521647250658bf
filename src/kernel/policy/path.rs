//! The gitignore-style path patterns of file-tool rules (`Read(./.env)`, `Edit(/src/**)`):
//! `//x` absolute, `~/x` under the home directory, `/x` and `./x` under the project root, a
//! bare name without a slash (`.env`, `*.pem`) at any depth under the root, any other relative
//! pattern under the root. `*` stays inside one path component, `**` crosses them; a pattern
//! also matches everything below what it names (`Read(./secrets)` covers `secrets/a`).

use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

/// One compiled path pattern.
#[derive(Debug, Clone)]
pub(crate) struct PathPattern {
    set: GlobSet,
    /// The one path (and what is below it) the pattern covers, when it has no glob before a
    /// trailing `/**`: what a sandbox can be told.
    literal: Option<PathBuf>,
}

impl PathPattern {
    /// Compiles a specifier against the project `root` and `home`; `Err` says why it cannot.
    pub(crate) fn parse(spec: &str, root: &Path, home: &Path) -> Result<PathPattern, String> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err("an empty path pattern".into());
        }
        let (dir, rest) = if let Some(abs) = spec.strip_prefix("//") {
            (Path::new("/"), abs.to_string())
        } else if let Some(rest) = spec.strip_prefix("~/") {
            (home, rest.to_string())
        } else if let Some(rest) = spec.strip_prefix('/') {
            (root, rest.to_string())
        } else if let Some(rest) = spec.strip_prefix("./") {
            (root, rest.to_string())
        } else if !spec.trim_end_matches('/').contains('/') {
            (root, format!("**/{spec}"))
        } else {
            (root, spec.to_string())
        };
        let anchored = join(dir, &rest);
        let literal = literal(dir, &rest);
        let base = anchored.trim_end_matches('/');
        let base = if base.is_empty() { "/" } else { base };
        let mut set = GlobSetBuilder::new();
        for pattern in [
            base.to_string(),
            format!("{}/**", base.trim_end_matches('/')),
        ] {
            let glob = GlobBuilder::new(&pattern)
                .literal_separator(true)
                .backslash_escape(true)
                .build()
                .map_err(|e| format!("not a path pattern: {}", e.kind()))?;
            set.add(glob);
        }
        let set = set
            .build()
            .map_err(|e| format!("not a path pattern: {}", e.kind()))?;
        Ok(PathPattern { set, literal })
    }

    /// The literal path the pattern covers with everything below it, if it is one.
    pub(crate) fn literal(&self) -> Option<&Path> {
        self.literal.as_deref()
    }

    /// Whether the absolute, normalised `path` matches.
    pub(crate) fn matches(&self, path: &Path) -> bool {
        self.set.is_match(path)
    }
}

/// `dir` (its glob characters escaped) joined with the pattern `rest`.
fn join(dir: &Path, rest: &str) -> String {
    let dir = globset::escape(&dir.to_string_lossy());
    format!("{}/{rest}", dir.trim_end_matches('/'))
}

/// `dir` joined with `rest` when `rest` is literal but for a trailing `/**` (and `.`/`..`
/// taken out).
fn literal(dir: &Path, rest: &str) -> Option<PathBuf> {
    let rest = rest.trim_end_matches('/');
    let rest = rest.strip_suffix("/**").unwrap_or(rest);
    if rest.contains(['*', '?', '[', ']', '{', '}', '\\']) {
        return None;
    }
    Some(normalize(dir, rest))
}

/// `p` resolved against `cwd`, with `.` and `..` taken out lexically.
pub(crate) fn normalize(cwd: &Path, p: &str) -> PathBuf {
    let joined = crate::kernel::tool::resolve_path(cwd, p);
    let mut out = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(spec: &str, path: &str) -> bool {
        PathPattern::parse(spec, Path::new("/p"), Path::new("/home/u"))
            .unwrap()
            .matches(&normalize(Path::new("/p/sub"), path))
    }

    #[test]
    fn each_anchor_resolves_as_claude_code_documents() {
        assert!(m("./.env", "/p/.env"));
        assert!(!m("./.env", "/p/sub/.env"), "./ is the project root only");
        assert!(m("/src/**", "../src/a/b.rs"));
        assert!(!m("/src/**", "/p/sub/src/a.rs"));
        assert!(m("//etc/passwd", "/etc/passwd"));
        assert!(m("~/.ssh/**", "/home/u/.ssh/id_ed25519"));
        assert!(
            m(".env", "/p/sub/deep/.env"),
            "a bare name matches at any depth"
        );
        assert!(m("*.pem", "key.pem"));
        assert!(!m(".env", "/elsewhere/.env"), "…but only under the root");
        assert!(m("sub/*.rs", "a.rs"));
        assert!(!m("sub/*.rs", "x/a.rs"), "`*` stays in one component");
        assert!(
            m("./secrets", "../secrets/a/b"),
            "a directory covers what is below it"
        );
        assert!(m("./build/", "../build/out.o"));
    }

    #[test]
    fn glob_characters_in_the_root_are_literal() {
        let p = PathPattern::parse("./x", Path::new("/a[1]"), Path::new("/h")).unwrap();
        assert!(p.matches(Path::new("/a[1]/x")));
        assert!(!p.matches(Path::new("/a1/x")));
    }

    #[test]
    fn literal_paths_and_directory_prefixes_are_known() {
        let lit = |spec: &str| {
            PathPattern::parse(spec, Path::new("/p"), Path::new("/home/u"))
                .unwrap()
                .literal()
                .map(Path::to_path_buf)
        };
        assert_eq!(lit("./secret.txt"), Some(PathBuf::from("/p/secret.txt")));
        assert_eq!(lit("/secrets/**"), Some(PathBuf::from("/p/secrets")));
        assert_eq!(lit("~/.aws/"), Some(PathBuf::from("/home/u/.aws")));
        assert_eq!(lit("//etc/shadow"), Some(PathBuf::from("/etc/shadow")));
        assert_eq!(lit("sub/../key"), Some(PathBuf::from("/p/key")));
        assert_eq!(lit(".env"), None, "a bare name is at any depth");
        assert_eq!(lit("**/.env"), None);
        assert_eq!(lit("./*.pem"), None);
    }

    #[test]
    fn a_broken_glob_is_refused() {
        assert!(PathPattern::parse("./a[", Path::new("/p"), Path::new("/h")).is_err());
    }
}
