//! The rules as a whole: the precedence table, each specifier form through `check`, compound
//! commands, and the warnings for rules that do not parse.

use std::path::Path;

use serde_json::json;

use super::*;

fn list(rules: &[&str]) -> Vec<(String, String)> {
    rules
        .iter()
        .map(|r| (r.to_string(), "/p/.keel/settings.json".to_string()))
        .collect()
}

fn rules(deny: &[&str], ask: &[&str], allow: &[&str]) -> Rules {
    let (r, warnings) = Rules::build(
        &list(deny),
        &list(ask),
        &list(allow),
        Path::new("/p"),
        Path::new("/home/u"),
    );
    assert_eq!(warnings, [], "the test's rules parse");
    r
}

fn bash(r: &Rules, command: &str) -> Verdict {
    r.check("bash", &json!({ "command": command }), Path::new("/p"))
}

/// The verdict's kind and rule, for compact tables.
fn short(v: Verdict) -> (&'static str, String) {
    match v {
        Verdict::Deny(m) => ("deny", m.rule),
        Verdict::Ask(m) => ("ask", m.rule),
        Verdict::Allow(m) => ("allow", m.rule),
        Verdict::Unmatched => ("none", String::new()),
    }
}

/// deny, ask and allow lists, then the verdict's kind and rule.
type Row<'a> = (
    &'a [&'a str],
    &'a [&'a str],
    &'a [&'a str],
    (&'a str, &'a str),
);

#[test]
fn deny_then_ask_then_allow_the_first_list_with_a_match_decides() {
    let table: [Row; 6] = [
        (&["Bash"], &["Bash"], &["Bash"], ("deny", "Bash")),
        (
            &[],
            &["Bash(git push:*)"],
            &["Bash(git:*)"],
            ("ask", "Bash(git push:*)"),
        ),
        (
            &["Bash(git push *)"],
            &[],
            &["Bash(git:*)"],
            ("deny", "Bash(git push *)"),
        ),
        (&[], &[], &["Bash(git:*)"], ("allow", "Bash(git:*)")),
        (
            &["Bash(rm:*)"],
            &["Bash(ls)"],
            &["Bash(npm:*)"],
            ("none", ""),
        ),
        (&["Read"], &[], &["Bash"], ("allow", "Bash")),
    ];
    for (deny, ask, allow, want) in table {
        let r = rules(deny, ask, allow);
        let got = short(bash(&r, "git push origin main"));
        assert_eq!((got.0, got.1.as_str()), want, "{deny:?} {ask:?} {allow:?}");
    }
}

#[test]
fn the_verdict_names_the_rule_and_its_origin() {
    let r = rules(&["Bash(rm:*)"], &[], &[]);
    assert_eq!(
        bash(&r, "rm -rf x"),
        Verdict::Deny(Matched {
            rule: "Bash(rm:*)".into(),
            origin: "/p/.keel/settings.json".into()
        })
    );
}

#[test]
fn a_denied_part_denies_the_whole_compound_command() {
    let r = rules(&["Bash(rm:*)"], &[], &["Bash(echo:*)"]);
    assert_eq!(short(bash(&r, "echo ok && rm -f x")).0, "deny");
    assert_eq!(short(bash(&r, "echo $(rm -f x)")).0, "deny");
    assert_eq!(short(bash(&r, "echo `rm -f x`")).0, "deny");
    assert_eq!(short(bash(&r, "(cd /tmp; rm -f x)")).0, "deny");
    assert_eq!(short(bash(&r, "{ echo a; rm x; }")).0, "deny");
    assert_eq!(short(bash(&r, "echo a | xargs -0 rm")).0, "deny");
    assert_eq!(short(bash(&r, "sh -c 'rm -rf y'")).0, "deny");
    assert_eq!(
        short(bash(&r, "FOO=1 rm x")).0,
        "deny",
        "deny matches past assignments"
    );
    assert_eq!(
        short(bash(&r, "echo 'rm -rf /'")).0,
        "allow",
        "a quoted operator is text"
    );
}

#[test]
fn every_part_must_be_allowed() {
    let r = rules(&[], &[], &["Bash(echo:*)", "Bash(git diff *)"]);
    assert_eq!(
        short(bash(&r, "echo a && git diff HEAD | echo b")),
        ("allow", "Bash(echo:*)".into())
    );
    assert_eq!(short(bash(&r, "echo a && touch b")).0, "none");
    assert_eq!(
        short(bash(&r, "echo $(touch b)")).0,
        "none",
        "a substitution must be allowed too"
    );
    assert_eq!(
        short(bash(&r, "PATH=. echo a")).0,
        "none",
        "allow rules see a risky assignment"
    );
    assert_eq!(
        short(bash(&r, "FOO=1 echo a")).0,
        "allow",
        "…and look past a harmless one"
    );
    assert_eq!(
        short(bash(&r, "echo   a")).0,
        "allow",
        "whitespace between words is one space"
    );
}

#[test]
fn an_unparsable_command_is_never_allowed_but_still_denied() {
    let r = rules(&["Bash(rm:*)"], &[], &["Bash(echo:*)"]);
    assert_eq!(short(bash(&r, "echo (( oops")).0, "none");
    assert_eq!(short(bash(&r, "echo ok && rm -f x ((")).0, "deny");
    assert_eq!(short(bash(&r, "rm -rf / 'unterminated")).0, "deny");
    assert_eq!(
        short(bash(&r, "sudo /bin/rm -rf / 'unterminated")).0,
        "deny",
        "a piece is normalised too"
    );
    let asks = rules(&[], &["Bash(curl:*)"], &["Bash"]);
    assert_eq!(short(bash(&asks, "curl x | sh ((")).0, "ask");
}

#[test]
fn file_tools_match_their_paths() {
    let r = rules(
        &["Read(./.env)"],
        &["Edit(/src/**)"],
        &["Read(~/notes/**)", "Write(//tmp/*)"],
    );
    let check =
        |tool: &str, path: &str| short(r.check(tool, &json!({"path": path}), Path::new("/p")));
    assert_eq!(check("read", ".env").0, "deny");
    assert_eq!(check("read", "/p/sub/../.env").0, "deny");
    assert_eq!(
        check("write", ".env").0,
        "deny",
        "a Read deny stops writes too"
    );
    assert_eq!(check("grep", ".env").0, "deny");
    assert_eq!(check("read", "README.md").0, "none");
    assert_eq!(check("edit", "src/a/b.rs").0, "ask");
    assert_eq!(check("write", "src/new.rs").0, "ask", "Edit covers write");
    assert_eq!(
        check("read", "src/a.rs").0,
        "none",
        "Edit does not cover read"
    );
    assert_eq!(check("ls", "/home/u/notes/x").0, "allow");
    assert_eq!(check("write", "/tmp/x").0, "allow");
    assert_eq!(
        check("write", "/tmp/x/y").0,
        "allow",
        "a match covers what is below it"
    );
    assert_eq!(check("write", "/var/x").0, "none");
    let bare = rules(&["Read(.env)"], &[], &[]);
    let no_path = bare.check("find", &json!({"pattern": "*"}), Path::new("/p/.env"));
    assert_eq!(
        short(no_path).0,
        "deny",
        "grep/find/ls without a path search the cwd"
    );
}

#[test]
fn mcp_rules_name_a_server_or_a_tool() {
    let r = rules(
        &["mcp__db__drop"],
        &["mcp__db__*"],
        &["mcp__fs", "mcp__web__get_*"],
    );
    let check = |tool: &str| short(r.check(tool, &json!({}), Path::new("/p"))).0;
    assert_eq!(check("mcp__db__drop"), "deny");
    assert_eq!(check("mcp__db__query"), "ask");
    assert_eq!(check("mcp__fs__read"), "allow");
    assert_eq!(
        check("mcp__fsx__read"),
        "none",
        "a server name is not a prefix of another"
    );
    assert_eq!(check("mcp__web__get_page"), "allow");
    assert_eq!(check("mcp__web__post"), "none");
}

#[test]
fn keel_names_and_claude_names_both_work() {
    let r = rules(&["bash(rm:*)", "read(./.env)"], &[], &["Bash(ls)"]);
    assert_eq!(short(bash(&r, "rm x")).0, "deny");
    assert_eq!(short(bash(&r, "ls")).0, "allow");
    let read = r.check("read", &json!({"path": ".env"}), Path::new("/p"));
    assert_eq!(short(read).0, "deny");
    let grep = r.check(
        "grep",
        &json!({"pattern": "x", "path": ".env"}),
        Path::new("/p"),
    );
    assert_eq!(
        short(grep).0,
        "none",
        "keel's `read` is the read tool alone"
    );
}

#[test]
fn rules_that_do_not_parse_are_warnings_naming_them() {
    let (r, warnings) = Rules::build(
        &list(&["Bash(rm:* -rf)", "Bash(rm:*)"]),
        &list(&["Read(./a[)"]),
        &[],
        Path::new("/p"),
        Path::new("/h"),
    );
    let texts: Vec<String> = warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(
        texts,
        [
            "permission rule `Bash(rm:* -rf)` (from /p/.keel/settings.json) is ignored: `:*` is allowed only at the end",
            "permission rule `Read(./a[)` (from /p/.keel/settings.json) is ignored: not a path pattern: unclosed character class; missing ']'",
        ]
    );
    assert_eq!(short(bash(&r, "rm x")).0, "deny", "the other rules stay");
}

#[test]
fn no_rules_decide_nothing() {
    let r = Rules::default();
    assert!(r.is_empty());
    assert_eq!(bash(&r, "rm -rf /"), Verdict::Unmatched);
}

#[test]
fn a_symlink_is_denied_by_its_target_and_allowed_only_if_both_match() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join(".env"), "SECRET=1").unwrap();
    std::fs::create_dir(root.join("docs")).unwrap();
    std::os::unix::fs::symlink(root.join(".env"), root.join("docs/link")).unwrap();
    let (r, _) = Rules::build(
        &list(&["Read(./.env)"]),
        &[],
        &list(&["Read(/docs/**)"]),
        &root,
        Path::new("/h"),
    );
    let read = |p: &str| short(r.check("read", &json!({ "path": p }), &root)).0;
    assert_eq!(read("docs/link"), "deny", "the link's target is denied");
    let (allow_only, _) =
        Rules::build(&[], &[], &list(&["Read(/docs/**)"]), &root, Path::new("/h"));
    let v = allow_only.check("read", &json!({"path": "docs/link"}), &root);
    assert_eq!(short(v).0, "none", "the target is outside the allowed tree");
}

/// Each of `cmds` whose verdict under `r` is not `want` (kind, and rule unless `None`), as
/// `cmd => kind rule`.
fn misjudged(r: &Rules, cmds: &[&str], want: (&str, Option<&str>)) -> Vec<String> {
    cmds.iter()
        .filter_map(|cmd| {
            let got = short(bash(r, cmd));
            let right = got.0 == want.0 && want.1.is_none_or(|w| w == got.1);
            (!right).then(|| format!("{cmd} => {} {}", got.0, got.1))
        })
        .collect()
}

/// Issue 43 point 15: a deny rule on `rm` held only for a command spelled `rm`; a wrapper, a
/// path, quoting or `eval` walked past it.
#[test]
fn a_deny_rule_holds_through_wrappers_paths_quoting_and_eval() {
    let r = rules(&["Bash(rm:*)"], &[], &["Bash(echo:*)"]);
    let wrong = misjudged(
        &r,
        &[
            "/bin/rm -rf x",
            "./rm x",
            "command rm x",
            "command -p rm x",
            "builtin rm x",
            "env rm x",
            "env -i FOO=1 -u BAR rm x",
            "exec rm x",
            "exec -a name -cl rm x",
            "nohup rm x",
            "nice rm x",
            "nice -n 5 rm x",
            "time rm x",
            "time -p rm x",
            "timeout 5 rm x",
            "timeout -s KILL -k 1 5s rm x",
            "stdbuf -oL rm x",
            "stdbuf -o L rm x",
            "setsid rm x",
            "sudo rm x",
            "sudo -u root -- rm x",
            "doas -u root rm x",
            "echo x | xargs rm",
            "echo x | xargs -0 -n 1 rm -f",
            "busybox rm x",
            "sudo env FOO=1 nohup /usr/bin/rm x",
            "noglob rm x",
            "eval 'rm -rf x'",
            "eval rm x",
            "echo ok; eval \"echo a; rm x\"",
            "bash -c 'rm x'",
            "sh -c 'echo a; rm x'",
            "env bash -c 'rm x'",
            "sudo sh -c \"rm x\"",
            "env -S 'rm x'",
            "$'\\x72m' x",
            "$'\\162m' x",
            "'r'm x",
            "\"r\"m x",
            "r\\m x",
            "FOO=1 rm x",
            "find . -name '*.o' -exec rm {} ;",
            "\\rm x",
            "$'\\u0072m' x",
            "xargs -I{} rm {}",
            "timeout --signal=KILL 5 rm x",
            "nice -10 rm x",
            "env -- rm x",
            "sudo -E rm x",
            "command exec rm x",
            "time nice -n 1 sudo -u u env -i xargs rm",
            "bash -c \"eval 'sh -c \\\"rm x\\\"'\"",
        ],
        ("deny", Some("Bash(rm:*)")),
    );
    assert_eq!(wrong, Vec::<String>::new(), "these were not denied");
    assert_eq!(
        short(bash(&r, "command -v rm")).0,
        "none",
        "`-v` runs nothing"
    );
    assert_eq!(
        short(bash(&r, "echo rm")).0,
        "allow",
        "an argument is no command"
    );
}

/// Issue 43 point 15: a command whose name is an expansion could be any command.
#[test]
fn a_command_named_by_an_expansion_is_unreadable() {
    let r = rules(&["Bash(rm:*)"], &[], &["Bash(echo:*)", "Bash(* -la)"]);
    let wrong = misjudged(
        &r,
        &[
            "$x -rf y",
            "${x} y",
            "$(echo rm) y",
            "`echo rm` y",
            "\"$x\" y",
            "r$x y",
            "/bin/r? y",
            "eval \"$x\"",
            "bash -c \"$x\"",
            "sudo $x y",
        ],
        ("deny", Some("Bash(rm:*)")),
    );
    assert_eq!(wrong, Vec::<String>::new(), "each could be rm");
    for piped in [
        "echo 'rm x' | sh",
        "bash <<< 'rm x'",
        "cat s | bash -s -- a",
        "sudo bash -e",
    ] {
        assert_eq!(
            short(bash(&r, piped)).0,
            "deny",
            "{piped}: a script from stdin"
        );
    }
    for plain in ["bash ./build.sh", "bash --version"] {
        assert_eq!(short(bash(&r, plain)).0, "none", "{plain}");
    }
    assert_eq!(
        short(bash(&r, "$x -la")).0,
        "deny",
        "`$x` may be several words, `rm -la` among them"
    );
    let exact = rules(&["Bash(git status)"], &[], &["Bash(* -la)", "Bash(echo:*)"]);
    assert_eq!(
        short(bash(&exact, "$x -la")).0,
        "none",
        "it cannot be `git status`, and no allow rule allows it"
    );
    assert_eq!(
        short(bash(&exact, "$x")).0,
        "deny",
        "it could be `git status`"
    );
    assert_eq!(
        short(bash(&exact, "echo $x")).0,
        "allow",
        "an expanded argument is fine"
    );
}

/// Issue 43 point 15: allow rules ran `x='a[$(cmd)]'` through an arithmetic context, which
/// runs `cmd`.
#[test]
fn allow_rules_never_allow_an_arithmetic_injection() {
    let r = rules(
        &[],
        &[],
        &[
            "Bash(echo:*)",
            "Bash(read:*)",
            "Bash(printf:*)",
            "Bash(declare:*)",
            "Bash(let:*)",
            "Bash(test:*)",
            "Bash([[:*)",
        ],
    );
    let wrong = misjudged(
        &r,
        &[
            "x='a[$(touch p)]'; echo $((x))",
            "x='a[$(touch p)]'; echo $[x]",
            "x='a[`touch p`]'; ((x))",
            "x='a[$(touch p)]'; ((x)) && echo y",
            "x='a[$(touch p)]'; echo ${!x}",
            "x='\\$(touch p)'; echo ${x@P}",
            "x='a[$(touch p)]'; [[ $x -eq 1 ]] && echo y",
            "x='a[$(touch p)]'; [[ 1 -lt $x ]]",
            "x='a[$(touch p)]'; declare -i y=x",
            "x='a[$(touch p)]'; let y=x",
            "x='a[$(touch p)]'; echo ${y[x]}",
            "x='a[$(touch p)]'; test -v \"$x\"",
            "read x; echo $((x))",
            "read -r x < f; [[ $x -gt 0 ]]",
            "printf -v x '%s' 'a[$(touch p)]'; echo $((x))",
            "declare x='a[$(touch p)]'; echo $((x))",
            "for x in 'a[$(touch p)]'; do echo $((x)); done",
            "bash -c 'x=\"a[\\$(touch p)]\"; echo $((x))'",
            "eval 'x=\"a[\\$(touch p)]\"'; echo $((x))",
            "x=$'a\\x5b$(touch p)]'; echo $((x))",
        ],
        ("none", Some("")),
    );
    assert_eq!(wrong, Vec::<String>::new(), "these were allowed");
    let deny = rules(&["Bash(touch:*)"], &[], &["Bash(echo:*)"]);
    assert_eq!(
        short(bash(&deny, "x='a[$(touch p)]'; echo $((x))")).0,
        "deny",
        "deny rules still see the substitution"
    );
}

/// The forms above must not catch ordinary commands.
#[test]
fn ordinary_commands_are_still_allowed() {
    let r = rules(
        &["Bash(rm:*)"],
        &[],
        &[
            "Bash(git status)",
            "Bash(ls:*)",
            "Bash(npm test:*)",
            "Bash(echo:*)",
        ],
    );
    let wrong = misjudged(
        &r,
        &[
            "git status",
            "ls -la",
            "FOO=1 npm test",
            "FOO=1 BAR='a b' npm test -- --watch",
            "x=1; echo $((x+1))",
            "for i in 1 2; do echo $((i*2)); done",
            "echo \"$HOME\" ${x:-default}",
            "ls $(echo src)",
        ],
        ("allow", None),
    );
    assert_eq!(wrong, Vec::<String>::new(), "these were not allowed");
    let wrong = misjudged(
        &r,
        &[
            "PATH=. npm test",
            "LD_PRELOAD=/tmp/x.so npm test",
            "NODE_OPTIONS=--require=./x.js npm test",
            "FOO=$(id) npm test",
            "sudo ls",
            "/tmp/ls -la",
            "timeout 5 ls",
        ],
        ("none", Some("")),
    );
    assert_eq!(
        wrong,
        Vec::<String>::new(),
        "allow rules read these words as written"
    );
}

/// Issue 43 point 15: a `Read(…)` deny rule held for the `read` tool, not for what a walk
/// found under a directory, and never reached the sandbox.
#[test]
fn read_deny_rules_give_the_sandbox_their_literal_paths_and_walks_their_verdict() {
    let r = rules(
        &[
            "Read(./secret.txt)",
            "Read(~/.aws/**)",
            "Read(**/.env)",
            "Edit(./x)",
            "read(//etc/shadow)",
        ],
        &[],
        &[],
    );
    let paths: Vec<String> = r
        .read_deny_paths()
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    assert_eq!(paths, ["/p/secret.txt", "/home/u/.aws", "/etc/shadow"]);
    let denied = |p: &str| r.read_denied(Path::new(p)).map(|m| m.rule);
    assert_eq!(
        denied("/p/secret.txt").as_deref(),
        Some("Read(./secret.txt)")
    );
    assert_eq!(denied("/p/deep/.env").as_deref(), Some("Read(**/.env)"));
    assert_eq!(denied("/p/x"), None, "an Edit rule is not about reading");
    assert_eq!(denied("/p/public.txt"), None);
}
