//! A front end's `Link` gives the same stream in-process and through the daemon: the same
//! prompt on the same scripted session yields the same numbered wire lines either way, and
//! commands are answered alike.

use std::os::unix::fs::PermissionsExt;

use clap::Parser;
use keel::cli::args::Cli;
use keel::client::link::{Link, Note, Start};
use keel::kernel::clock::Clock;
use keel::mode::Env;
use keel::wire::events::WireEvent;
use serde_json::json;

use crate::common::daemon::Daemon;
use crate::common::kernel::rt;
use crate::common::rpc::Rpc;
use crate::common::support::{fixture, scripted_args, Sandbox, CLOCK};

/// The notes up to and including the `agent_settled` line, as `(seq, line)`.
async fn run_prompt(link: &mut Link) -> Vec<(u64, String)> {
    let answer = link.request("prompt", json!({"message": "hi"})).await;
    assert_eq!(answer, Ok(json!({"disposition": "started"})));
    let mut out = Vec::new();
    loop {
        match link.next().await.expect("the link ended early") {
            Note::Event { seq, line, .. } => {
                let done = line.contains("\"type\":\"agent_settled\"");
                out.push((seq, line.to_string()));
                if done {
                    return out;
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// The environment of a keel process started in `sb` (no terminal, fixed clock and seed).
fn env_of(sb: &Sandbox) -> Env {
    Env {
        stdin_tty: false,
        stdout_tty: false,
        stderr_tty: false,
        no_color: true,
        cwd: sb.work(),
        keel_home: sb.home(),
        fixed_clock: Some(CLOCK.parse().unwrap()),
        seed: Some(sb.seed),
        temp_dir: sb.dir.path().to_path_buf(),
        log_filter: "off".into(),
        test_panic: false,
        // As a keel process started by the tests has it (tools and checkpoints find `git` there).
        vars: [(
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_default(),
        )]
        .into_iter()
        .collect(),
        retry_base_ms: None,
        tool_vars: None,
        worktree: None,
    }
}

/// A link to a session served in this process for a keel started in `sb` with `args`, with a
/// ring of `ring_events`.
async fn local_link(sb: &Sandbox, args: &[&str], ring_events: usize) -> (Link, Start) {
    let cli = Cli::try_parse_from(std::iter::once("keel").chain(args.iter().copied())).unwrap();
    let env = env_of(sb);
    let clock = Clock::new(env.fixed_clock, env.seed);
    // As a keel process (and the daemon's session/open) reads its start time first.
    let _ = clock.now_ms();
    let settings = keel::cli::invocation::settings(&cli, &env).unwrap();
    let setup = keel::setup::host_setup(&settings, &env, &clock, true)
        .await
        .unwrap();
    Link::local(setup, (ring_events, 8 << 20)).await.unwrap()
}

#[test]
fn a_local_link_and_a_daemon_link_carry_the_same_stream() {
    let script = fixture("hello.json");
    let args = scripted_args(&[], &script, &["--session-id", "same"]);
    let rt = rt();

    let here = Sandbox::new();
    let local = rt.block_on(async {
        let (mut link, start) = local_link(&here, &args, 10_000).await;
        assert_eq!(link.session_id(), "same");
        assert_eq!(start.seq, 0);
        let events = run_prompt(&mut link).await;
        let text = link.request("get_last_assistant_text", json!({})).await;
        (events, text)
    });

    let there = Sandbox::new();
    std::fs::set_permissions(there.home(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let d = Daemon::start(&there, &["--idle-exit", "0"]);
    let mut c = d.client();
    let opened = c.call(
        "session/open",
        json!({"cwd": there.work(), "spec": crate::common::daemon::spec(&args)}),
    );
    assert_eq!(opened["result"]["sessionId"], "same", "{opened}");
    let remote = rt.block_on(async {
        let (mut link, start) = Link::daemon(
            &keel::client::dial::Dial::Local(d.socket.clone()),
            "same",
            None,
            true,
        )
        .await
        .unwrap();
        assert_eq!(start.seq, 0);
        assert!(start.snapshot.is_some());
        let events = run_prompt(&mut link).await;
        let text = link.request("get_last_assistant_text", json!({})).await;
        let unknown = link.request("no_such_command", json!({})).await;
        assert!(unknown.is_err(), "{unknown:?}");
        (events, text)
    });
    assert!(local.0.len() > 5, "{:?}", local.0);
    assert_eq!(local, remote);
    assert_eq!(local.1, Ok(json!({"text": "Hello from keel!"})));
}

/// DESIGN §2: a link to a session in this process hands each event typed, so a front end
/// reads it without parsing its line back; the typed event is what the line parses to.
#[test]
fn a_local_link_hands_each_event_typed_as_its_line_reads() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for name in ["hello.json", "tool_error.json"] {
        let script = fixture(name);
        let sb = Sandbox::new();
        std::fs::write(sb.work().join("notes.txt"), "no typo here\n").unwrap();
        let args = ["--provider", "scripted", "--script", &script];
        let notes = rt.block_on(async {
            let (mut link, _) = local_link(&sb, &args, 10_000).await;
            let answer = link.request("prompt", json!({"message": "hi"})).await;
            assert_eq!(answer, Ok(json!({"disposition": "started"})));
            let mut notes = Vec::new();
            loop {
                match link.next().await.expect("the link ended early") {
                    Note::Event { line, typed, .. } => {
                        let done = line.contains("\"type\":\"agent_settled\"");
                        notes.push((line, typed));
                        if done {
                            return notes;
                        }
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
        });
        assert!(notes.len() > 5, "{name}: {} events", notes.len());
        for (line, typed) in &notes {
            let typed = typed
                .as_ref()
                .unwrap_or_else(|| panic!("{name}: not typed: {line}"));
            let parsed = WireEvent::parse(line).unwrap();
            assert_eq!(typed.kind(), parsed.kind(), "{line}");
            assert_eq!(typed.wire().as_ref(), Some(&parsed), "{line}");
        }
    }
}

/// Waits until at least three 50 ms approval timeouts have passed, with no sleep: an RPC-mode
/// keel (stdio RPC has no attachments, so its timeouts always run) asks three times in a row
/// and each dialog is denied by its own timeout before its run settles.
fn three_timeouts(sb: &Sandbox, script: &str) {
    let mut rpc = Rpc::start(
        sb,
        &scripted_args(
            &[],
            script,
            &[
                "--permission",
                "ask",
                "--approval-timeout",
                "0.05",
                "--no-session",
            ],
        ),
    );
    rpc.send(&json!({"type": "prompt", "message": "tick"}));
    rpc.wait(&json!({"type": "agent_settled"}));
    let denials = rpc
        .seen
        .iter()
        .filter(|l| l.contains("got no answer"))
        .count();
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(denials, 3, "the clock session's three dialogs timed out");
}

/// The in-process TUI's link is an interactive client: an approval dialog waits for the person
/// at the terminal past `--approval-timeout` (three timeouts pass here), and their answer is
/// the one that counts.
#[test]
fn an_in_process_approval_waits_for_its_answer_past_the_timeout() {
    let sb = Sandbox::new();
    let script = sb.dir.path().join("ask.json");
    let call = |id: &str, m: &str| json!({"match": m, "chunks": [{"toolCall": {"id": id, "name": "bash", "arguments": {"command": "rm -rf build"}}}]});
    let turns = json!({"turns": [
        call("call_rm", "^clean"),
        {"match": "^clean", "chunks": [{"text": "Left it alone."}]},
        call("tick_1", "^tick"), call("tick_2", "^tick"), call("tick_3", "^tick"),
        {"match": "^tick", "chunks": [{"text": "Ticked."}]}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let script = script.display().to_string();
    let args = scripted_args(
        &[],
        &script,
        &["--permission", "ask", "--approval-timeout", "0.05"],
    );
    let rt = rt();
    let lines = rt.block_on(async {
        let (mut link, _) = local_link(&sb, &args, 10_000).await;
        let answer = link.request("prompt", json!({"message": "clean up"})).await;
        assert_eq!(answer, Ok(json!({"disposition": "started"})));
        let mut lines = Vec::new();
        let dialog = loop {
            let Some(Note::Event { line, .. }) = link.next().await else {
                panic!("the link ended before the dialog: {lines:?}");
            };
            lines.push(line.to_string());
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v["type"] == "extension_ui_request" && v["method"] == "confirm" {
                break v["id"].as_str().unwrap().to_string();
            }
        };
        // The host goes on running here while the clock runs on a blocking thread.
        let script2 = script.clone();
        let clock_sb = Sandbox::new();
        tokio::task::spawn_blocking(move || three_timeouts(&clock_sb, &script2))
            .await
            .unwrap();
        while let Some(Note::Event { line, .. }) = link.try_next() {
            lines.push(line.to_string());
        }
        let denied = lines.iter().any(|l| l.contains("got no answer"));
        assert!(!denied, "the dialog timed out: {lines:?}");
        link.request(
            "extension_ui_response",
            json!({"id": dialog, "confirmed": false}),
        )
        .await
        .unwrap();
        loop {
            let Some(Note::Event { line, .. }) = link.next().await else {
                break;
            };
            lines.push(line.to_string());
            if line.contains("\"type\":\"agent_settled\"") {
                break;
            }
        }
        lines
    });
    let end = lines
        .iter()
        .find(|l| l.contains("\"type\":\"tool_execution_end\""))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(end.contains("\"isError\":true"), "{end}");
    assert!(
        !end.contains("no answer"),
        "denied by the user, not by the clock: {end}"
    );
    assert!(
        lines.iter().any(|l| l.contains("Left it alone.")),
        "{lines:?}"
    );
}

/// A local link that falls behind is dropped like a slow daemon client: its stream ends with
/// `Lagged`, and `reattach_local` from the last event seen continues with no gap (a replay
/// while the ring holds what followed, else a snapshot).
#[test]
fn a_local_link_that_falls_behind_is_told_and_reattaches() {
    let sb = Sandbox::new();
    let script = sb.dir.path().join("long.json");
    let chunks: Vec<serde_json::Value> = (0..9_000)
        .map(|i| json!({"text": format!("w{i} ")}))
        .collect();
    let turns = json!({"turns": [{"chunks": chunks}, {"chunks": [{"text": "short"}]}]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let script = script.display().to_string();
    let args = scripted_args(&[], &script, &["--no-session"]);
    let rt = rt();
    rt.block_on(async {
        // A ring of 100 events: the link's queues hold 100 + 2 × 4096 at most.
        let (mut link, start) = local_link(&sb, &args, 100).await;
        let answer = link.request("prompt", json!({"message": "long"})).await;
        assert_eq!(answer, Ok(json!({"disposition": "started"})));
        // Nothing is read while the run streams its 9,000 chunks: wait for its end by asking.
        loop {
            let state = link.request("get_state", json!({})).await.unwrap();
            if state["isStreaming"] == false {
                break;
            }
            tokio::task::yield_now().await;
        }
        let mut last = start.seq;
        let lagged = loop {
            match link.next().await.expect("the stream ends with Lagged") {
                Note::Event { seq, .. } => {
                    assert_eq!(seq, last + 1, "no gap before the drop");
                    last = seq;
                }
                Note::Lagged { seq } => break seq,
                other => panic!("unexpected {other:?}"),
            }
        };
        assert!(lagged > last, "dropped at {lagged}, read up to {last}");
        let again = link
            .reattach_local((&start.epoch, last))
            .await
            .expect("a local link")
            .unwrap();
        assert!(
            again.snapshot.is_some(),
            "what followed {last} is out of the ring of 100"
        );
        // The stream goes on from the snapshot's seq.
        let answer = link.request("prompt", json!({"message": "short"})).await;
        assert_eq!(answer, Ok(json!({"disposition": "started"})));
        let mut next = again.seq;
        loop {
            let Some(Note::Event { seq, line, .. }) = link.next().await else {
                panic!("the stream ended")
            };
            assert_eq!(seq, next + 1);
            next = seq;
            if line.contains("\"type\":\"agent_settled\"") {
                break;
            }
        }
    });
}
