//! The documentation that is generated from the code, and the links between the pages
//! (issue 35): `docs/keel.1` is `keel man`, `docs/settings.schema.json` is `keel config
//! schema`, `docs/protocol-reference.md` is rendered from the typed protocol in `keel::wire`,
//! the bash completions load, and every relative link and `#anchor` in README.md and docs/
//! resolves. A generated file that is not current fails its test; `KEEL_UPDATE_DOCS=1 cargo
//! test --locked --test all docs::` rewrites them.

use std::collections::HashSet;
use std::path::PathBuf;

use crate::common::support::{root, Sandbox};

/// Compares `rendered` with the committed file `rel` (from the crate root), or writes it when
/// `KEEL_UPDATE_DOCS` is set.
fn check_generated(rel: &str, rendered: &str) {
    let path = root().join(rel);
    if std::env::var_os("KEEL_UPDATE_DOCS").is_some() {
        std::fs::write(&path, rendered).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == rendered,
        "{rel} is not what the code generates: regenerate it with \
         KEEL_UPDATE_DOCS=1 cargo test --locked --test all docs::"
    );
}

/// The stdout of `keel ARGS`, which must succeed with nothing on stderr.
fn keel_stdout(args: &[&str]) -> String {
    let run = Sandbox::new().run(args);
    assert_eq!(run.code, 0, "keel {}: {run}", args.join(" "));
    assert_eq!(run.stderr, "", "keel {}", args.join(" "));
    run.stdout
}

#[test]
fn the_man_page_in_docs_is_keel_man() {
    let page = keel_stdout(&["man"]);
    assert!(page.contains(".TH keel 1"), "{page}");
    for command in ["daemon", "schedule", "rewind", "completions", "man"] {
        assert!(
            page.contains(command),
            "`{command}` missing from the man page"
        );
    }
    // One page, every command in it: it names no other page (none is shipped), and a
    // subcommand's options are on it.
    assert!(!page.contains("(1)"), "a page that is not shipped is named");
    assert!(page.contains(".SS \"keel daemon run\""), "{page}");
    assert!(page.contains("\\-\\-idle\\-exit"), "{page}");
    check_generated("docs/keel.1", &page);
}

/// `man -l docs/keel.1` renders it (skipped, saying so, where man-db is not installed).
#[test]
fn man_renders_the_man_page() {
    let Ok(out) = std::process::Command::new("man")
        .args(["-l", "-"])
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "80")
        .stdin(std::fs::File::open(root().join("docs/keel.1")).unwrap())
        .output()
    else {
        crate::common::support::skipped(
            "the man page render: no `man` on PATH (apt-get install man-db)",
        );
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "man -l: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    for section in ["NAME", "SYNOPSIS", "OPTIONS", "COMMANDS"] {
        assert!(text.contains(section), "no {section} in:\n{text}");
    }
    assert!(text.contains("--output-schema"), "{text}");
    assert!(text.contains("keel daemon run"), "{text}");
}

#[test]
fn the_bash_completions_pass_bash_n_and_register_keel() {
    let script = keel_stdout(&["completions", "bash"]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("keel.bash");
    std::fs::write(&file, &script).unwrap();
    let syntax = std::process::Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        syntax.status.success(),
        "bash -n: {}",
        String::from_utf8_lossy(&syntax.stderr)
    );
    let loaded = std::process::Command::new("bash")
        .arg("--norc")
        .arg("-c")
        .arg("source \"$1\" && complete -p keel")
        .arg("bash")
        .arg(&file)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&loaded.stdout);
    assert!(
        loaded.status.success(),
        "{}",
        String::from_utf8_lossy(&loaded.stderr)
    );
    assert!(said.trim_end().ends_with("-F _keel keel"), "{said}");
    // The completion function offers the subcommands after `keel `.
    let words = std::process::Command::new("bash")
        .arg("--norc")
        .arg("-c")
        .arg(
            "source \"$1\"; COMP_WORDS=(keel ''); COMP_CWORD=1; COMP_LINE='keel '; COMP_POINT=5; \
             _keel keel '' keel; printf '%s\\n' \"${COMPREPLY[@]}\"",
        )
        .arg("bash")
        .arg(&file)
        .output()
        .unwrap();
    let offered = String::from_utf8_lossy(&words.stdout);
    for sub in ["daemon", "attach", "rewind", "completions"] {
        assert!(
            offered.lines().any(|l| l == sub),
            "`{sub}` not offered:\n{offered}"
        );
    }
}

#[test]
fn zsh_and_fish_completions_name_keel() {
    assert!(keel_stdout(&["completions", "zsh"]).starts_with("#compdef keel"));
    assert!(keel_stdout(&["completions", "fish"]).contains("complete -c keel"));
    let run = Sandbox::new().run(&["completions", "tcsh"]);
    assert_eq!(run.code, 2, "{run}");
}

#[test]
fn the_settings_schema_in_docs_is_keel_config_schema() {
    let schema = keel_stdout(&["config", "schema"]);
    let value: serde_json::Value = serde_json::from_str(&schema).unwrap();
    assert_eq!(value["title"], "keel settings");
    check_generated("docs/settings.schema.json", &schema);
}

#[test]
fn the_protocol_reference_is_generated_from_the_wire_types() {
    check_generated("docs/protocol-reference.md", &protocol_reference());
}

/// docs/protocol-reference.md: the method, notification, command and event tables, each
/// from the declarations in `keel::wire`.
fn protocol_reference() -> String {
    use keel::wire::events::{CompactionReason, ErrorKind, Outcome, UiMethod, WireEvent, RPC_ONLY};
    use keel::wire::jsonrpc as j;
    use keel::wire::pi::CommandName;
    use keel::wire::protocol::table;

    let mut p = String::from(
        "# Protocol reference (generated)\n\n\
         <!-- Generated from the types in src/wire/ by tests/docs.rs \
         (the_protocol_reference_is_generated_from_the_wire_types); do not edit. Regenerate \
         with KEEL_UPDATE_DOCS=1 cargo test --locked --test all docs:: -->\n\n\
         The names below are read from keel's typed protocol (`src/wire/`), the one declaration \
         the server and every client share, so this page cannot drift from the code. What the \
         fields mean, and examples, are in [protocols.md](protocols.md), [rpc.md](rpc.md), \
         [daemon-protocol.md](daemon-protocol.md) and [acp.md](acp.md).\n\n",
    );
    p.push_str(&format!(
        "## Daemon protocol v{} methods\n\nA request whose method is not in this table is a \
         pi command (next section) with `sessionId` added to its params.\n\n\
         | method | params | result | what it does |\n|---|---|---|---|\n",
        keel::wire::protocol::PROTOCOL
    ));
    for m in table::methods() {
        p.push_str(&format!(
            "| `{}` | `{}` | `{}` | {} |\n",
            m.name, m.params, m.result, m.summary
        ));
    }
    p.push_str(
        "\n## Session spec (`wire::protocol::spec::SessionSpec`)\n\n`session/open`'s `spec`, a \
         scheduled task's, a snapshot's `openSpec`: every field may be left out (the settings \
         files and keel's defaults decide). See [daemon-protocol.md](daemon-protocol.md#the-session-spec).\n\n\
         | field | asks for |\n|---|---|\n",
    );
    for (name, what) in keel::wire::protocol::spec::SessionSpec::FIELDS {
        p.push_str(&format!("| `{name}` | {} |\n", what.replace('|', "\\|")));
    }
    p.push_str("\n## Daemon notifications\n\n| method | params | when |\n|---|---|---|\n");
    for n in table::notifications() {
        p.push_str(&format!(
            "| `{}` | `{}` | {} |\n",
            n.name, n.params, n.summary
        ));
    }
    p.push_str(
        "\n## pi RPC commands\n\nThe `type` of an RPC-mode request (`keel --mode rpc`), and \
         the `method` of the same command over the daemon protocol, in pi's order \
         (`wire::pi::CommandName`):\n\n",
    );
    for c in CommandName::ALL {
        p.push_str(&format!("- `{}`\n", c.as_str()));
    }
    p.push_str(
        "\n## Event types\n\nThe `type` of every event line (JSON mode, RPC mode, the \
         daemon's `session/event`), in declaration order (`wire::events::WireEvent`). \
         \"RPC only\" types are left out of JSON mode's stdout.\n\n\
         | type | where |\n|---|---|\n",
    );
    for kind in WireEvent::KINDS.iter().filter(|k| **k != "other") {
        let r#where = match RPC_ONLY.contains(kind) {
            true => "RPC only",
            false => "JSON and RPC",
        };
        p.push_str(&format!("| `{kind}` | {where} |\n"));
    }
    let words = |p: &mut String, title: &str, list: Vec<String>| {
        p.push_str(&format!("\n## {title}\n\n"));
        let items: Vec<String> = list.iter().map(|w| format!("`{w}`")).collect();
        p.push_str(&items.join(", "));
        p.push('\n');
    };
    words(
        &mut p,
        "`agent_settled` outcomes",
        Outcome::KNOWN.iter().map(|w| w.to_string()).collect(),
    );
    words(
        &mut p,
        "Error kinds (`error.kind`)",
        ErrorKind::KNOWN.iter().map(|w| w.to_string()).collect(),
    );
    words(
        &mut p,
        "Compaction reasons",
        CompactionReason::KNOWN
            .iter()
            .map(|w| w.to_string())
            .collect(),
    );
    words(
        &mut p,
        "Dialog methods (`extension_ui_request`)",
        UiMethod::KNOWN.iter().map(|w| w.to_string()).collect(),
    );
    p.push_str("\n## JSON-RPC error codes (daemon protocol, ACP)\n\n| code | name |\n|---|---|\n");
    for (code, name) in [
        (j::PARSE_ERROR, "parse error"),
        (j::INVALID_REQUEST, "invalid request"),
        (j::METHOD_NOT_FOUND, "unknown method"),
        (j::INVALID_PARAMS, "bad params"),
        (j::INTERNAL_ERROR, "internal error"),
        (j::COMMAND_FAILED, "command failed"),
        (j::VERSION_MISMATCH, "version mismatch"),
        (j::HELLO_FIRST, "hello first"),
        (j::UNKNOWN_SESSION, "unknown session"),
        (j::SESSION_BUSY, "session busy"),
        (j::ALREADY_ANSWERED, "already answered"),
        (
            j::SANDBOXED_PEER,
            "sandboxed peer (the daemon closes the connection)",
        ),
        (j::REQUEST_CANCELLED, "request cancelled (ACP)"),
        (j::RESOURCE_NOT_FOUND, "resource not found (ACP)"),
    ] {
        p.push_str(&format!("| {code} | {name} |\n"));
    }
    p
}

// ---- links ----

/// Every relative link and `#anchor` of the documentation resolves.
#[test]
fn every_relative_link_and_anchor_in_the_docs_resolves() {
    let root = root();
    let mut pages = vec![root.join("README.md"), root.join("CHANGELOG.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let broken = broken_links(&pages);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The checker itself finds a missing file, a missing anchor and a missing anchor in another
/// page, and accepts GitHub's slugs (punctuation dropped, `-1` for a repeated heading).
#[test]
fn the_link_checker_finds_broken_links() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.md");
    let b = dir.path().join("b.md");
    std::fs::write(
        &b,
        "# Sandbox\n\n## `--sandbox` modes: on/off\n\n## Notes\n\n## Notes\n\n```sh\n# not a heading\n```\n",
    )
    .unwrap();
    std::fs::write(
        &a,
        "# A\n\n[ok](b.md#--sandbox-modes-onoff) [ok](b.md#notes-1) [ok](#a) [ok](https://x.org/#y)\n\
         `[code](nowhere.md)`\n\n\
         [gone](missing.md) [bad](#nope) [bad2](b.md#not-a-heading) [bad3](b.md#notes-2)\n",
    )
    .unwrap();
    let broken = broken_links(&[a, b]);
    let targets: Vec<&str> = broken
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap())
        .collect();
    assert_eq!(
        targets,
        ["missing.md", "#nope", "b.md#not-a-heading", "b.md#notes-2"],
        "{broken:?}"
    );
}

/// `file: target` for each relative link of `pages` that does not resolve.
fn broken_links(pages: &[PathBuf]) -> Vec<String> {
    let mut broken = Vec::new();
    for page in pages {
        let text = std::fs::read_to_string(page).unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = match file {
                "" => page.clone(),
                f => page.parent().unwrap().join(f),
            };
            let ok = dest.exists()
                && match anchor {
                    None => true,
                    Some(a) => {
                        dest.extension().is_some_and(|e| e == "md")
                            && anchors(&std::fs::read_to_string(&dest).unwrap()).contains(a)
                    }
                };
            if !ok {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    broken
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fence: Option<&str> = None;
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        match fence {
            Some(f) if t.starts_with(f) => fence = None,
            Some(_) => {}
            None if t.starts_with("```") || t.starts_with("~~~") => {
                let marker: String = t.chars().take_while(|c| *c == '`' || *c == '~').collect();
                fence = Some(&t[..marker.len()]);
            }
            None => out.push(line),
        }
    }
    out
}

/// `line` without its inline code spans.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let after = &rest[start + ticks..];
        let close = "`".repeat(ticks);
        match after.find(&close) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                rest = after;
                break;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of the markdown links (`[text](target)`, `[ref]: target`) of `text`.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let line = without_code(line);
        let t = line.trim_start();
        if t.starts_with('[') {
            if let Some((_, target)) = t.split_once("]: ") {
                out.push(target.split_whitespace().next().unwrap_or("").to_string());
                continue;
            }
        }
        let mut rest = line.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let end = after.find(')').unwrap_or(after.len());
            let target = after[..end].split_whitespace().next().unwrap_or("");
            out.push(target.trim_matches(|c| c == '<' || c == '>').to_string());
            rest = &after[end..];
        }
    }
    out
}

/// The anchors GitHub makes for the headings of `text` (and explicit `<a id>`/`<a name>`).
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut counts: std::collections::HashMap<String, usize> = Default::default();
    for line in prose(text) {
        for attr in ["<a id=\"", "<a name=\""] {
            if let Some(i) = line.find(attr) {
                let rest = &line[i + attr.len()..];
                seen.insert(rest[..rest.find('"').unwrap_or(0)].to_string());
            }
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(line[hashes..].trim());
        let n = counts.entry(base.clone()).or_insert(0);
        let id = match *n {
            0 => base.clone(),
            k => format!("{base}-{k}"),
        };
        *n += 1;
        seen.insert(id);
    }
    seen
}

/// GitHub's heading slug: the heading's text (links reduced to their text, code and emphasis
/// marks dropped) lower-cased, every character but letters, digits, `-`, `_` and spaces
/// dropped, spaces made `-`.
fn slug(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading;
    // [text](url) → text
    while let Some(i) = rest.find('[') {
        match rest[i..].find("](") {
            Some(j) => {
                text.push_str(&rest[..i]);
                text.push_str(&rest[i + 1..i + j]);
                let after = &rest[i + j + 2..];
                rest = &after[after.find(')').map_or(after.len(), |e| e + 1)..];
            }
            None => break,
        }
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[test]
fn slugs_follow_githubs_rules() {
    assert_eq!(slug("Set up on a new machine"), "set-up-on-a-new-machine");
    assert_eq!(slug("`@file` mentions"), "file-mentions");
    assert_eq!(
        slug("Cursors: replay or snapshot, never a silent gap"),
        "cursors-replay-or-snapshot-never-a-silent-gap"
    );
    assert_eq!(
        slug("JSON-RPC framing (daemon, ACP)"),
        "json-rpc-framing-daemon-acp"
    );
    assert_eq!(
        slug("The event journal (NATS JetStream)"),
        "the-event-journal-nats-jetstream"
    );
    assert_eq!(slug("See [the docs](x.md) now"), "see-the-docs-now");
    assert_eq!(slug("keel_home and **bold**"), "keel_home-and-bold");
}
