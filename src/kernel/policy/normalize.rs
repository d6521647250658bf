//! What a simple command runs, for deny rules: wrappers and their options are taken off
//! (`command`, `builtin`, `env`, `exec`, `nohup`, `nice`, `time`, `timeout`, `stdbuf`, `setsid`,
//! `sudo`, `doas`, `xargs`, `busybox`, `noglob`), a path-named command is its basename
//! (`/bin/rm` is `rm`), and the script of `eval ARGS`, `bash -c STR` (`sh`, `zsh`, `dash`,
//! `ksh`), `env -S STR` and the command of `find -exec` are found so they are split too. Also
//! which leading `VAR=value` assignments allow rules may look past. Never decides a verdict.

use super::word::{Tok, Word};

/// A wrapper: its name, the options that take a separate argument, and how many operands
/// come before the wrapped command (`timeout`'s duration).
struct Wrapper {
    name: &'static str,
    with_arg: &'static [&'static str],
    operands: usize,
}

const fn w(name: &'static str, with_arg: &'static [&'static str], operands: usize) -> Wrapper {
    Wrapper {
        name,
        with_arg,
        operands,
    }
}

const WRAPPERS: &[Wrapper] = &[
    w("command", &[], 0),
    w("builtin", &[], 0),
    w("nohup", &[], 0),
    w("setsid", &[], 0),
    w("busybox", &[], 0),
    w("noglob", &[], 0),
    w("exec", &["-a"], 0),
    w("nice", &["-n", "--adjustment"], 0),
    w("time", &["-f", "-o", "--format", "--output"], 0),
    w("timeout", &["-s", "-k", "--signal", "--kill-after"], 1),
    w(
        "stdbuf",
        &["-i", "-o", "-e", "--input", "--output", "--error"],
        0,
    ),
    w(
        "sudo",
        &[
            "-u",
            "-g",
            "-h",
            "-p",
            "-C",
            "-D",
            "-r",
            "-t",
            "-U",
            "-T",
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--close-from",
            "--chdir",
            "--role",
            "--type",
            "--other-user",
            "--command-timeout",
        ],
        0,
    ),
    w("doas", &["-u", "-C", "-a"], 0),
    w("env", &["-u", "-C", "-P", "--unset", "--chdir"], 0),
    w(
        "xargs",
        &[
            "-I",
            "-L",
            "-n",
            "-P",
            "-s",
            "-d",
            "-E",
            "-a",
            "--arg-file",
            "--delimiter",
            "--max-args",
            "--max-lines",
            "--max-procs",
            "--max-chars",
        ],
        0,
    ),
];

/// Shells whose `-c` script is split too.
const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash", "ksh", "mksh", "ash"];
/// How many wrappers deep a command is unwrapped.
const MAX_WRAPPERS: usize = 16;

/// A script or command a simple command runs besides itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Inner {
    /// Shell text to split (`eval`, `bash -c`, `env -S`).
    Script(String),
    /// The words of a command (`find -exec`).
    Words(Vec<Word>),
    /// Shell text keel cannot know (`eval "$x"`): any command at all.
    Unknown,
}

/// A simple command with its wrappers taken off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Normal {
    /// The command name (basename) and arguments it runs.
    pub words: Vec<Word>,
    /// Its name is or holds an expansion, a glob or nothing: keel cannot read it.
    pub unreadable: bool,
    pub inner: Option<Inner>,
}

/// `words` (name first, assignments already left out) with wrappers and paths taken off.
pub(crate) fn normalize(words: &[Word]) -> Normal {
    let mut rest = words;
    let mut inner = None;
    for _ in 0..MAX_WRAPPERS {
        match unwrap(rest) {
            Step::Next(next) => rest = next,
            Step::Script(s) => {
                inner = Some(s);
                break;
            }
            Step::Stop => break,
        }
    }
    let mut words: Vec<Word> = rest.to_vec();
    if let Some(first) = words.first_mut() {
        let slash = first.0.iter().rposition(|t| *t == Tok::Ch('/'));
        if let Some(at) = slash {
            first.0.drain(..=at);
        }
    }
    let name = words.first().and_then(Word::literal);
    let unreadable = name.as_deref().is_none_or(str::is_empty);
    if inner.is_none() {
        inner = name.as_deref().and_then(|n| runs(n, &words));
    }
    Normal {
        words,
        unreadable,
        inner,
    }
}

fn basename(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

enum Step<'a> {
    /// The wrapped command.
    Next(&'a [Word]),
    /// The wrapper runs a script (`env -S`).
    Script(Inner),
    /// Not a wrapper, or a wrapper that runs nothing here.
    Stop,
}

/// One wrapper taken off `words`.
fn unwrap(words: &[Word]) -> Step<'_> {
    let Some(name) = words.first().and_then(Word::literal) else {
        return Step::Stop;
    };
    let base = basename(&name);
    let Some(wrapper) = WRAPPERS.iter().find(|w| w.name == base) else {
        return Step::Stop;
    };
    let mut i = 1;
    let mut operands = wrapper.operands;
    while let Some(word) = words.get(i) {
        let Some(lit) = word.literal() else { break };
        if lit == "--" {
            i += 1;
            continue;
        }
        if !lit.starts_with('-') || (lit == "-" && base != "env") {
            if matches!(base, "env" | "sudo" | "doas") && is_assignment(&lit) {
                i += 1;
                continue;
            }
            if operands > 0 {
                operands -= 1;
                i += 1;
                continue;
            }
            break;
        }
        if base == "command" && (lit.contains('v') || lit.contains('V')) {
            return Step::Stop;
        }
        if base == "env" && (lit.starts_with("-S") || lit.starts_with("--split-string")) {
            return Step::Script(split_string(&lit, words.get(i + 1)));
        }
        i += if takes_arg(&lit, wrapper.with_arg) {
            2
        } else {
            1
        };
    }
    match words.get(i..) {
        Some(next) if !next.is_empty() => Step::Next(next),
        _ => Step::Stop,
    }
}

/// Whether option word `lit` takes the next word as its argument.
fn takes_arg(lit: &str, with_arg: &[&str]) -> bool {
    if lit.starts_with("--") {
        return !lit.contains('=') && with_arg.contains(&lit);
    }
    // A cluster (`-cla NAME`): the option that takes an argument ends it, or holds it (`-n5`).
    for (at, c) in lit.char_indices().skip(1) {
        if with_arg.contains(&format!("-{c}").as_str()) {
            return at + c.len_utf8() == lit.len();
        }
    }
    false
}

/// `env -S STR`'s script: the rest of the option word, else the next word.
fn split_string(opt: &str, next: Option<&Word>) -> Inner {
    let attached = opt
        .strip_prefix("--split-string=")
        .or_else(|| opt.strip_prefix("-S"))
        .filter(|s| !s.is_empty());
    match attached {
        Some(s) => Inner::Script(s.to_string()),
        None => match next.and_then(Word::literal) {
            Some(s) => Inner::Script(s),
            None => Inner::Unknown,
        },
    }
}

/// What command `name` with `words` runs besides itself.
fn runs(name: &str, words: &[Word]) -> Option<Inner> {
    let args = words.get(1..).unwrap_or_default();
    if name == "eval" {
        if args.is_empty() {
            return None;
        }
        let text: Option<Vec<String>> = args.iter().map(Word::literal).collect();
        return Some(text.map_or(Inner::Unknown, |t| Inner::Script(t.join(" "))));
    }
    if SHELLS.contains(&name) {
        return shell_runs(args);
    }
    if name == "find" {
        let at = args.iter().position(|a| {
            a.literal()
                .is_some_and(|t| matches!(t.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir"))
        })?;
        let cmd: Vec<Word> = args[at + 1..]
            .iter()
            .take_while(|a| !matches!(a.literal().as_deref(), Some(";" | "+")))
            .cloned()
            .collect();
        return (!cmd.is_empty()).then_some(Inner::Words(cmd));
    }
    None
}

/// What a shell runs: its `-c` script; with no operand (or `-s`) a script read from stdin,
/// unknown; a script file's operand is left alone.
fn shell_runs(args: &[Word]) -> Option<Inner> {
    let option = |a: &Word, f: fn(&str) -> bool| a.literal().is_some_and(|t| f(&t));
    let flag = args.iter().position(|a| {
        option(a, |t| {
            t.starts_with('-') && !t.starts_with("--") && t.contains('c')
        })
    });
    if let Some(flag) = flag {
        let script = args.get(flag + 1)?;
        return Some(script.literal().map_or(Inner::Unknown, Inner::Script));
    }
    let stdin = args.iter().any(|a| {
        option(a, |t| {
            t.starts_with('-') && !t.starts_with("--") && t.contains('s')
        })
    }) || args.iter().all(|a| {
        option(a, |t| {
            t.starts_with('-') && t != "--version" && t != "--help"
        })
    });
    stdin.then_some(Inner::Unknown)
}

/// `NAME=value` (or `NAME+=value`).
pub(crate) fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let name = name.strip_suffix('+').unwrap_or(name);
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Names whose value makes programs load or run other code (a pager, an editor, a library, a
/// config directory, options read by an interpreter): never set aside for allow rules.
const RISKY_NAMES: &[&str] = &[
    "PATH",
    "IFS",
    "ENV",
    "BASH_ENV",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
    "HOME",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "BROWSER",
    "SHELL",
    "CDPATH",
    "GLOBIGNORE",
    "CC",
    "CXX",
    "LD",
    "MAKEFLAGS",
    "TERMINFO",
];
const RISKY_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "GIT_",
    "BASH_FUNC_",
    "NODE_",
    "NPM_",
    "YARN_",
    "PNPM_",
    "PYTHON",
    "PIP_",
    "PERL",
    "RUBY",
    "GEM_",
    "BUNDLE_",
    "JAVA_",
    "_JAVA",
    "JDK_",
    "LESS",
    "CARGO_",
    "RUSTC",
    "RUSTDOC",
    "XDG_",
    "SSH_",
    "SUDO_",
    "DOCKER_",
    "GCONV_",
    "MAVEN_",
    "GRADLE_",
    "GO",
    "CGO_",
    "DENO_",
    "BUN_",
    "COMPOSER_",
    "KUBE",
];
const RISKY_SUFFIXES: &[&str] = &[
    "_PAGER", "_EDITOR", "_OPTIONS", "_OPTS", "_COMMAND", "_ASKPASS", "_PATH", "_HOME", "_ENV",
    "_SHELL", "_PROGRAM", "_PRELOAD", "_CONFIG", "_FLAGS", "_WRAPPER", "_CMD",
];

/// Whether allow rules may look past assignment `text` (`FOO=1`): its value is plain text
/// and its name is not one of the risky ones.
pub(crate) fn harmless_assignment(text: &str) -> bool {
    let Some((name, value)) = text.split_once('=') else {
        return false;
    };
    let upper = name.to_ascii_uppercase();
    let risky = RISKY_NAMES.contains(&upper.as_str())
        || RISKY_PREFIXES.iter().any(|p| upper.starts_with(p))
        || RISKY_SUFFIXES.iter().any(|s| upper.ends_with(s));
    is_assignment(text) && !risky && !value.contains(['$', '`', '\\', '[', '*', '?', '~', '{'])
}
