//! Project context files reach the model (issue: keel ignored AGENTS.md): the request a local
//! OpenAI-compatible server receives carries every file of the chain in order, the global one
//! first, with overrides, BOMs and budgets applied; an over-budget file is cut with a marker
//! and a warning on stderr; `--no-context-files` (`-nc`) leaves them out; `keel debug prompt`
//! prints the same prompt.

use crate::common::http_server::{Reply, Server};
use crate::common::support::{root, strs, Sandbox};

fn sse() -> Vec<u8> {
    std::fs::read(root().join("fixtures/providers/openai/text.sse")).unwrap()
}

/// The system message of the one request `args` makes, and the run.
/// The body of the one request a run with `args` sends the model, and the run.
fn request(sb: &Sandbox, args: &[&str]) -> (serde_json::Value, crate::common::support::Run) {
    let server = Server::start(vec![Reply::sse(&sse())]);
    let base = server.base_url();
    let mut all = vec!["--base-url", base.as_str(), "--model", "m", "--no-session"];
    all.extend_from_slice(args);
    let run = sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
    (server.seen()[0].json(), run)
}

fn system_prompt(sb: &Sandbox, args: &[&str]) -> (String, crate::common::support::Run) {
    let (body, run) = request(sb, args);
    let system = body["messages"][0].clone();
    assert_eq!(system["role"], "system", "{body}");
    (system["content"].as_str().unwrap().to_string(), run)
}

/// The names of the tools a run with `args` sends the model.
fn sent_tools(sb: &Sandbox, args: &[&str]) -> Vec<String> {
    let (body, _) = request(sb, args);
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn write(path: &std::path::Path, text: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn every_context_file_of_the_chain_reaches_the_model_in_order() {
    let sb = Sandbox::new();
    let work = sb.work();
    write(&sb.home().join("AGENTS.md"), b"GLOBAL: be kind");
    write(
        &work.join("AGENTS.md"),
        b"\xEF\xBB\xBFPROJECT: run make check",
    );
    write(&work.join("CLAUDE.md"), b"SHADOWED: AGENTS.md wins");
    let sub = work.join("crates").join("core");
    write(&sub.join("AGENTS.override.md"), b"OVERRIDE: core rules");
    write(&sub.join("AGENTS.md"), b"SHADOWED: the override wins");
    let big = "x".repeat(40 * 1024);
    let deep = sub.join("deep");
    write(&deep.join("CLAUDE.md"), big.as_bytes());

    // Run from the deepest directory: the whole chain applies.
    let server = Server::start(vec![Reply::sse(&sse())]);
    let base = server.base_url();
    let out = sb
        .cmd(&[
            "--base-url",
            &base,
            "--model",
            "m",
            "--no-session",
            "-p",
            "hi",
        ])
        .current_dir(&deep)
        .output()
        .unwrap();
    let run = sb.finish(out);
    assert_eq!(run.code, 0, "{run}");
    let system = server.seen()[0].json()["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_string();
    let order = [
        "GLOBAL: be kind",
        "PROJECT: run make check",
        "OVERRIDE: core rules",
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|s| {
            system
                .find(s)
                .unwrap_or_else(|| panic!("{s} missing:\n{system}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}");
    assert!(!system.contains("SHADOWED"), "{system}");
    assert!(!system.contains('\u{feff}'));
    assert!(system.contains(&format!(
        "<project_instructions path=\"{}\">",
        work.join("AGENTS.md").display()
    )));
    // The 40 KiB file: 32 KiB of it, a marker, and a warning the user sees.
    let cut = 40 * 1024 - 32 * 1024;
    assert!(
        system.contains(&format!("[… truncated {cut} bytes …]")),
        "{system}"
    );
    assert!(!system.contains(&"x".repeat(32 * 1024 + 1)));
    assert!(
        run.stderr.contains("Warning: context file")
            && run.stderr.contains(&format!("{cut} bytes")),
        "{run}"
    );
}

#[test]
fn no_context_files_leaves_them_out_and_system_prompt_replaces_only_the_base() {
    let sb = Sandbox::new();
    write(&sb.work().join("AGENTS.md"), b"PROJECT RULES");
    let (with, _) = system_prompt(&sb, &["-p", "hi"]);
    assert!(with.contains("PROJECT RULES") && with.starts_with("You are keel"));
    for flag in ["--no-context-files", "-nc"] {
        let (without, _) = system_prompt(&sb, &[flag, "-p", "hi"]);
        assert!(!without.contains("PROJECT RULES"), "{flag}: {without}");
        assert!(without.contains("<environment>"), "{without}");
    }
    let (own, _) = system_prompt(&sb, &["--system-prompt", "Talk like a pirate.", "-p", "hi"]);
    assert!(own.starts_with("Talk like a pirate.\n\n<tools>"), "{own}");
    assert!(own.contains("PROJECT RULES"), "{own}");
    // The same flags, the same prompt, to the byte: `keel debug prompt` shows what is sent.
    // The same endpoint's kind as the run's (an OpenAI-compatible URL: the job tools' shape
    // follows the model's API); `debug prompt` calls nothing.
    let shown = sb.run(&[
        "debug",
        "prompt",
        "--json",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:9/v1",
    ]);
    assert_eq!(shown.code, 0, "{shown}");
    let v: serde_json::Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(v["systemPrompt"].as_str().unwrap(), with);
    assert_eq!(v["contextFiles"][0]["bytes"], 13);
    // The same tools as a run sends, `task` included (issue 44 point 14).
    let shown_tools = strs(&v["tools"], "name");
    assert_eq!(shown_tools, sent_tools(&sb, &["-p", "hi"]), "{shown}");
    assert!(shown_tools.contains(&"task"), "{shown}");
    let text = sb.run(&["debug", "prompt", "-nc"]);
    text.assert_stdout("not loaded: --no-context-files");
}
