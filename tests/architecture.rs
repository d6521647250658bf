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
}
