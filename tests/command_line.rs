//! The one command line (issue 28, point 4): every subcommand in `keel --help`, `keel help
//! [CMD]` as help, help for every subcommand, a run as the default command (a prompt may start
//! with a subcommand's name), and `keel debug`'s commands as clap subcommands.

use serde_json::Value;

use crate::common::support::{fixture, scripted_args, Sandbox};

const SUBCOMMANDS: [&str; 9] = [
    "daemon",
    "ps",
    "attach",
    "schedule",
    "mcp",
    "debug",
    "man",
    "completions",
    "help",
];

/// The user message a JSON-mode scripted run was sent.
fn prompt_sent(sb: &Sandbox, args: &[&str]) -> String {
    let script = fixture("hello.json");
    let mut all = scripted_args(&["--json", "--no-session"], &script, &[]);
    all.extend_from_slice(args);
    let run = sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
    let lines: Vec<Value> = run.stdout_lines();
    let user = lines
        .iter()
        .find(|l| l["type"] == "message_start" && l["message"]["role"] == "user")
        .unwrap_or_else(|| panic!("no user message in {run}"));
    user["message"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn keel_help_lists_every_subcommand_and_the_run_flags() {
    let run = Sandbox::new().run(&["--help"]);
    assert_eq!(run.code, 0, "{run}");
    let commands = run
        .stdout
        .split("\nCommands:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no Commands section in {run}"));
    for name in SUBCOMMANDS {
        let line = commands
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("`{name}` missing from keel --help:\n{}", run.stdout));
        assert!(
            line.split_whitespace().count() > 1,
            "`{name}` has no help line"
        );
    }
    for flag in ["--print", "--json", "--provider", "[PROMPT]..."] {
        assert!(run.stdout.contains(flag), "{flag} missing from {run}");
    }
}

#[test]
fn keel_help_is_help_not_a_prompt() {
    let sb = Sandbox::new();
    let long = sb.run(&["--help"]);
    let help = sb.run(&["help"]);
    assert_eq!(help.code, 0, "{help}");
    assert_eq!(help.stderr, "");
    assert_eq!(help.stdout, long.stdout);
    for name in SUBCOMMANDS.into_iter().filter(|n| *n != "help") {
        let run = sb.run(&["help", name]);
        assert_eq!(run.code, 0, "keel help {name}: {run}");
        assert!(
            run.stdout.contains(&format!("Usage: keel {name}")),
            "keel help {name}: {run}"
        );
    }
    let nested = sb.run(&["help", "daemon", "status"]);
    assert_eq!(nested.code, 0, "{nested}");
    nested.assert_stdout("Usage: keel daemon status");
    let help_help = sb.run(&["help", "help"]);
    assert_eq!(help_help.code, 0, "{help_help}");
    assert!(help_help.stdout.contains("Usage: keel help"), "{help_help}");
    let unknown = sb.run(&["help", "nosuch"]);
    assert_eq!(unknown.code, 2, "{unknown}");
    assert!(unknown.stderr.contains("nosuch"), "{unknown}");
}

#[test]
fn every_subcommand_answers_help_with_exit_0() {
    let sb = Sandbox::new();
    let nested: [&[&str]; 4] = [
        &["debug", "prompt"],
        &["daemon", "status"],
        &["schedule", "add"],
        &["mcp", "list"],
    ];
    // clap's `help` takes command names only: `keel help help` is its help.
    let singles = SUBCOMMANDS.map(|s| [s]);
    let singles = singles.iter().filter(|s| s[0] != "help");
    for words in singles.map(|s| &s[..]).chain(nested) {
        let mut args = words.to_vec();
        args.push("--help");
        let run = sb.run(&args);
        assert_eq!(run.code, 0, "keel {}: {run}", args.join(" "));
        assert_eq!(run.stderr, "", "keel {}", args.join(" "));
        assert!(
            run.stdout
                .contains(&format!("Usage: keel {}", words.join(" "))),
            "keel {}: {run}",
            args.join(" ")
        );
    }
}

#[test]
fn an_unknown_debug_command_is_a_usage_error_naming_the_valid_ones() {
    let run = Sandbox::new().run(&["debug", "promt"]);
    assert_eq!(run.code, 2, "{run}");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.starts_with("error: "), "{run}");
    assert!(run.stderr.contains("'promt'"), "{run}");
    assert!(run.stderr.contains("prompt"), "{run}");
    assert!(run.stderr.contains("Usage: keel debug"), "{run}");
    let bare = Sandbox::new().run(&["debug"]);
    assert_eq!(bare.code, 2, "{bare}");
    assert!(bare.stderr.contains("prompt"), "{bare}");
}

/// `keel debug prompt` and `keel debug sandbox` list only the run flags that shape what they
/// print (not all of a run's), and refuse the others instead of ignoring them silently.
#[test]
fn debug_commands_list_and_take_only_the_flags_that_apply() {
    let sb = Sandbox::new();
    let help = sb.run(&["debug", "prompt", "--help"]);
    assert_eq!(help.code, 0, "{help}");
    assert!(help.stdout.contains("--system-prompt"), "{help}");
    assert!(help.stdout.contains("--tools"), "{help}");
    for other in ["--max-turns", "--continue", "--sandbox ", "[PROMPT]"] {
        assert!(!help.stdout.contains(other), "{other}: {help}");
    }
    let help = sb.run(&["debug", "sandbox", "--help"]);
    assert!(help.stdout.contains("--sandbox <MODE>"), "{help}");
    assert!(!help.stdout.contains("--model"), "{help}");
    let refused = sb.run(&["debug", "prompt", "--max-turns", "3"]);
    assert_eq!(refused.code, 2, "{refused}");
    assert!(
        refused
            .stderr
            .contains("--max-turns does not apply to `keel debug prompt`"),
        "{refused}"
    );
    assert!(refused.stderr.contains("--system-prompt"), "{refused}");
    let refused = sb.run(&["debug", "sandbox", "--model", "x"]);
    assert_eq!(refused.code, 2, "{refused}");
    refused.assert_stderr("--model does not apply");
    let words = sb.run(&["debug", "sandbox", "hello"]);
    assert_eq!(words.code, 2, "{words}");
    assert!(words.stderr.contains("PROMPT does not apply"), "{words}");
}

/// A word that names a subcommand is one only as the first argument: after a flag, after `--`,
/// or inside a quoted prompt it is part of the prompt.
#[test]
fn a_prompt_may_start_with_a_subcommand_name() {
    let sb = Sandbox::new();
    assert_eq!(prompt_sent(&sb, &["--", "ps"]), "ps");
    assert_eq!(prompt_sent(&sb, &["ps aux"]), "ps aux");
    assert_eq!(prompt_sent(&sb, &["-q", "help", "me"]), "help me");
    assert_eq!(prompt_sent(&sb, &["daemon"]), "daemon");
    assert_eq!(
        prompt_sent(&sb, &["fix", "the", "daemon"]),
        "fix the daemon"
    );
    assert_eq!(prompt_sent(&sb, &["fix the daemon"]), "fix the daemon");
    // Print mode, the flag first, as people type it.
    let script = fixture("hello.json");
    let sc = scripted_args(&["--no-session"], &script, &[]);
    for args in [
        &["-p", "--", "ps"][..],
        &["-p", "ps aux"],
        &["-p", "ps"],
        &["-p", "debug", "prompt"],
    ] {
        // The scripted provider's flags go last, but before a `--`.
        let cut = args.iter().position(|a| *a == "--").unwrap_or(args.len());
        let mut all = args[..cut].to_vec();
        all.extend_from_slice(&sc);
        all.extend_from_slice(&args[cut..]);
        let run = sb.run(&all);
        assert_eq!(run.code, 0, "keel {}: {run}", args.join(" "));
        assert_eq!(run.stdout, "Hello from keel!\n");
    }
    // The prompt first, flags after it, still a run.
    let mut all = vec!["fix the daemon", "-p"];
    all.extend_from_slice(&sc);
    let run = sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(run.stdout, "Hello from keel!\n");
}

#[test]
fn a_usage_error_of_a_json_run_still_writes_its_result_line() {
    let run = Sandbox::new().run(&["--json", "--bogus", "hi"]);
    assert_eq!(run.code, 2, "{run}");
    let line: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(line["type"], "result", "{run}");
    assert_eq!(line["error"]["kind"], "usage", "{run}");
    // After `--`, `--json` is a prompt word: no result line.
    let run = Sandbox::new().run(&["-p", "--bogus", "--", "--json"]);
    assert_eq!(run.code, 2, "{run}");
    assert_eq!(run.stdout, "");
}

/// `keel help --help` (and `-h`, and a subcommand's `help --help`) is the help of `help`, as
/// git and cargo answer it, not a usage error: clap's own `help` takes command names only.
#[test]
fn help_given_help_prints_the_help_of_help() {
    let sb = Sandbox::new();
    let help_help = sb.run(&["help", "help"]);
    assert_eq!(help_help.code, 0, "{help_help}");
    for args in [
        &["help", "--help"][..],
        &["help", "-h"],
        &["help", "daemon", "--help"],
    ] {
        let run = sb.run(args);
        assert_eq!(run.code, 0, "keel {}: {run}", args.join(" "));
        assert_eq!(run.stderr, "", "keel {}", args.join(" "));
        assert_eq!(run.stdout, help_help.stdout, "keel {}", args.join(" "));
    }
    let nested = sb.run(&["daemon", "help", "--help"]);
    assert_eq!(nested.code, 0, "{nested}");
    nested.assert_stdout("Usage: keel daemon help");
    // After `--` it is a command name again (none is called `--help`).
    let after = sb.run(&["help", "--", "--help"]);
    assert_eq!(after.code, 2, "{after}");
}

/// Where the command line reference lives, from the crate root.
const CLI_REFERENCE: &str = "docs/cli.md";

/// docs/cli.md is every command's `--help`, rendered from clap's definitions (as jj generates
/// its CLI reference): the test fails when a flag or a help line changed and the file was not
/// regenerated with `KEEL_UPDATE_DOCS=1 cargo test --locked --test all cli_reference`.
#[test]
fn the_cli_reference_in_docs_is_current() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(CLI_REFERENCE);
    let rendered = cli_reference();
    if std::env::var_os("KEEL_UPDATE_DOCS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &rendered).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == rendered,
        "{CLI_REFERENCE} is not the command line's help: regenerate it with \
         KEEL_UPDATE_DOCS=1 cargo test --locked --test all cli_reference"
    );
}

/// Every command's long help (`keel … --help`) in one markdown page, the root first, then each
/// subcommand depth first; clap's `help` subcommands are left out (they repeat the others).
fn cli_reference() -> String {
    use clap::CommandFactory;
    let mut root = keel::cli::Keel::command();
    root.build();
    let mut paths = Vec::new();
    command_paths(&root, &mut Vec::new(), &mut paths);
    let mut page = String::from(
        "# keel command line reference\n\n\
         <!-- Generated from clap's definitions by tests/command_line.rs \
         (the_cli_reference_in_docs_is_current); do not edit. Regenerate with \
         KEEL_UPDATE_DOCS=1 cargo test --locked --test all cli_reference -->\n\n",
    );
    for path in &paths {
        let name = std::iter::once("keel")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        page.push_str(&format!("- [`{name}`](#{})\n", name.replace(' ', "-")));
    }
    for path in &paths {
        let name = std::iter::once("keel")
            .chain(path.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        // What `keel … --help` prints, word for word.
        let args = name.split(' ').chain(["--help"]);
        let help = match keel::cli::Keel::command().try_get_matches_from(args) {
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.render().to_string(),
            other => panic!("{name} --help: {other:?}"),
        };
        page.push_str(&format!(
            "\n## {name}\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
    }
    page
}

/// The word paths of `cmd`'s subcommands (`cmd` itself first), depth first, without `help`
/// and the hidden ones.
fn command_paths(cmd: &clap::Command, at: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(at.clone());
    // keel's own helpers (`__sandbox-*`) are hidden: not for people, not on the page.
    for sub in cmd
        .get_subcommands()
        .filter(|s| s.get_name() != "help" && !s.is_hide_set())
    {
        at.push(sub.get_name().to_string());
        command_paths(sub, at, out);
        at.pop();
    }
}
