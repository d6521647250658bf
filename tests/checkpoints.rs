//! Checkpoints and rewind end to end (the real binary in a sandbox, the scripted provider):
//! turn 1 edits a file with `edit`, turn 2 uses `bash` to delete one file, create another,
//! change a third and chmod it; `keel rewind` back to before turn 2 and before turn 1 gives
//! byte-identical trees (modes too), outside and inside a git repository whose status, stash,
//! refs and index stay as they were; an undo brings the rewound state back; a file over the
//! cap is left out with a warning; a conversation rewind keeps the old branch in the file.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use serde_json::{json, Value};

use crate::common::support::{scripted_args, Sandbox};

/// Every file under `root` (not `.git`) with its bytes and mode.
fn tree(root: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            if e.file_name() == ".git" {
                continue;
            }
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            out.insert(rel, (std::fs::read(&p).unwrap(), mode));
        }
    }
    out
}

pub(crate) fn write_script(sb: &Sandbox, name: &str, calls: &[(&str, Value)]) -> String {
    let chunks: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (tool, args))| {
            json!({"toolCall": {"id": format!("c{i}"), "name": tool, "arguments": args}})
        })
        .collect();
    let done = json!({"chunks": [{"text": "done"}]});
    let script = match chunks.is_empty() {
        true => json!({ "turns": [done] }),
        false => json!({"turns": [{ "chunks": chunks }, done]}),
    };
    let path = sb.dir.path().join(name);
    std::fs::write(&path, script.to_string()).unwrap();
    path.display().to_string()
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// What a test compares of the user's repository: status, stash, refs, staged entries.
fn repo_state(dir: &Path) -> Vec<String> {
    vec![
        git(dir, &["status", "--porcelain"]),
        git(dir, &["stash", "list"]),
        git(dir, &["show-ref"]),
        git(dir, &["ls-files", "--stage"]),
    ]
}

fn seed_workspace(work: &Path) {
    std::fs::write(work.join("a.txt"), "one\ntwo\n").unwrap();
    std::fs::write(work.join("b.txt"), "bee\n").unwrap();
    std::fs::write(work.join("c.sh"), "echo c\n").unwrap();
    std::fs::create_dir(work.join("sub")).unwrap();
    std::fs::write(work.join("sub/d.txt"), "dee\n").unwrap();
}

/// Runs `keel -p` with the scripted calls (`-c`: continuing the session); asserts success.
pub(crate) fn turn(sb: &Sandbox, name: &str, calls: &[(&str, Value)], cont: bool, prompt: &str) {
    let script = write_script(sb, name, calls);
    let mut args = scripted_args(&["-p"], &script, &[]);
    if cont {
        args.push("-c");
    }
    args.push(prompt);
    let run = sb.run(&args);
    assert_eq!(run.code, 0, "{run}");
}

fn two_turns(sb: &Sandbox) -> [BTreeMap<String, (Vec<u8>, u32)>; 3] {
    let work = sb.work();
    let t0 = tree(&work);
    let edit = json!({"path": "a.txt", "oldText": "one", "newText": "ONE"});
    turn(sb, "s1.json", &[("edit", edit)], false, "edit a");
    let t1 = tree(&work);
    let cmd = "rm b.txt && mkdir -p new && echo fresh > new/n.txt && echo more >> c.sh && chmod +x c.sh && rm -r sub";
    turn(
        sb,
        "s2.json",
        &[("bash", json!({"command": cmd}))],
        true,
        "shell",
    );
    let t2 = tree(&work);
    assert_ne!(t0, t1);
    assert_ne!(t1, t2);
    [t0, t1, t2]
}

pub(crate) fn session_id(sb: &Sandbox) -> String {
    let first = sb.session_text();
    let header: Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    header["id"].as_str().unwrap().to_string()
}

pub(crate) fn checkpoints(sb: &Sandbox, id: &str) -> Vec<Value> {
    let run = sb.run(&["rewind", id, "--list", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    serde_json::from_str::<Vec<Value>>(&run.stdout).unwrap()
}

fn rewind(sb: &Sandbox, args: &[&str]) {
    let mut all = vec!["rewind"];
    all.extend_from_slice(args);
    let run = sb.run(&all);
    assert_eq!(run.code, 0, "{run}");
}

/// The whole round: two turns, rewind to before each, undo; `check` runs after each step.
fn round_trip(sb: &Sandbox, check: &dyn Fn()) {
    let [t0, t1, t2] = two_turns(sb);
    let id = session_id(sb);
    let list = checkpoints(sb, &id);
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0]["prompt"], "edit a");
    assert_eq!(list[1]["prompt"], "shell");
    assert_eq!(list[0]["files"], json!(["a.txt"]), "turn 1 changed a.txt");
    let second = list[1]["id"].as_str().unwrap();
    rewind(sb, &[&id, "--to", second, "--files"]);
    assert_eq!(tree(&sb.work()), t1, "before turn 2");
    check();
    let first = list[0]["entryId"].as_str().unwrap();
    rewind(sb, &[&id, "--to", first, "--files"]);
    assert_eq!(tree(&sb.work()), t0, "before turn 1");
    check();
    rewind(sb, &[&id, "--undo"]);
    assert_eq!(
        tree(&sb.work()),
        t1,
        "the undo brings back the state before the last rewind"
    );
    check();
    rewind(sb, &[&id, "--undo"]);
    assert_eq!(tree(&sb.work()), t0, "an undo can be undone");
    let _ = t2;
}

#[test]
fn rewind_restores_files_outside_a_repository() {
    let sb = Sandbox::new();
    seed_workspace(&sb.work());
    round_trip(&sb, &|| {});
    let store = sb.home().join("checkpoints");
    let mode = std::fs::metadata(&store).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
}

#[test]
fn rewind_inside_a_repository_leaves_the_users_git_alone() {
    let sb = Sandbox::new();
    let work = sb.work();
    seed_workspace(&work);
    git(&work, &["init", "-q"]);
    std::fs::write(work.join(".gitignore"), "ignored/\n").unwrap();
    git(&work, &["add", "-A"]);
    git(&work, &["commit", "-qm", "base"]);
    std::fs::write(work.join("b.txt"), "stashed\n").unwrap();
    git(&work, &["stash", "-q"]);
    std::fs::write(work.join("untracked.txt"), "u\n").unwrap();
    std::fs::write(work.join("c.sh"), "echo c\nstaged\n").unwrap();
    git(&work, &["add", "c.sh"]);
    std::fs::create_dir(work.join("ignored")).unwrap();
    std::fs::write(work.join("ignored/big.log"), "log\n").unwrap();
    let before = repo_state(&work);
    let git_dir = tree(&work.join(".git"));
    round_trip(&sb, &|| {});
    assert_eq!(repo_state(&work), before);
    let after = tree(&work.join(".git"));
    // git status may refresh the index's stat data; nothing else of .git changed.
    let strip = |t: &BTreeMap<String, (Vec<u8>, u32)>| {
        t.keys()
            .filter(|k| *k != "index")
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(strip(&after), strip(&git_dir));
}

#[test]
fn a_file_over_the_cap_is_left_out_with_a_warning() {
    let sb = Sandbox::new();
    let work = sb.work();
    std::fs::write(work.join("small.txt"), "s\n").unwrap();
    std::fs::write(work.join("big.bin"), vec![7u8; 4096]).unwrap();
    std::fs::write(
        sb.home().join("settings.json"),
        json!({"checkpoints": {"maxFileBytes": 1000}}).to_string(),
    )
    .unwrap();
    let script = write_script(
        &sb,
        "s.json",
        &[("bash", json!({"command": "echo x > small.txt"}))],
    );
    let run = sb.run(&scripted_args(&["--mode", "json"], &script, &["go"]));
    assert_eq!(run.code, 0, "{run}");
    let warning: Vec<Value> = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["type"] == "checkpoint_warning")
        .collect();
    assert_eq!(
        warning,
        [
            json!({"type": "checkpoint_warning", "skipped": [{"path": "big.bin", "reason": "maxFileBytes"}]})
        ]
    );
    let id = session_id(&sb);
    let list = checkpoints(&sb, &id);
    rewind(
        &sb,
        &[&id, "--to", list[0]["id"].as_str().unwrap(), "--files"],
    );
    assert_eq!(std::fs::read(work.join("small.txt")).unwrap(), b"s\n");
    assert_eq!(
        std::fs::read(work.join("big.bin")).unwrap().len(),
        4096,
        "left alone"
    );
}

#[test]
fn checkpoints_off_take_no_snapshot() {
    let sb = Sandbox::new();
    std::fs::write(
        sb.home().join("settings.json"),
        json!({"checkpoints": {"enabled": false}}).to_string(),
    )
    .unwrap();
    let script = write_script(&sb, "s.json", &[("bash", json!({"command": "echo x > f"}))]);
    let run = sb.run(&scripted_args(&["-p"], &script, &["go"]));
    assert_eq!(run.code, 0, "{run}");
    assert!(!sb.home().join("checkpoints").exists());
    assert!(checkpoints(&sb, &session_id(&sb)).is_empty());
}

#[test]
fn a_conversation_rewind_keeps_the_old_branch_and_leaves_it_out_of_the_context() {
    let sb = Sandbox::new();
    seed_workspace(&sb.work());
    let [_, _, t2] = two_turns(&sb);
    let id = session_id(&sb);
    let list = checkpoints(&sb, &id);
    let second = list[1]["entryId"].as_str().unwrap().to_string();
    rewind(&sb, &[&id, "--to", &second, "--conversation"]);
    assert_eq!(
        tree(&sb.work()),
        t2,
        "a conversation rewind leaves the files"
    );
    let file = &sb.session_files()[0];
    let text = std::fs::read_to_string(file).unwrap();
    assert!(
        text.contains("\"shell\""),
        "the old branch stays in the file"
    );
    // The next prompt continues from before "shell": its context lacks it.
    turn(&sb, "s3.json", &[], true, "third");
    let entries: Vec<Value> = std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let by_id: BTreeMap<&str, &Value> = entries[1..]
        .iter()
        .map(|e| (e["id"].as_str().unwrap(), e))
        .collect();
    let mut at = entries.last().unwrap();
    let mut branch = Vec::new();
    while let Some(parent) = at["parentId"].as_str() {
        branch.push(at);
        at = by_id[parent];
    }
    let texts: Vec<String> = branch
        .iter()
        .filter(|e| e["message"]["role"] == "user")
        .map(|e| {
            e["message"]["content"][0]["text"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(texts, ["third", "edit a"], "{texts:?}");
    assert!(entries.iter().any(|e| e["id"] == second.as_str()));
}

#[test]
fn rewind_through_rpc_restores_files_and_conversation_and_is_refused_while_running() {
    let sb = Sandbox::new();
    let work = sb.work();
    seed_workspace(&work);
    let t0 = tree(&work);
    let edit = json!({"path": "a.txt", "oldText": "one", "newText": "ONE"});
    let call = |id: &str, tool: &str, args: Value| json!({"chunks": [{"toolCall": {"id": id, "name": tool, "arguments": args}}]});
    let done = json!({"chunks": [{"text": "done"}]});
    let script = json!({"turns": [
        call("c1", "edit", edit), done,
        call("c2", "bash", json!({"command": "rm b.txt && echo n > n.txt"})), done,
        call("c3", "bash", json!({"command": "sleep 5"})), done,
    ]});
    let path = sb.dir.path().join("s.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let path = path.display().to_string();
    let mut rpc = crate::common::rpc::Rpc::start(&sb, &scripted_args(&[], &path, &[]));
    for (id, text) in [("p1", "edit a"), ("p2", "shell")] {
        rpc.call(json!({"id": id, "type": "prompt", "message": text}));
        rpc.wait(&json!({"type": "agent_settled"}));
    }
    let t2 = tree(&work);
    let list = rpc.call(json!({"id": "l", "type": "get_checkpoints"}));
    let cps = list["data"]["checkpoints"].as_array().unwrap().clone();
    assert_eq!(cps.len(), 2, "{list}");
    // Each prompt's own changes (issue 44 point 3); the newest's are up to the present.
    assert_eq!(cps[0]["files"], json!(["a.txt"]), "{list}");
    assert_eq!(cps[1]["files"], json!(["b.txt", "n.txt"]), "{list}");
    let first = cps[0]["entryId"].as_str().unwrap().to_string();
    let r = rpc.call(json!({"id": "r", "type": "rewind", "entryId": first}));
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["data"]["removed"], json!(["n.txt"]), "{r}");
    assert_eq!(tree(&work), t0);
    let messages = rpc.call(json!({"id": "m", "type": "get_messages"}));
    assert_eq!(
        messages["data"]["messages"],
        json!([]),
        "the conversation went back to before turn 1"
    );
    // A rewind while a run is active is refused.
    rpc.call(json!({"id": "p3", "type": "prompt", "message": "slow"}));
    rpc.wait(&json!({"type": "tool_execution_start"}));
    let refused =
        rpc.call(json!({"id": "r2", "type": "rewind", "entryId": first, "restore": "files"}));
    assert_eq!(refused["success"], false, "{refused}");
    assert!(
        refused["error"].as_str().unwrap().contains("abort"),
        "{refused}"
    );
    rpc.call(json!({"id": "a", "type": "abort"}));
    let (_, _, code) = rpc.finish();
    assert_eq!(code, 0);
    let _ = t2;
}

/// A session live in a daemon of its own whose one turn deleted `b.txt` and made `n.txt` with
/// `bash`: the sandbox, the daemon, a client attached to it, the session id and the tree
/// before the turn.
struct LiveShell {
    sb: Sandbox,
    d: crate::common::daemon::Daemon,
    c: crate::common::daemon::Conn,
    id: String,
    before: BTreeMap<String, (Vec<u8>, u32)>,
}

fn live_shell_session() -> LiveShell {
    use crate::common::daemon::{open_script, Daemon};
    let sb = Sandbox::new();
    let work = sb.work();
    seed_workspace(&work);
    let before = tree(&work);
    let path = write_script(
        &sb,
        "s.json",
        &[("bash", json!({"command": "rm b.txt && echo n > n.txt"}))],
    );
    let d = Daemon::start(&sb, &[]);
    let mut c = d.client();
    let id = open_script(&mut c, &sb, &path, &[]);
    c.call("session/attach", json!({"sessionId": id}));
    c.call("prompt", json!({"sessionId": id, "message": "shell"}));
    c.events_until("agent_settled");
    assert_ne!(tree(&work), before);
    LiveShell {
        sb,
        d,
        c,
        id,
        before,
    }
}

#[test]
fn session_rewind_through_the_daemon_goes_to_the_sessions_host() {
    // The daemon is bound to a name so that it lives (and is stopped) with the test.
    let LiveShell {
        sb,
        d: _daemon,
        mut c,
        id,
        before: t0,
    } = live_shell_session();
    let work = sb.work();
    let list = c.call("get_checkpoints", json!({"sessionId": id}));
    let first = list["result"]["checkpoints"][0]["entryId"]
        .as_str()
        .unwrap_or_else(|| panic!("{list}"))
        .to_string();
    let r = c.call(
        "session/rewind",
        json!({"sessionId": id, "entryId": first, "restore": "files"}),
    );
    assert_eq!(r["result"]["removed"], json!(["n.txt"]), "{r}");
    assert_eq!(tree(&work), t0);
}

/// A rewind that moves the conversation starts a new epoch of the session's stream, so every
/// attached client is told (`session/replaced`, the same id) and applies it; one that restores
/// only files leaves the stream as it is.
#[test]
fn a_conversation_rewind_in_the_daemon_tells_every_attached_client() {
    use crate::common::daemon::is_note;
    let LiveShell {
        sb: _sb,
        d,
        mut c,
        id,
        before: _,
    } = live_shell_session();
    let mut other = d.client();
    let attached = other.call("session/attach", json!({"sessionId": id}));
    assert!(attached.get("result").is_some(), "{attached}");
    let epoch = other.sessions()[0]["epoch"].clone();
    assert!(epoch.is_string(), "{epoch}");
    let list = c.call("get_checkpoints", json!({"sessionId": id}));
    let first = list["result"]["checkpoints"][0]["entryId"]
        .as_str()
        .unwrap_or_else(|| panic!("{list}"))
        .to_string();
    let files = c.call(
        "session/rewind",
        json!({"sessionId": id, "entryId": first, "restore": "files"}),
    );
    assert!(files.get("result").is_some(), "{files}");
    let both = c.call(
        "session/rewind",
        json!({"sessionId": id, "entryId": first, "restore": "conversation"}),
    );
    assert!(both.get("result").is_some(), "{both}");
    let notes = other.notes_until(is_note("session/replaced"));
    let replaced = notes.last().unwrap();
    // Only the conversation rewind: a files-only one before it sent nothing of the kind.
    assert_eq!(
        notes
            .iter()
            .filter(|n| n["method"] == "session/replaced")
            .count(),
        1
    );
    assert_eq!(replaced["params"]["sessionId"], id.as_str(), "{replaced}");
    assert_eq!(
        replaced["params"]["newSessionId"],
        id.as_str(),
        "{replaced}"
    );
    assert_ne!(replaced["params"]["epoch"], epoch, "{replaced}");
    // The other client sees the branch the session is on now: nothing before the first prompt.
    let messages = other.call("get_messages", json!({"sessionId": id}));
    assert_eq!(messages["result"]["messages"], json!([]), "{messages}");
}

#[test]
fn keel_rewind_of_a_session_live_in_the_daemon_is_a_command_to_its_host() {
    let LiveShell {
        sb,
        d,
        mut c,
        id,
        before: t0,
    } = live_shell_session();
    let work = sb.work();
    let socket = d.socket.display().to_string();
    let list = sb.run(&["rewind", &id, "--list", "--json"]);
    assert_eq!(list.code, 0, "{list}");
    let listed: Value = serde_json::from_str(&list.stdout).unwrap();
    let first = listed[0]["entryId"].as_str().unwrap().to_string();
    // The session's file is locked by the daemon: the rewind goes to its host.
    let r = sb.run(&[
        "rewind", &id, "--to", &first, "--files", "--socket", &socket,
    ]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(tree(&work), t0, "{r}");
    // The session is still live there, and knows it rewound.
    let again = c.call("get_checkpoints", json!({"sessionId": id}));
    assert!(again["result"]["checkpoints"].is_array(), "{again}");
}

#[test]
fn rewind_preview_through_rpc_lists_what_a_rewind_would_change_and_changes_nothing() {
    let sb = Sandbox::new();
    let work = sb.work();
    seed_workspace(&work);
    let call = |id: &str, tool: &str, args: Value| json!({"chunks": [{"toolCall": {"id": id, "name": tool, "arguments": args}}]});
    let done = json!({"chunks": [{"text": "done"}]});
    let edit = json!({"path": "a.txt", "oldText": "one", "newText": "ONE\nextra"});
    let script = json!({"turns": [
        call("c1", "edit", edit), done,
        call("c2", "bash", json!({"command": "rm b.txt && echo n > n.txt"})), done,
    ]});
    let path = sb.dir.path().join("s.json");
    std::fs::write(&path, script.to_string()).unwrap();
    let path = path.display().to_string();
    let mut rpc = crate::common::rpc::Rpc::start(&sb, &scripted_args(&[], &path, &[]));
    for (id, text) in [("p1", "edit a"), ("p2", "shell")] {
        rpc.call(json!({"id": id, "type": "prompt", "message": text}));
        rpc.wait(&json!({"type": "agent_settled"}));
    }
    // Changed outside keel after the newest checkpoint (the one before turn 2).
    std::fs::write(work.join("sub/d.txt"), "dee\nmore\n").unwrap();
    let before = tree(&work);
    let list = rpc.call(json!({"id": "l", "type": "get_checkpoints"}));
    let first = list["data"]["checkpoints"][0]["entryId"]
        .as_str()
        .unwrap()
        .to_string();
    let p = rpc.call(json!({"id": "v", "type": "rewind_preview", "entryId": first}));
    assert_eq!(p["success"], true, "{p}");
    assert_eq!(
        p["data"]["checkpoint"], list["data"]["checkpoints"][0]["id"],
        "{p}"
    );
    let row = |path: &str, change: &str, added: u64, removed: u64, moved: bool| {
        json!({"path": path, "change": change, "added": added, "removed": removed,
               "changedSinceSnapshot": moved})
    };
    assert_eq!(
        p["data"]["files"],
        json!([
            row("a.txt", "modified", 1, 2, false),
            row("b.txt", "added", 1, 0, true),
            row("n.txt", "removed", 0, 1, true),
            row("sub/d.txt", "modified", 0, 1, true),
        ]),
        "{p}"
    );
    assert_eq!(tree(&work), before, "a preview changes no file");
    let bad = rpc.call(json!({"id": "b", "type": "rewind_preview", "entryId": "nope"}));
    assert_eq!(bad["success"], false, "{bad}");
    let (_, _, code) = rpc.finish();
    assert_eq!(code, 0);
}

#[test]
fn keel_rewind_undo_of_a_session_live_in_the_daemon_is_a_command_to_its_host() {
    let LiveShell {
        sb,
        d,
        mut c,
        id,
        before: t0,
    } = live_shell_session();
    let work = sb.work();
    let socket = d.socket.display().to_string();
    let t1 = tree(&work);
    let list = sb.run(&["rewind", &id, "--list", "--json"]);
    let listed: Value = serde_json::from_str(&list.stdout).unwrap();
    let first = listed[0]["entryId"].as_str().unwrap().to_string();
    let r = sb.run(&[
        "rewind", &id, "--to", &first, "--files", "--socket", &socket,
    ]);
    assert_eq!(r.code, 0, "{r}");
    assert_eq!(tree(&work), t0, "{r}");
    // The undo goes to the host too, and puts the files back as they were.
    let u = sb.run(&["rewind", &id, "--undo", "--socket", &socket]);
    assert_eq!(u.code, 0, "{u}");
    assert_eq!(tree(&work), t1, "{u}");
    let again = c.call("get_checkpoints", json!({"sessionId": id}));
    assert!(again["result"]["checkpoints"].is_array(), "{again}");
}

/// A checkpoint is taken before the first change after a prompt, so the files a prompt changed
/// are those between its checkpoint and the next (the present, for the newest): `--list` shows
/// them on that prompt (issue 44 point 3). `keel rewind` without a session takes the newest
/// session of the directory.
#[test]
fn rewind_counts_sit_on_the_prompt_that_changed_the_files() {
    let sb = Sandbox::new();
    seed_workspace(&sb.work());
    two_turns(&sb);
    let run = sb.run(&["rewind", "--list", "--json"]);
    assert_eq!(run.code, 0, "{run}");
    let list: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(list.len(), 2, "{list:?}");
    assert_eq!(list[0]["prompt"], "edit a");
    assert_eq!(list[0]["files"], json!(["a.txt"]), "{list:?}");
    assert_eq!(list[1]["prompt"], "shell");
    assert_eq!(
        list[1]["files"],
        json!(["b.txt", "c.sh", "new/n.txt", "sub/d.txt"]),
        "{list:?}"
    );
    let run = sb.run(&["rewind", "--list"]);
    assert_eq!(run.code, 0, "{run}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{run}");
    assert!(lines[0].ends_with("edit a  1 file"), "{run}");
    assert!(lines[1].ends_with("shell  4 files"), "{run}");
}

/// `keel rewind --to` names the prompt it rewound to, `--undo` the prompt the session is back
/// at (issue 44 point 3).
#[test]
fn rewind_and_undo_name_the_prompt() {
    let sb = Sandbox::new();
    seed_workspace(&sb.work());
    two_turns(&sb);
    let id = session_id(&sb);
    let list = checkpoints(&sb, &id);
    let first = list[0]["entryId"].as_str().unwrap();
    let r = sb.run(&["rewind", "--to", first]);
    assert_eq!(r.code, 0, "{r}");
    assert!(
        r.stdout.starts_with("rewound both to before “edit a”"),
        "{r}"
    );
    let u = sb.run(&["rewind", "--undo"]);
    assert_eq!(u.code, 0, "{u}");
    assert!(
        u.stdout
            .starts_with("undid the rewind to before “edit a”: back at “shell”"),
        "{u}"
    );
}

/// `keel rewind` in another directory than the session's says that sessions are kept per
/// directory, as an unknown `--resume` does (issue 44 point 16).
#[test]
fn rewind_from_another_directory_says_sessions_are_kept_per_directory() {
    let sb = Sandbox::new();
    seed_workspace(&sb.work());
    turn(&sb, "s.json", &[], false, "hello");
    let id = session_id(&sb);
    let other = sb.dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    for args in [
        vec!["rewind", id.as_str(), "--list"],
        vec!["rewind", "--undo"],
    ] {
        let out = sb.cmd(&args).current_dir(&other).output().unwrap();
        let run = sb.finish(out);
        assert_ne!(run.code, 0, "{run}");
        assert!(run.stderr.contains("kept per directory"), "{args:?}: {run}");
    }
}
