//! The one integration-test binary: every `tests/*.rs` module is declared here.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod acp;
mod acp_fs;
mod acp_sdk;
mod architecture;
mod chaos;
mod command_line;
mod compaction;
mod context_files;
mod daemon;
mod daemon_approvals;
mod daemon_clients;
mod daemon_dial;
mod daemon_load;
mod daemon_mcp;
mod daemon_parity;
mod daemon_peer;
mod daemon_reopen;
mod daemon_sessions;
mod daemon_support;
mod exit_codes;
mod export_html;
mod external_tools;
mod http_server;
mod journal;
mod json_mode;
mod kernel;
mod link;
mod local_servers;
mod mcp;
mod mcp_cli;
mod mcp_http;
mod mcp_interop;
mod mentions;
mod model_scope;
mod projectors;
mod providers;
mod remote;
mod rpc;
mod schedule;
mod session_load;
mod session_safety;
mod sessions;
mod skills;
mod sshd_support;
mod stdio;
mod support;
mod tool_loop;
mod tools_hardening;
mod tui;
mod tui_attach;
mod tui_cells;
mod tui_daemon;
mod tui_first_run;
mod tui_live;
mod tui_live_picker;
mod tui_md;
mod tui_pty;
mod tui_reflow;
mod tui_states;
mod tui_transcript;
mod tui_vt100;
mod tui_wire;

/// A test file that is not declared above would silently never run.
#[test]
fn every_test_file_is_declared() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let all = std::fs::read_to_string(dir.join("all.rs")).unwrap();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().and_then(|e| e.to_str()) != Some("rs") || stem == "all" {
            continue;
        }
        assert!(
            all.contains(&format!("mod {stem};")),
            "tests/{stem}.rs is not declared in tests/all.rs"
        );
    }
}
