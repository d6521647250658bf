//! `keel attach` with no id while several sessions are live: the live-session picker, as
//! drawn rows (a snapshot) and end to end in a pseudo-terminal against a test daemon (killed
//! by its guard, also when the test fails).

use keel::front::tui::live_picker::{LivePicker, LiveSession};
use keel::front::tui::paint;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use serde_json::json;

use crate::common::daemon::{open, Daemon};
use crate::common::pty::spawn;
use crate::common::support::{snap, Sandbox};

fn live(
    id: &str,
    state: &str,
    name: Option<&str>,
    cwd: &str,
    age_ms: u64,
    clients: u64,
) -> LiveSession {
    LiveSession {
        id: id.to_string(),
        state: state.to_string(),
        name: name.map(str::to_string),
        cwd: cwd.to_string(),
        age_ms,
        clients,
        first_prompt: None,
    }
}

fn screen(p: &LivePicker, w: u16, h: u16) -> String {
    let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
    p.render(buf.area, &mut buf);
    let rows: Vec<String> = (0..h).map(|y| paint::row_text(&buf, y)).collect();
    format!("{w}x{h}\n{}\n", rows.join("\n"))
}

#[test]
fn live_picker_rows() {
    let sessions = vec![
        live(
            "7f3a9c21-4b6e-4d0a-9e55-0c1d2e3f4a5b",
            "idle",
            None,
            "/srv/ci/build",
            2 * 3_600_000 + 5,
            0,
        ),
        live(
            "0c1d2e3f-aaaa-4bbb-8ccc-123456789abc",
            "running",
            Some("Refactor the kernel"),
            "/home/me/src/keel",
            3 * 60_000,
            1,
        ),
        live(
            "e5f6a7b8-1111-4222-8333-444455556666",
            "idle",
            Some("日本語のドキュメント"),
            "/home/me",
            42_000,
            2,
        ),
        live(
            "9a8b7c6d-0000-4000-8000-000000000000",
            "running",
            None,
            "/home/me/very/long/path/to/a/project/deep/inside",
            3 * 86_400_000,
            12,
        ),
    ];
    let mut p = LivePicker::new(sessions, Some("/home/me"));
    let mut out = screen(&p, 80, 7);
    out.push_str(&screen(&p, 48, 7));
    p.handle_key(crossterm::event::KeyEvent::from(
        crossterm::event::KeyCode::Down,
    ));
    for c in "~/".chars() {
        p.handle_key(crossterm::event::KeyEvent::from(
            crossterm::event::KeyCode::Char(c),
        ));
    }
    out.push_str(&screen(&p, 80, 7));
    snap("live_picker_rows", &out);
}

/// Opens sessions `older` and then `newer` (which has a prompt answered) in the test daemon.
fn two_sessions(d: &Daemon, sb: &Sandbox) {
    let mut c = d.client();
    assert_eq!(
        open(&mut c, sb, "hello.json", &["--session-id", "older"]),
        "older"
    );
    c.call("session/attach", json!({"sessionId": "older"}));
    let r = c.call("prompt", json!({"sessionId": "older", "message": "hi"}));
    assert!(r.get("result").is_some(), "{r}");
    c.events_until("agent_settled");
    assert_eq!(
        open(&mut c, sb, "hello.json", &["--session-id", "newer"]),
        "newer"
    );
}

/// The screen rows that list a session (contain `~/work`), trimmed.
fn listed(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.contains("~/work"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect()
}

#[test]
fn attach_without_an_id_opens_a_picker_down_enter_attaches_esc_leaves() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    two_sessions(&d, &sb);
    let keel = env!("CARGO_BIN_EXE_keel");
    let socket = d.socket.display().to_string();
    let attach = format!("'{keel}' attach --socket '{socket}'; echo ATTACH_EXIT=$?");

    let (mut w, mut child) = spawn(&sb, &attach);
    w.wait_for("both sessions in the picker", |t| listed(t).len() == 2);
    let rows = listed(&w.text());
    assert!(
        rows[0].starts_with("› newer idle") && rows[0].ends_with("0 clients ~/work"),
        "{rows:?}"
    );
    assert!(rows[1].starts_with("older idle"), "older second: {rows:?}");
    assert!(
        w.text().contains("Attach to a session · 2 live"),
        "{}",
        w.text()
    );
    w.send("\x1b[B\r");
    w.wait_for("the second session attached", |t| {
        t.contains("session older in the keel daemon") && t.contains("Hello from keel!")
    });
    assert!(
        !w.text().contains("Attach to a session"),
        "the picker is gone: {}",
        w.text()
    );
    w.send("/detach\r");
    w.wait_for("the goodbye", |t| {
        t.contains("Left session older") && t.contains("ATTACH_EXIT=")
    });
    assert!(w.text().contains("ATTACH_EXIT=0"), "{}", w.text());
    assert!(child.wait().unwrap().success());

    let (mut w, mut child) = spawn(&sb, &attach);
    w.wait_for("the picker again", |t| listed(t).len() == 2);
    w.send("\x1b");
    w.wait_for("the exit", |t| t.contains("ATTACH_EXIT="));
    let text = w.text();
    assert!(text.contains("ATTACH_EXIT=0"), "{text}");
    assert!(
        listed(&text).is_empty() && !text.contains("Attach to a session"),
        "erased: {text}"
    );
    assert!(
        !text.contains("Left session") && !text.contains("SESSION"),
        "nothing printed: {text}"
    );
    assert!(child.wait().unwrap().success());
}

#[test]
fn attach_without_an_id_and_no_terminal_lists_the_sessions_and_fails_with_usage() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    two_sessions(&d, &sb);
    let socket = d.socket.display().to_string();
    let out = sb.cmd(&["attach", "--socket", &socket]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("SESSION") && stdout.contains("older") && stdout.contains("newer"),
        "{stdout}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("several sessions are live; name one"),
        "{stderr}"
    );
}

#[test]
fn sigterm_in_the_picker_puts_the_terminal_back_and_exits_143() {
    let sb = Sandbox::new();
    let d = Daemon::start(&sb, &["--idle-exit", "0"]);
    two_sessions(&d, &sb);
    let keel = env!("CARGO_BIN_EXE_keel");
    let socket = d.socket.display().to_string();
    // The shell reports keel's pid, so the test can signal keel itself.
    let shell = format!(
        "'{keel}' attach --socket '{socket}' </dev/tty & echo KEEL_PID=$!; wait $!; echo KEEL_EXIT=$?; stty -a"
    );
    let (mut w, mut child) = spawn(&sb, &shell);
    w.wait_for("the picker", |t| listed(t).len() == 2);
    let pid = w.shell_pid();
    w.terminate(pid);
    let text = w.text();
    assert!(text.contains("KEEL_EXIT=143"), "{text}");
    let words: Vec<&str> = text.split_whitespace().collect();
    assert!(
        words.contains(&"icanon") && !words.contains(&"-icanon"),
        "{text}"
    );
    assert!(
        words.contains(&"echo") && !words.contains(&"-echo"),
        "{text}"
    );
    assert!(!w.parser.screen().bracketed_paste());
    assert!(child.wait().unwrap().success());
}

/// The picker said nothing of what a session is about: it shows the name, else the first
/// prompt (cut to fit), with the cwd at the right.
#[test]
fn the_picker_shows_a_name_else_the_first_prompt() {
    let mut unnamed = live(
        "7f3a9c21-4b6e-4d0a-9e55-0c1d2e3f4a5b",
        "running",
        None,
        "/home/me/src/keel",
        60_000,
        1,
    );
    unnamed.first_prompt =
        Some("please look at the flaky test in the loader and tell me why it fails".into());
    let named = live(
        "0c1d2e3f-aaaa-4bbb-8ccc-123456789abc",
        "idle",
        Some("Refactor the kernel"),
        "/home/me/src/keel",
        3 * 60_000,
        0,
    );
    let p = LivePicker::new(vec![unnamed, named], Some("/home/me"));
    let mut out = screen(&p, 80, 5);
    out.push_str(&screen(&p, 48, 5));
    snap("live_picker_first_prompt", &out);
    assert!(out.contains("please look at the flaky test"), "{out}");
}

/// `keel ps` showed only a name (most sessions have none), in columns that a long or wide
/// name pushed out of line: the name, else the first prompt cut to fit, in aligned columns.
#[test]
fn keel_ps_table_shows_a_name_else_the_first_prompt_in_aligned_columns() {
    let status = json!({"sessions": [
        {"sessionId": "0c1d2e3f-aaaa-4bbb-8ccc-123456789abc", "state": "idle", "clients": 0,
         "ageMs": 180_000, "name": "日本語のドキュメント", "cwd": "/home/me/src/keel",
         "firstPrompt": "translate the docs",
         "sandbox": {"mode": "workspace-write", "network": false, "mechanism": "bubblewrap"}},
        {"sessionId": "7f3a9c21-4b6e-4d0a-9e55-0c1d2e3f4a5b", "state": "running", "clients": 12,
         "ageMs": 3_600_000, "cwd": "/srv/ci",
         "sandbox": {"mode": "off", "network": true, "mechanism": "off"},
         "firstPrompt": "please look at the flaky test in the loader and tell me why it fails on CI\nsecond line"},
        {"sessionId": "live", "state": "idle", "clients": 1, "ageMs": 5_000, "cwd": "/tmp"}
    ]});
    let mut sessions = status["sessions"].clone();
    for s in sessions.as_array_mut().unwrap() {
        s["epoch"] = json!("e");
        s["seq"] = json!(0);
    }
    let sessions: Vec<keel::wire::protocol::daemon::LiveSession> =
        serde_json::from_value(sessions).unwrap();
    let table = keel::front::daemon::ps_table(&sessions);
    snap("keel_ps_table", &table);
    let rows: Vec<&str> = table.lines().collect();
    let col = |row: &str, at: usize| {
        let mut w = 0;
        for (i, ch) in row.char_indices() {
            if w >= at {
                return row[i..].to_string();
            }
            w += keel::text::width(&ch.to_string());
        }
        String::new()
    };
    let cwd_at = keel::text::width(&rows[0][..rows[0].find("CWD").unwrap()]);
    assert!(
        col(rows[1], cwd_at).starts_with("/home/me/src/keel"),
        "{table}"
    );
    assert!(col(rows[2], cwd_at).starts_with("/srv/ci"), "{table}");
    assert!(col(rows[3], cwd_at).starts_with("/tmp"), "{table}");
    assert!(rows[2].contains("please look at the flaky test"), "{table}");
    assert!(!table.contains("second line"), "{table}");
}
