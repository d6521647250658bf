//! The sandbox's network (issue 30 point 4) with real bubblewrap and curl: a server on
//! 127.0.0.1 outside; inside, `off` reaches nothing, `on` reaches it directly, and an allowlist
//! reaches it only through keel's proxy and only by an allowed name (made-up names resolved by
//! the test-only `KEEL_SANDBOX_PROXY_RESOLVE`, so no DNS is asked). Under the Landlock fallback
//! an allowlist is off, with a warning.

use std::path::Path;

use serde_json::{json, Value};

use crate::common::http_server::{Reply, Server};
use crate::common::support::Sandbox;

const BODY: &str = r#"{"from":"outside"}"#;

/// Whether bubblewrap and curl are here (CI installs bubblewrap; curl is on both machines).
fn tools() -> bool {
    let found = |names: &[&str]| names.iter().any(|p| Path::new(p).exists());
    let bwrap = found(&["/usr/bin/bwrap", "/bin/bwrap", "/usr/local/bin/bwrap"]);
    let curl = found(&["/usr/bin/curl", "/bin/curl", "/usr/local/bin/curl"]);
    if !(bwrap && curl) {
        crate::common::support::skipped(&format!(
            "the network allowlist tests need bubblewrap and curl (bwrap: {bwrap}, curl: {curl})"
        ));
    }
    bwrap && curl
}

fn server() -> Server {
    Server::start_with(|_| Reply::json(200, BODY))
}

/// One turn of `bash` calls under `mechanism` with `extra` flags and `envs`; the results
/// (text, is_error) in order, and stderr.
fn run(
    mechanism: &str,
    commands: &[String],
    extra: &[&str],
    envs: &[(&str, &str)],
) -> (Vec<(String, bool)>, String) {
    let sb = Sandbox::new();
    let chunks: Vec<Value> = commands
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"toolCall": {"id": format!("call_{i}"), "name": "bash", "arguments": {"command": c}}})
        })
        .collect();
    let script = sb.dir.path().join("script.json");
    let body = json!({"turns": [{"chunks": chunks}, {"chunks": [{"text": "done"}]}]});
    std::fs::write(&script, body.to_string()).unwrap();
    let script = script.display().to_string();
    let mut args = vec!["--json", "--provider", "scripted", "--script", &script];
    args.extend_from_slice(extra);
    args.push("go");
    let mut cmd = sb.cmd(&args);
    cmd.env("KEEL_SANDBOX_MECHANISM", mechanism);
    cmd.envs(envs.iter().copied());
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let results: Vec<(String, bool)> = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["type"] == "tool_execution_end")
        .map(|v| {
            let text = v["result"]["content"][0]["text"].as_str().unwrap_or("");
            (text.to_string(), v["isError"] == true)
        })
        .collect();
    assert_eq!(results.len(), commands.len(), "{stdout}");
    (results, stderr)
}

/// curl straight at the server, bypassing any proxy; prints its exit status.
fn direct(port: u16, path: &str) -> String {
    format!(
        "curl -sS --noproxy '*' --max-time 10 http://127.0.0.1:{port}/{path}; echo \" exit=$?\""
    )
}

#[test]
fn the_allowlist_lets_named_hosts_through_keels_proxy_and_refuses_others() {
    if !tools() {
        return;
    }
    let server = server();
    let port = server.port;
    let commands = [
        format!("curl -sS http://allowed.test:{port}/plain"),
        format!("curl -sS --proxytunnel http://allowed.test:{port}/tunnel"),
        format!("curl -sS -i http://denied.test:{port}/nope"),
        "curl -sS https://denied.test/; echo \" exit=$?\"".to_string(),
        direct(port, "direct"),
        "echo \"$HTTPS_PROXY|$http_proxy|$ALL_PROXY|$NO_PROXY\"".to_string(),
    ];
    let (r, stderr) = run(
        "bwrap",
        &commands,
        &["--sandbox-network-allow", "allowed.test"],
        &[("KEEL_SANDBOX_PROXY_RESOLVE", "allowed.test=127.0.0.1")],
    );
    assert!(r[0].0.contains(BODY), "plain HTTP through the proxy: {r:?}");
    assert!(r[1].0.contains(BODY), "CONNECT through the proxy: {r:?}");
    assert!(r[2].0.starts_with("HTTP/1.1 403 Forbidden"), "{r:?}");
    assert!(
        r[2].0
            .contains("denied.test is not in the network allowlist"),
        "{r:?}"
    );
    assert!(
        r[3].0.contains("403") && r[3].0.contains("exit=56"),
        "{r:?}"
    );
    assert!(
        !r[4].0.contains(BODY) && !r[4].0.contains("exit=0"),
        "{r:?}"
    );
    let url = r[5].0.split('|').next().unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{r:?}");
    assert_eq!(r[5].0, format!("{url}|{url}|{url}|\n"));
    let paths: Vec<String> = server.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(
        paths,
        ["/plain", "/tunnel"],
        "only the allowed name got through"
    );
    assert!(
        stderr.contains("refused denied.test:") && stderr.contains("not in the network allowlist"),
        "the refusals are logged: {stderr}"
    );
}

#[test]
fn network_on_reaches_the_host_directly_and_off_does_not() {
    if !tools() {
        return;
    }
    for mech in ["bwrap", "landlock"] {
        let server = server();
        let (r, _) = run(mech, &[direct(server.port, "off")], &[], &[]);
        assert!(
            !r[0].0.contains("exit=0"),
            "{mech}: off reached the host: {r:?}"
        );
        let on = ["--sandbox-network", "on"];
        let (r, _) = run(mech, &[direct(server.port, "on")], &on, &[]);
        assert!(
            r[0].0.contains(BODY) && r[0].0.contains("exit=0"),
            "{mech}: {r:?}"
        );
        let paths: Vec<String> = server.seen().into_iter().map(|s| s.path).collect();
        assert_eq!(paths, ["/on"], "{mech}");
    }
}

#[test]
fn under_landlock_an_allowlist_is_off_with_a_warning() {
    if !tools() {
        return;
    }
    let server = server();
    let port = server.port;
    let commands = [
        format!("curl -sS --max-time 10 http://allowed.test:{port}/; echo \" exit=$?\""),
        direct(port, "direct"),
        "echo \"[$HTTP_PROXY]\"".to_string(),
    ];
    let (r, stderr) = run(
        "landlock",
        &commands,
        &["--sandbox-network-allow", "allowed.test"],
        &[("KEEL_SANDBOX_PROXY_RESOLVE", "allowed.test=127.0.0.1")],
    );
    assert!(
        stderr.contains("Warning: the network allowlist (allowed.test) needs bubblewrap"),
        "{stderr}"
    );
    assert!(
        !r[0].0.contains("exit=0") && !r[1].0.contains("exit=0"),
        "{r:?}"
    );
    assert_eq!(r[2].0, "[]\n");
    assert!(server.seen().is_empty());
}

/// Issue 43 point 18: a name the allowlist lets through only by a `*.` pattern must resolve to
/// a public address (no rebinding onto the machine or its network; a name listed exactly may
/// resolve anywhere), and every refusal of the proxy reaches the event stream as a
/// `sandbox_violation` and the model as a line of the call's result. As root and as nobody.
#[test]
fn the_proxys_refusals_are_violations_and_a_wildcard_name_cannot_rebind_to_loopback() {
    if !tools() {
        return;
    }
    use crate::sandbox::{bash, run_as_events, users, world_as};
    let server = server();
    let port = server.port;
    for user in users() {
        let sb = world_as(user);
        let calls = [
            bash(&format!("curl -sS http://listed.test:{port}/listed")),
            bash(&format!("curl -sS http://rebound.wild.test:{port}/rebound")),
            bash(&format!("curl -sS http://denied.test:{port}/denied")),
        ];
        let (r, _, events) = run_as_events(
            &sb,
            user,
            "bwrap",
            &calls,
            &[(
                "KEEL_SANDBOX_PROXY_RESOLVE",
                "listed.test=127.0.0.1,rebound.wild.test=127.0.0.1",
            )],
            &[
                "--sandbox-network-allow",
                "listed.test",
                "--sandbox-network-allow",
                "*.wild.test",
            ],
        );
        assert!(
            r[0].0.contains(BODY),
            "{user:?}: a name listed exactly: {r:?}"
        );
        assert!(r[1].0.contains("not a public address"), "{user:?}: {r:?}");
        assert!(
            r[1].0.ends_with(&format!(
                "[sandbox (workspace-write): rebound.wild.test:{port} is not in the network allowlist]"
            )),
            "{user:?}: {r:?}"
        );
        assert!(
            r[2].0
                .contains("denied.test is not in the network allowlist"),
            "{r:?}"
        );
        let seen: Vec<(String, String)> = events
            .iter()
            .filter(|e| e["type"] == "sandbox_violation")
            .map(|e| {
                (
                    e["reason"].as_str().unwrap().to_string(),
                    e["host"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect();
        for host in ["rebound.wild.test", "denied.test"] {
            let want = ("network_not_allowed".to_string(), format!("{host}:{port}"));
            assert!(seen.contains(&want), "{user:?}: {seen:?}");
        }
    }
    let paths: Vec<String> = server.seen().into_iter().map(|s| s.path).collect();
    assert!(paths.iter().all(|p| p == "/listed"), "{paths:?}");
}
