//! The protocol's types against the bytes the server writes by hand and the errors it gives.

use serde_json::json;

use super::*;

#[test]
fn a_method_is_decoded_with_its_params_and_others_are_pi_commands() {
    let raw = serde_json::value::to_raw_value(&json!({"sessionId": "s"})).unwrap();
    assert!(matches!(
        Request::decode(session::Detach::NAME, Some(&raw)),
        Ok(Request::Detach(SessionRef { session_id })) if session_id == "s"
    ));
    assert!(matches!(
        Request::decode("get_state", Some(&raw)),
        Ok(Request::Pi(PiCall { command, .. })) if command == "get_state"
    ));
    let e = Request::decode(session::Attach::NAME, None).unwrap_err();
    assert_eq!(
        e.message,
        "Invalid params: params must be an object, and none were sent (missing field `sessionId`)"
    );
    // Methods without params take anything, and nothing.
    assert!(matches!(
        Request::decode(daemon::Status::NAME, None),
        Ok(Request::Status(NoParams))
    ));
    assert_eq!(serde_json::to_string(&NoParams).unwrap(), "{}");
}
