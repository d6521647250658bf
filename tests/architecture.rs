//! The kernel knows no front end (DESIGN §2): `src/kernel/**` must not import clap, ratatui,
//! crossterm, anstream, is-terminal, or keel's front-end, wire, output, cli or mode modules,
//! and must not write to stdout/stderr.

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
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        for f in FORBIDDEN {
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
fn the_check_catches_what_it_should() {
    assert_eq!(violations("use clap::Parser;").len(), 1);
    assert_eq!(violations("use crate::wire::events;").len(), 1);
    assert_eq!(violations("    println!(\"x\");").len(), 1);
    assert!(violations("// clap is mentioned in a comment").is_empty());
    assert!(violations("let clapping = 1;").is_empty());
}
