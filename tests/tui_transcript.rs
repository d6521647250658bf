//! The transcript pager (`/transcript`): the real binary in a pty opens the whole session on
//! the alternate screen with a bash call's output in full (the scrollback cell shows a tail),
//! searches it with `/`, and `q` gives the inline view back as it was.

use serde_json::json;

use crate::common::pty::spawn;
use crate::common::support::Sandbox;
use crate::mcp::script;

#[test]
fn transcript_shows_every_output_line_searches_and_gives_the_view_back() {
    let sb = Sandbox::new();
    let script = script(
        &sb,
        json!([
            {"chunks": [{"thinking": "I count first."},
                        {"toolCall": {"id": "c1", "name": "bash", "arguments": {"command": "seq 1 120 | sed 's/^/row /'"}}}]},
            {"chunks": [{"text": "Counted."}]}
        ]),
    );
    let keel = env!("CARGO_BIN_EXE_keel");
    let (mut s, mut child) = spawn(
        &sb,
        &format!(
            "'{keel}' --provider scripted --script '{script}' --permission auto; echo KEEL_EXIT=$?"
        ),
    );
    s.wait_for("the editor", |t| t.contains("Ask anything"));
    s.send("count\r");
    s.wait_for("the answer", |t| t.contains("Counted."));
    let inline = s.text();
    assert!(
        !inline.contains("row 3\n"),
        "the cell shows a tail only:\n{inline}"
    );

    s.send("/transcript\r");
    s.wait_for("the pager", |t| t.contains("transcript · rows"));
    s.send("g");
    s.wait_for("the top", |t| {
        t.contains("› count") && t.contains("I count first.")
    });
    s.send("/row 77\r");
    s.wait_for("the match", |t| {
        t.lines().next().is_some_and(|l| l.contains("row 77"))
            && t.contains("1 row matches “row 77”")
    });
    s.send("q");
    s.wait_for("the view again", |t| {
        t.contains("Counted.") && t.contains("Ask anything") && !t.contains("transcript · rows")
    });
    s.quit("\x04", &mut child);
    let raw = String::from_utf8_lossy(&s.raw);
    let (enter, leave) = (
        raw.find("\x1b[?1049h").unwrap(),
        raw.rfind("\x1b[?1049l").unwrap(),
    );
    assert!(enter < leave, "the alternate screen is entered, then left");
}
