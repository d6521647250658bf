//! Language servers (issue 50, `docs/lsp.md`): after `edit` and `write` the diagnostics of the
//! change, and only of it, come back in the tool's result and its `details.lsp`, through a
//! real print/JSON run. Real servers (pyright, typescript-language-server, clangd) where
//! `.ci/run` installed them (`KEEL_LSP_SERVERS`: a `node_modules/.bin`); a tiny fake server
//! (Python) for a server that never answers and for the sandbox.

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::common::support::{root, scripted_args, skipped, write_json, Sandbox};

/// The directory holding `pyright-langserver` and `typescript-language-server`.
fn npm_servers() -> Option<PathBuf> {
    let dir = PathBuf::from(std::env::var_os("KEEL_LSP_SERVERS")?);
    dir.join("pyright-langserver").is_file().then_some(dir)
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

fn fake_server() -> String {
    root()
        .join("fixtures/lsp/fake_server.py")
        .display()
        .to_string()
}

/// User settings with `lsp` set to `lsp`.
fn settings(sb: &Sandbox, lsp: Value) {
    write_json(&sb.home().join("settings.json"), &json!({ "lsp": lsp }));
}

/// A JSON run whose model makes `calls` one turn each, then says `done`; each call's
/// `tool_execution_end` line, in order.
fn run_calls(sb: &Sandbox, calls: &[(&str, Value)], extra: &[&str]) -> Vec<Value> {
    let mut turns: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| {
            json!({"chunks": [{"toolCall": {"id": format!("c{i}"), "name": name, "arguments": args}}]})
        })
        .collect();
    turns.push(json!({"chunks": [{"text": "done"}]}));
    let script = sb.script(json!(turns));
    let mut before = vec!["--mode", "json", "--no-session"];
    before.extend_from_slice(extra);
    let run = sb.run(&scripted_args(&before, &script, &["go"]));
    assert_eq!(run.code, 0, "{run}");
    let ends: Vec<Value> = run
        .stdout_lines()
        .into_iter()
        .filter(|l| l["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), calls.len(), "{run}");
    ends
}

fn text(end: &Value) -> &str {
    end["result"]["content"][0]["text"].as_str().unwrap()
}

fn lsp(end: &Value) -> &Value {
    &end["result"]["details"]["lsp"]
}

/// The edited file's diagnostics as `(line, message)`.
fn file_diags(end: &Value) -> Vec<(u64, String)> {
    lsp(end)["file"]
        .as_array()
        .unwrap_or_else(|| panic!("no details.lsp.file in {end}"))
        .iter()
        .map(|d| {
            (
                d["line"].as_u64().unwrap(),
                d["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// One type error in, exactly that diagnostic; the fix, none (the server's first analysis
/// of a file may be slow on a loaded machine: a generous timeout).
fn one_error_then_none(
    sb: &Sandbox,
    server: Value,
    file: &str,
    bad: &str,
    fix: (&str, &str),
    expect: &str,
) {
    settings(
        sb,
        json!({"servers": {"s": server}, "diagnosticsTimeout": 60000, "defaults": false}),
    );
    let ends = run_calls(
        sb,
        &[
            ("write", json!({"path": file, "content": bad})),
            (
                "edit",
                json!({"path": file, "oldText": fix.0, "newText": fix.1}),
            ),
        ],
        &[],
    );
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    let first = file_diags(&ends[0]);
    assert_eq!(first.len(), 1, "{}", ends[0]);
    assert_eq!(first[0].0, 2, "{}", ends[0]);
    assert!(first[0].1.contains(expect), "{}", ends[0]);
    assert!(
        text(&ends[0]).contains("after this change:\nERROR "),
        "{}",
        ends[0]
    );
    assert_eq!(lsp(&ends[0])["timedOut"], false);
    assert_eq!(file_diags(&ends[1]), vec![], "{}", ends[1]);
    assert!(!text(&ends[1]).contains("ERROR"), "{}", ends[1]);
}

#[test]
fn pyright_reports_the_type_error_an_edit_made_and_none_after_the_fix() {
    let Some(bin) = npm_servers() else {
        return skipped(
            "the pyright test: KEEL_LSP_SERVERS is not set (.ci/run sets it when npm is available)",
        );
    };
    let sb = Sandbox::new();
    let server = json!({
        "command": bin.join("pyright-langserver"), "args": ["--stdio"],
        "extensionToLanguage": {".py": "python"}
    });
    one_error_then_none(
        &sb,
        server,
        "a.py",
        "def f() -> int:\n    return \"no\"\n",
        ("return \"no\"", "return 1"),
        "\"Literal['no']\" is not assignable to return type \"int\"",
    );
}

#[test]
fn typescript_language_server_reports_the_type_error_and_none_after_the_fix() {
    let Some(bin) = npm_servers() else {
        return skipped("the typescript-language-server test: KEEL_LSP_SERVERS is not set (.ci/run sets it when npm is available)");
    };
    let sb = Sandbox::new();
    let server = json!({
        "command": bin.join("typescript-language-server"), "args": ["--stdio"],
        "extensionToLanguage": {".ts": "typescript"}
    });
    one_error_then_none(
        &sb,
        server,
        "a.ts",
        "export function f(): number {\n  return \"no\";\n}\n",
        ("return \"no\"", "return 1"),
        "Type 'string' is not assignable to type 'number'",
    );
}

#[test]
fn clangd_reports_the_type_error_and_none_after_the_fix() {
    let Some(clangd) = on_path("clangd") else {
        return skipped("the clangd test: clangd is not installed (.ci/run installs Debian's)");
    };
    let sb = Sandbox::new();
    let server = json!({"command": clangd, "extensionToLanguage": {".cpp": "cpp"}});
    one_error_then_none(
        &sb,
        server,
        "a.cpp",
        "int f() {\n  return \"no\";\n}\n",
        ("return \"no\"", "return 1"),
        "annot initialize return object of type 'int'",
    );
}

#[test]
fn a_server_that_never_answers_gives_the_result_after_the_timeout_with_a_note() {
    if on_path("python3").is_none() {
        return skipped("the silent language server test: python3 is not installed");
    }
    let sb = Sandbox::new();
    settings(
        &sb,
        json!({"servers": {"silent": {
            "command": "python3", "args": [fake_server()],
            "extensionToLanguage": {".py": "python"}, "env": {"FAKE_MODE": "silent"}
        }}, "diagnosticsTimeout": 300, "defaults": false}),
    );
    let ends = run_calls(
        &sb,
        &[("write", json!({"path": "a.py", "content": "x = 1\n"}))],
        &[],
    );
    assert_eq!(ends[0]["isError"], false, "{}", ends[0]);
    assert_eq!(
        text(&ends[0]),
        "Wrote 6 bytes to a.py\n\n(silent sent no diagnostics for this change within 300 ms; none are shown.)"
    );
    assert_eq!(lsp(&ends[0])["timedOut"], true, "{}", ends[0]);
}

#[test]
fn a_configured_server_that_is_missing_is_named_once_with_a_hint() {
    let sb = Sandbox::new();
    settings(
        &sb,
        json!({"servers": {"pyright": {
            "command": "pyright-langserver-not-here", "extensionToLanguage": {".py": "python"}
        }}, "defaults": false}),
    );
    let ends = run_calls(
        &sb,
        &[
            ("write", json!({"path": "a.py", "content": "x = 1\n"})),
            ("write", json!({"path": "b.py", "content": "y = 1\n"})),
        ],
        &[],
    );
    let note = text(&ends[0]);
    assert!(
        note.contains("`pyright-langserver-not-here` was not found on PATH"),
        "{note}"
    );
    assert!(note.contains("keel never downloads one"), "{note}");
    assert_eq!(text(&ends[1]), "Wrote 6 bytes to b.py");
}

/// A language server runs project code: under the default policy its start cannot write
/// outside the workspace (here into `$KEEL_HOME`); with the sandbox off it could.
#[test]
fn a_server_writing_outside_the_workspace_is_denied_under_the_default_policy() {
    if on_path("python3").is_none() {
        return skipped("the language server sandbox test: python3 is not installed");
    }
    let Some(sb) = Sandbox::new_in("/var/tmp") else {
        return skipped("the language server sandbox test: /var/tmp is not writable");
    };
    let plant = sb.dir.path().join("planted.txt");
    let server = |plant: &Path| {
        json!({"servers": {"fake": {
            "command": "python3", "args": [fake_server()],
            "extensionToLanguage": {".py": "python"},
            "env": {"FAKE_MODE": "report", "PLANT": plant}
        }}, "diagnosticsTimeout": 20000, "defaults": false})
    };
    settings(&sb, server(&plant));
    let ends = run_calls(
        &sb,
        &[("write", json!({"path": "a.py", "content": "x = 1\n"}))],
        &[],
    );
    let said = file_diags(&ends[0]);
    assert_eq!(said.len(), 1, "{}", ends[0]);
    assert!(said[0].1.starts_with("plant denied"), "{}", ends[0]);
    assert!(!plant.exists(), "the server wrote {}", plant.display());
    // The same server with the sandbox off writes it: the test sees a write when there is one.
    let ends = run_calls(
        &sb,
        &[("write", json!({"path": "b.py", "content": "x = 1\n"}))],
        &["--sandbox", "off"],
    );
    assert_eq!(file_diags(&ends[0])[0].1, "plant written", "{}", ends[0]);
    assert!(plant.exists());
}

/// The `lsp` tool against pyright: definition and references by symbol name (gitignored files
/// left out), hover, document symbols, and a rename shown but not applied.
#[test]
fn the_lsp_tool_navigates_with_pyright() {
    let Some(bin) = npm_servers() else {
        return skipped("the lsp tool test: KEEL_LSP_SERVERS is not set (.ci/run sets it when npm is available)");
    };
    let sb = Sandbox::new();
    settings(
        &sb,
        json!({"servers": {"pyright": {
            "command": bin.join("pyright-langserver"), "args": ["--stdio"],
            "extensionToLanguage": {".py": "python"}
        }}, "defaults": false}),
    );
    let w = sb.work();
    std::fs::write(w.join(".gitignore"), "build/\n").unwrap();
    std::fs::write(
        w.join("lib.py"),
        "def helper(x: int) -> int:\n    \"\"\"Doubles x.\"\"\"\n    return x * 2\n\n\nclass Box:\n    def size(self) -> int:\n        return helper(3)\n",
    )
    .unwrap();
    std::fs::write(
        w.join("main.py"),
        "from lib import helper\n\nprint(helper(1))\n",
    )
    .unwrap();
    std::fs::create_dir_all(w.join("build")).unwrap();
    std::fs::write(
        w.join("build/copy.py"),
        "from lib import helper\n\nhelper(2)\n",
    )
    .unwrap();
    let lsp = |v: Value| ("lsp", v);
    let ends = run_calls(
        &sb,
        &[
            lsp(
                json!({"operation": "definition", "path": "main.py", "symbol": "helper", "line": 3}),
            ),
            lsp(json!({"operation": "references", "path": "lib.py", "symbol": "helper"})),
            lsp(json!({"operation": "hover", "path": "lib.py", "line": 1, "column": 6})),
            lsp(json!({"operation": "documentSymbols", "path": "lib.py"})),
            lsp(
                json!({"operation": "rename_preview", "path": "lib.py", "symbol": "helper", "newName": "twice"}),
            ),
        ],
        &[],
    );
    for e in &ends {
        assert_eq!(e["isError"], false, "{e}");
    }
    assert_eq!(text(&ends[0]), "lib.py:1:5: def helper(x: int) -> int:");
    let refs = text(&ends[1]);
    assert!(
        refs.contains("lib.py:1:5: def helper(x: int) -> int:"),
        "{refs}"
    );
    assert!(refs.contains("lib.py:8:16: return helper(3)"), "{refs}");
    assert!(refs.contains("main.py:3:7: print(helper(1))"), "{refs}");
    assert!(!refs.contains("build/"), "{refs}");
    let hover = text(&ends[2]);
    assert!(hover.contains("def helper(x: int) -> int"), "{hover}");
    assert!(hover.contains("Doubles x."), "{hover}");
    assert_eq!(
        text(&ends[3]),
        "function helper (line 1)\n  variable x (line 1)\nclass Box (line 6)\n  method size (line 7)"
    );
    let rename = text(&ends[4]);
    assert!(rename.starts_with("A rename would make "), "{rename}");
    assert!(
        rename.contains("main.py:3:7: print(helper(1))\n    → twice"),
        "{rename}"
    );
    assert_eq!(
        std::fs::read_to_string(w.join("main.py")).unwrap(),
        "from lib import helper\n\nprint(helper(1))\n",
        "the rename was applied"
    );
}

/// `keel lsp status`: each server with its state; `--start` starts them in the sandbox.
#[test]
fn lsp_status_lists_each_server_and_its_state() {
    if on_path("python3").is_none() {
        return skipped("the lsp status test: python3 is not installed");
    }
    let sb = Sandbox::new();
    settings(
        &sb,
        json!({"servers": {
            "fake": {"command": "python3", "args": [fake_server()], "extensionToLanguage": {".py": "python"}},
            "gone": {"command": "gopls-not-here", "extensionToLanguage": {".go": "go"}}
        }, "defaults": false}),
    );
    let states = |args: &[&str]| -> Vec<(String, String, Value)> {
        let run = sb.run(args);
        assert_eq!(run.code, 0, "{run}");
        let v: Value = serde_json::from_str(&run.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["name"].as_str().unwrap().to_string(),
                    s["state"].as_str().unwrap().to_string(),
                    s["lastError"].clone(),
                )
            })
            .collect()
    };
    let work = sb.work();
    let status = sb.run(&["lsp", "status"]);
    assert!(
        status
            .stdout
            .contains("fake (configured): not started\n  command: python3 ("),
        "{status}"
    );
    assert!(
        status
            .stdout
            .contains(&format!("  files: .py\n  root: {}\n", work.display())),
        "{status}"
    );
    assert_eq!(
        states(&["lsp", "status", "--json"]),
        vec![
            ("fake".into(), "not-started".into(), Value::Null),
            ("gone".into(), "not-started".into(), Value::Null)
        ]
    );
    assert_eq!(
        states(&["lsp", "status", "--start", "--json"]),
        vec![
            ("fake".into(), "running".into(), Value::Null),
            (
                "gone".into(),
                "missing".into(),
                json!("`gopls-not-here` was not found on PATH")
            )
        ]
    );
}

/// A server that stops: the edit it stopped on says so, the next one restarts it with a
/// notice and gets its diagnostics.
#[test]
fn a_server_that_crashed_is_restarted_on_the_next_edit_with_a_notice() {
    if on_path("python3").is_none() {
        return skipped("the crashing language server test: python3 is not installed");
    }
    let sb = Sandbox::new();
    settings(
        &sb,
        json!({"servers": {"fake": {
            "command": "python3", "args": [fake_server()],
            "extensionToLanguage": {".py": "python"}, "env": {"FAKE_MODE": "crash"}
        }}, "diagnosticsTimeout": 20000, "defaults": false}),
    );
    let write = |p: &str| ("write", json!({"path": p, "content": "x = 1\n"}));
    let ends = run_calls(&sb, &[write("a.py"), write("b.py"), write("c.py")], &[]);
    assert_eq!(
        file_diags(&ends[0]),
        vec![(1, "plant not tried".to_string())]
    );
    assert!(
        text(&ends[1]).contains("(The fake language server stopped while checking this change."),
        "{}",
        ends[1]
    );
    assert_eq!(
        text(&ends[2]),
        "Wrote 6 bytes to c.py\n\nDiagnostics from fake after this change:\n\
         ERROR c.py:1:1 plant not tried\n\
         (The fake language server had stopped; it was restarted.)"
    );
}
