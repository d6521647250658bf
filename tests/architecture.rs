//! The kernel knows no front end (DESIGN §2): `src/kernel/**` must not import clap, ratatui,
//! crossterm, anstream, is-terminal, rmcp, or keel's front-end, wire, output, cli, mode or mcp modules,
//! and must not write to stdout/stderr. The host knows no transport (DESIGN §10.1):
//! `src/host/**` must not reach stdio, sockets, terminals, front ends or startup code.

use std::path::Path;

const FORBIDDEN: &[&str] = &[
    "clap",
    "ratatui",
    "crossterm",
    "anstream",
    "is_terminal",
    "IsTerminal",
    "crate::front",
    "crate::wire",
    "crate::output",
    "crate::cli",
    "crate::mode",
    "crate::app",
    "crate::setup",
    "crate::exit",
    "crate::error",
    // External tools come through `kernel::tool::external`; the kernel knows no MCP.
    "crate::mcp",
    "rmcp",
    "println!",
    "eprintln!",
    "print!(",
    "eprint!(",
    "std::io::stdout",
    "std::io::stderr",
    "io::stdout()",
    "io::stderr()",
    "std::process::exit",
];

/// What the host must not use: it is transport neutral.
const HOST_FORBIDDEN: &[&str] = &[
    "ratatui",
    "crossterm",
    "anstream",
    "is_terminal",
    "IsTerminal",
    "crate::front",
    "crate::output",
    "crate::cli",
    "crate::mode",
    "crate::app",
    "crate::setup",
    "crate::daemon",
    "tokio::net",
    "UnixStream",
    "UnixListener",
    "TcpStream",
    "io::stdin",
    "io::stdout",
    "io::stderr",
    "println!",
    "eprintln!",
    "print!(",
    "eprint!(",
    "std::process::exit",
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The violations in one file's text (code only: `//` comments are ignored).
fn violations(text: &str) -> Vec<String> {
    violations_of(text, FORBIDDEN)
}

fn violations_of(text: &str, forbidden: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for f in forbidden {
            let hit = if f.chars().all(|c| c.is_alphanumeric() || c == '_') {
                code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .any(|w| w == *f)
            } else {
                code.contains(f)
            };
            if hit {
                found.push(format!("line {}: `{f}` in {}", n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn kernel_imports_no_front_end() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/kernel"),
        &mut files,
    );
    assert!(files.len() > 10, "the kernel sources were not found");
    let mut bad = Vec::new();
    for f in files {
        for v in violations(&std::fs::read_to_string(&f).unwrap()) {
            bad.push(format!("{}: {v}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "the kernel reaches a front end:\n{}",
        bad.join("\n")
    );
}

#[test]
fn host_knows_no_transport() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/host"),
        &mut files,
    );
    assert!(files.len() >= 5, "the host sources were not found");
    let mut bad = Vec::new();
    for f in files {
        for v in violations_of(&std::fs::read_to_string(&f).unwrap(), HOST_FORBIDDEN) {
            bad.push(format!("{}: {v}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "the host reaches a transport:\n{}",
        bad.join("\n")
    );
}

/// What a session's side (the server, the client, the front ends, the session's setup) must not
/// use: a session is opened from its typed spec, never from a command line (issue 45).
const NO_COMMAND_LINE: &[&str] = &["clap", "crate::cli::", "crate::cli;", "cli::args"];

#[test]
fn no_command_line_crosses_into_a_session() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut bad = Vec::new();
    for dir in ["daemon", "client", "front", "setup"] {
        let mut files = Vec::new();
        rust_files(&src.join(dir), &mut files);
        assert!(!files.is_empty(), "src/{dir} was not found");
        for f in files {
            for v in violations_of(&std::fs::read_to_string(&f).unwrap(), NO_COMMAND_LINE) {
                bad.push(format!("{}: {v}", f.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "the command line reaches a session's side:\n{}",
        bad.join("\n")
    );
    assert_eq!(violations_of("use clap::Parser;", NO_COMMAND_LINE).len(), 1);
    assert_eq!(
        violations_of("crate::cli::args::session_args(x)", NO_COMMAND_LINE).len(),
        2
    );
    assert!(violations_of("use crate::client::dial::Dial;", NO_COMMAND_LINE).is_empty());
}

/// What `src/wire/socket` must not use: it holds the socket's contract as data (names, limits,
/// the rules and their errors); the client and the daemon do the I/O (issue 45).
const SOCKET_FORBIDDEN: &[&str] = &[
    "std::fs",
    "fs::",
    "File",
    "OpenOptions",
    "DirBuilder",
    "std::process",
    "std::thread",
    "nix",
    "rustix",
    "libc",
    "tokio",
    "UnixStream",
    "UnixListener",
    "symlink_metadata",
    "std::path::absolute",
];

#[test]
fn wire_socket_holds_only_data() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/wire/socket"),
        &mut files,
    );
    assert!(files.len() >= 3, "the socket sources were not found");
    let mut bad = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        // Unit tests may make files to check the rules against.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for v in violations_of(code, SOCKET_FORBIDDEN) {
            bad.push(format!("{}: {v}", f.display()));
        }
    }
    assert!(
        bad.is_empty(),
        "src/wire/socket does I/O:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_check_catches_what_it_should() {
    assert_eq!(violations("use clap::Parser;").len(), 1);
    assert_eq!(violations("use crate::wire::events;").len(), 1);
    assert_eq!(violations("use rmcp::model::Tool;").len(), 1);
    assert_eq!(violations("    println!(\"x\");").len(), 1);
    assert!(violations("// clap is mentioned in a comment").is_empty());
    assert!(violations("let clapping = 1;").is_empty());
    assert_eq!(
        violations_of("use tokio::net::UnixStream;", HOST_FORBIDDEN).len(),
        2
    );
    assert_eq!(
        violations_of("use crate::front::tui;", HOST_FORBIDDEN).len(),
        1
    );
    assert_eq!(
        violations_of("    nix::unistd::setsid()", SOCKET_FORBIDDEN).len(),
        1
    );
    assert_eq!(
        violations_of("use std::fs::{File, OpenOptions};", SOCKET_FORBIDDEN).len(),
        4
    );
    assert!(violations_of("pub const DAEMON_LOCK: &str", SOCKET_FORBIDDEN).is_empty());
}

/// The layers (DESIGN §2), low to high, and what each may import of keel: an allow-list per
/// layer. A module's layer is its top directory or file under `src/`, except `cli/args.rs` (the
/// run's flags, a leaf: only the command line reads it; sessions are opened from the typed
/// `SessionSpec` in `wire`).
const LAYERS: &[(&str, &[&str])] = &[
    ("kernel", &[]),
    ("exit", &[]),
    ("text", &[]),
    ("prompts", &[]),
    ("skills", &[]),
    ("cli::args", &[]),
    // The settings files (DESIGN §13): read and merged, never the command line or a session
    // (their values are the kernel's types: a thinking level).
    ("settings", &["kernel"]),
    // Agent definitions (DESIGN §17): files read into the kernel's definitions.
    ("agents", &["kernel", "skills", "settings"]),
    ("output", &["exit"]),
    // Worktrees (DESIGN §20): git's side of a session's own checkout.
    ("worktree", &["kernel"]),
    ("error", &["exit", "wire", "kernel"]),
    ("signals", &["error", "exit"]),
    ("mentions", &["kernel", "error"]),
    ("schedule", &["kernel", "wire"]),
    ("mcp", &["kernel"]),
    ("mode", &["error", "output", "worktree"]),
    ("wire", &["kernel"]),
    // `settings`: an "always allow" answer adds its rule to the project's settings file.
    (
        "host",
        &[
            "kernel", "wire", "prompts", "skills", "text", "settings", "worktree",
        ],
    ),
    // What a run reports (its summary, exit and result line), read from its wire events.
    ("report", &["kernel", "wire", "exit"]),
    (
        "setup",
        &[
            "kernel", "wire", "host", "mcp", "skills", "agents", "prompts", "mentions", "text",
            "settings", "mode", "error", "exit", "output", "worktree",
        ],
    ),
    // The server: no front end, no client, no command of the command line.
    (
        "daemon",
        &[
            "kernel", "wire", "host", "setup", "schedule", "signals", "mode", "error", "exit",
            "output", "text", "report", "worktree",
        ],
    ),
    // The client: never the server.
    (
        "client",
        &[
            "kernel", "wire", "host", "setup", "signals", "mode", "error", "exit", "output",
        ],
    ),
    // Front ends: the client, never the server's internals or the command line's commands.
    (
        "front",
        &[
            "kernel", "wire", "host", "client", "setup", "mcp", "mentions", "mode", "output",
            "error", "exit", "signals", "text", "prompts", "skills", "agents", "schedule",
            "report", "worktree",
        ],
    ),
    // `keel web` (DESIGN §21): a front end served over HTTP, a client of the daemon; the HTML
    // export's renderer is the host's.
    (
        "web",
        &["wire", "host", "client", "mode", "output", "error", "exit"],
    ),
    // The command line: everything but the composition root.
    ("cli", &["*"]),
];

/// The layer of a source file (a path relative to `src/`), `None` for the crate roots and the
/// composition root (`app`), which may use everything.
fn layer_of(rel: &str) -> Option<&'static str> {
    if rel == "cli/args.rs" {
        return Some("cli::args");
    }
    let top = rel.split('/').next()?.trim_end_matches(".rs");
    LAYERS.iter().map(|(l, _)| *l).find(|l| *l == top)
}

/// The layer an in-crate path names (`crate::cli::args::Cli` → `cli::args`).
fn target_of(path: &str) -> String {
    if path.starts_with("cli::args") {
        return "cli::args".into();
    }
    path.split("::").next().unwrap_or("").to_string()
}

/// Every `crate::…` path in a file's code (comments and `#[cfg(test)]` modules left out),
/// `use crate::{a::b, c}` groups expanded one level.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let code = match text.find("#[cfg(test)]") {
        Some(i)
            if text[i..]
                .lines()
                .take(4)
                .any(|l| l.starts_with("mod tests")) =>
        {
            &text[..i]
        }
        _ => text,
    };
    let mut found = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + 7..];
            if let Some(group) = after.strip_prefix('{') {
                let inner = group.split('}').next().unwrap_or("");
                for part in inner.split(',') {
                    found.push((n + 1, part.trim().to_string()));
                }
            } else {
                let end = after
                    .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                    .unwrap_or(after.len());
                found.push((n + 1, after[..end].to_string()));
            }
            rest = after;
        }
    }
    found
}

/// The imports of `text` (a file of layer `layer`) that its layer does not allow.
fn layer_violations(layer: &str, text: &str) -> Vec<String> {
    let allowed = LAYERS
        .iter()
        .find(|(l, _)| *l == layer)
        .map(|(_, a)| *a)
        .unwrap_or(&[]);
    let own = layer.split("::").next().unwrap_or(layer);
    crate_paths(text)
        .into_iter()
        .filter(|(_, p)| !p.is_empty())
        .filter_map(|(n, p)| {
            let target = target_of(&p);
            let inside = target == own && layer != "cli::args";
            let anything = allowed == ["*"] && target != "app";
            let ok = inside || anything || allowed.contains(&target.as_str());
            (!ok).then(|| format!("line {n}: {layer} imports crate::{p}"))
        })
        .collect()
}

#[test]
fn every_layer_imports_only_the_layers_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut bad = Vec::new();
    let mut unplaced = Vec::new();
    for f in &files {
        let rel = f.strip_prefix(&src).unwrap().to_string_lossy().to_string();
        if ["main.rs", "lib.rs", "app.rs"].contains(&rel.as_str()) {
            continue;
        }
        let Some(layer) = layer_of(&rel) else {
            unplaced.push(rel);
            continue;
        };
        for v in layer_violations(layer, &std::fs::read_to_string(f).unwrap()) {
            bad.push(format!("src/{rel}: {v}"));
        }
    }
    assert!(
        unplaced.is_empty(),
        "modules with no layer in LAYERS: {unplaced:?}"
    );
    assert!(
        bad.is_empty(),
        "imports against the layering:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_layer_check_catches_what_it_should() {
    assert_eq!(layer_of("daemon/open.rs"), Some("daemon"));
    assert_eq!(layer_of("cli/args.rs"), Some("cli::args"));
    assert_eq!(layer_of("cli/mod.rs"), Some("cli"));
    assert_eq!(layer_of("app.rs"), None);
    // The server reaching the client, a front end or a command; the client reaching the server.
    assert_eq!(
        layer_violations("daemon", "use crate::client::dial::Dial;").len(),
        1
    );
    assert_eq!(
        layer_violations("daemon", "use crate::{front::json, host::Host};").len(),
        1
    );
    assert_eq!(
        layer_violations("daemon", "x(crate::cli::Command::Ps)").len(),
        1
    );
    assert_eq!(
        layer_violations("daemon", "use crate::cli::args::Cli;").len(),
        1
    );
    assert_eq!(
        layer_violations("client", "use crate::daemon::server::Shared;").len(),
        1
    );
    assert_eq!(
        layer_violations("front", "crate::daemon::open::start(").len(),
        1
    );
    assert_eq!(layer_violations("wire", "use crate::host::Host;").len(), 1);
    assert_eq!(
        layer_violations("cli::args", "use crate::cli::Keel;").len(),
        1
    );
    assert!(layer_violations("host", "// crate::front is only named here").is_empty());
    assert!(layer_violations("host", "use crate::host::stream::Item;").is_empty());
    assert!(layer_violations("cli", "use crate::daemon::run;").is_empty());
    assert_eq!(layer_violations("cli", "use crate::app::main;").len(), 1);
}
