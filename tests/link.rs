//! A front end's `Link` gives the same stream in-process and through the daemon: the same
//! prompt on the same scripted session yields the same numbered wire lines either way, and
//! commands are answered alike.

use std::os::unix::fs::PermissionsExt;

use clap::Parser;
use keel::cli::Cli;
use keel::front::link::{Link, Note};
use keel::kernel::clock::Clock;
use keel::mode::Env;
use serde_json::json;

use crate::daemon_support::Daemon;
use crate::support::{fixture, Sandbox, CLOCK};

/// The notes up to and including the `agent_settled` line, as `(seq, line)`.
async fn run_prompt(link: &mut Link) -> Vec<(u64, String)> {
    let answer = link.request("prompt", json!({"message": "hi"})).await;
    assert_eq!(answer, Ok(json!({"disposition": "started"})));
    let mut out = Vec::new();
    loop {
        match link.next().await.expect("the link ended early") {
            Note::Event { seq, line } => {
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

#[test]
fn a_local_link_and_a_daemon_link_carry_the_same_stream() {
    let script = fixture("hello.json");
    let args = [
        "--provider",
        "scripted",
        "--script",
        &script,
        "--session-id",
        "same",
    ];
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let here = Sandbox::new();
    let local = rt.block_on(async {
        let cli = Cli::try_parse_from(std::iter::once("keel").chain(args)).unwrap();
        let env = Env {
            stdin_tty: false,
            stdout_tty: false,
            stderr_tty: false,
            no_color: true,
            cwd: here.work(),
            keel_home: here.home(),
            fixed_clock: Some(CLOCK.parse().unwrap()),
            seed: Some(here.seed),
            temp_dir: here.dir.path().to_path_buf(),
            log_filter: "off".into(),
            test_panic: false,
            vars: Default::default(),
            retry_base_ms: None,
        };
        let clock = Clock::new(env.fixed_clock, env.seed);
        // As a keel process (and the daemon's session/open) reads its start time first.
        let _ = clock.now_ms();
        let setup = keel::setup::host_setup(&cli, &env, &clock, true)
            .await
            .unwrap();
        let (mut link, start) = Link::local(setup, (10_000, 8 << 20)).await.unwrap();
        assert_eq!(link.session_id(), "same");
        assert_eq!(start.seq, 0);
        let events = run_prompt(&mut link).await;
        let text = link.request("get_last_assistant_text", json!({})).await;
        (events, text)
    });

    let there = Sandbox::new();
    std::fs::set_permissions(there.home(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let d = Daemon::start(&there, &["--idle-exit", "0"]);
    let mut c = d.connect();
    c.hello(false);
    let opened = c.call("session/open", json!({"cwd": there.work(), "args": args}));
    assert_eq!(opened["result"]["sessionId"], "same", "{opened}");
    let remote = rt.block_on(async {
        let (mut link, start) = Link::daemon(&d.socket, "same", None, true).await.unwrap();
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

/// Regression: a dialog answer sent over a local link (the in-process TUI, ACP) never reached
/// the session, which reads the dialog id from the request id (the daemon's connection sets
/// it); the call waited for an answer forever.
#[test]
fn a_dialog_answer_over_a_local_link_reaches_the_session() {
    let script = fixture("blocked.json");
    let args = [
        "--provider",
        "scripted",
        "--script",
        &script,
        "--permission",
        "ask",
    ];
    let sb = Sandbox::new();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cli = Cli::try_parse_from(std::iter::once("keel").chain(args)).unwrap();
        let env = Env {
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
            vars: Default::default(),
            retry_base_ms: None,
        };
        let clock = Clock::new(env.fixed_clock, env.seed);
        let setup = keel::setup::host_setup(&cli, &env, &clock, true)
            .await
            .unwrap();
        let (mut link, _) = Link::local(setup, (10_000, 8 << 20)).await.unwrap();
        let answer = link.request("prompt", json!({"message": "go"})).await;
        assert_eq!(answer, Ok(json!({"disposition": "started"})));
        let denied = tokio::time::timeout(std::time::Duration::from_secs(60), async {
            loop {
                let Some(Note::Event { line, .. }) = link.next().await else {
                    panic!("the link ended early");
                };
                if line.contains("\"type\":\"extension_ui_request\"") {
                    let r = link
                        .request(
                            "extension_ui_response",
                            json!({"id": "call_rm", "confirmed": false}),
                        )
                        .await;
                    assert_eq!(r, Ok(json!({})));
                }
                if line.contains("\"type\":\"tool_execution_end\"") {
                    return line.to_string();
                }
            }
        })
        .await
        .expect("the dialog answer never reached the session");
        assert!(denied.contains("denied by the user"), "{denied}");
    });
}
