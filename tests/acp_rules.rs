//! ACP and the settings' permission rules (issue 29): whatever mode the editor picked, an `ask`
//! rule reaches the client as `session/request_permission` (ACP's own answers, by its mode,
//! must not bypass it); the mode itself is the session's (`set_permission_mode` on the host).

use serde_json::{json, Value};

use crate::acp::{call, init, new_session, prompt};
use crate::common::rpc::Rpc;
use crate::common::support::{scripted_args, Sandbox};

/// `keel --mode acp` on a script whose first turn runs `command` in bash.
fn acp_running(sb: &Sandbox, command: &str) -> Rpc {
    let call =
        json!({"toolCall": {"id": "call_1", "name": "bash", "arguments": {"command": command}}});
    let s = json!({"turns": [{"chunks": [call]}, {"chunks": [{"text": "done"}]}]});
    let path = sb.home().join("acp_rules.json");
    std::fs::write(&path, s.to_string()).unwrap();
    let script = path.display().to_string();
    Rpc::start_raw(sb, &scripted_args(&["--mode", "acp"], &script, &[]))
}

#[test]
fn an_ask_rule_reaches_the_acp_client_even_in_auto_mode() {
    let sb = Sandbox::new();
    let settings = sb.work().join(".keel/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    let rules = json!({"permissions": {"ask": ["Bash(touch:*)"]}});
    std::fs::write(&settings, rules.to_string()).unwrap();
    let mut a = acp_running(&sb, "touch x");
    init(&mut a);
    let session = new_session(&mut a, &sb);
    let set = call(
        &mut a,
        "auto",
        "session/set_mode",
        json!({"sessionId": session, "modeId": "auto"}),
    );
    assert_eq!(set["result"], json!({}), "{set}");
    prompt(&mut a, "p1", &session, "touch it");
    let req = a.wait(&json!({"method": "session/request_permission"}));
    assert_eq!(req["params"]["toolCall"]["toolCallId"], "call_1", "{req}");
    let outcome = json!({"outcome": "selected", "optionId": "allow_once"});
    a.send(&json!({"jsonrpc": "2.0", "id": req["id"], "result": {"outcome": outcome}}));
    let answer: Value = a.wait(&json!({"id": "p1"}));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let (_, stderr, code) = a.finish();
    assert_eq!(code, 0, "{stderr}");
    assert!(sb.work().join("x").exists(), "the allowed call ran");
}
