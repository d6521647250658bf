//! `/rewind` in ACP (issue 32 point 4): the session advertises it among its available
//! commands; `/rewind` lists the checkpoints as an agent message; `/rewind ID files` puts a
//! file a scripted turn edited back on disk through the host and says so; a bad id or word is
//! answered with a clear message, and the prompt ends normally each time.

use serde_json::json;

use crate::acp::{acp_script, init, new_session, prompt};
use crate::common::rpc::Rpc;
use crate::common::support::{strs, Sandbox};
use crate::tui_rewind::edit_script;

/// Sends `text` as prompt `id`; the agent message it got, once the prompt ended `end_turn`.
fn said(a: &mut Rpc, id: &str, session: &str, text: &str) -> String {
    prompt(a, id, session, text);
    let chunk = a.wait(&json!({"params": {"update": {"sessionUpdate": "agent_message_chunk"}}}));
    let done = a.wait(&json!({"id": id}));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    chunk["params"]["update"]["content"]["text"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn acp_rewind_lists_the_checkpoints_and_rewinds_the_files_through_the_host() {
    let sb = Sandbox::new();
    let a_txt = sb.work().join("a.txt");
    std::fs::write(&a_txt, "one\ntwo\n").unwrap();
    let mut a = acp_script(&sb, &edit_script(&sb), &["--permission", "auto"]);
    init(&mut a);
    let session = new_session(&mut a, &sb);
    let commands =
        a.wait(&json!({"params": {"update": {"sessionUpdate": "available_commands_update"}}}));
    let names = strs(&commands["params"]["update"]["availableCommands"], "name");
    assert_eq!(names, ["rewind"]);

    let none = said(&mut a, "r0", &session, "/rewind");
    assert!(none.contains("no checkpoints yet"), "{none}");

    prompt(&mut a, "p1", &session, "edit a");
    let done = a.wait(&json!({"id": "p1"}));
    assert_eq!(done["result"]["stopReason"], "end_turn");
    assert_eq!(std::fs::read_to_string(&a_txt).unwrap(), "ONE\ntwo\n");

    let list = said(&mut a, "r1", &session, "/rewind");
    assert!(list.contains(": edit a · "), "{list}");
    let id = checkpoint_id(&list);

    let bad = said(&mut a, "r2", &session, &format!("/rewind {id} everything"));
    assert!(bad.starts_with("usage: /rewind"), "{bad}");
    assert_eq!(std::fs::read_to_string(&a_txt).unwrap(), "ONE\ntwo\n");
    let unknown = said(&mut a, "r3", &session, "/rewind nosuchid files");
    assert!(
        unknown.contains("The rewind did not happen: no user message or checkpoint"),
        "{unknown}"
    );

    let rewound = said(&mut a, "r4", &session, &format!("/rewind {id} files"));
    assert!(
        rewound.starts_with("Rewound the files to before message"),
        "{rewound}"
    );
    assert!(rewound.contains("- restored a.txt"), "{rewound}");
    assert_eq!(std::fs::read_to_string(&a_txt).unwrap(), "one\ntwo\n");
    let (_, err, code) = a.finish();
    assert_eq!(code, 0, "{err}");
}

/// The first checkpoint id of a `/rewind` listing (`` - `ID` (message …``).
fn checkpoint_id(list: &str) -> String {
    let at = list.find("- `").expect("a checkpoint row") + 3;
    let rest = &list[at..];
    rest[..rest.find('`').unwrap()].to_string()
}
