//! The one integration-test binary: every `tests/*.rs` module is declared here; the helpers
//! live in `tests/common/`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr
)]

mod acp;
mod acp_claude;
mod acp_fs;
mod acp_jobs;
mod acp_rewind;
mod acp_rules;
mod acp_sandbox;
mod acp_sdk;
mod always_allow;
mod architecture;
mod attach_job;
mod chaos;
mod checkpoints;
mod claude_commands;
mod claude_compat;
mod claude_dirs;
mod claude_events;
mod claude_payloads;
mod claude_settings;
mod command_line;
mod common;
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
mod daemon_protocol;
mod daemon_reopen;
mod daemon_sessions;
mod docs;
mod exit_codes;
mod export_html;
mod external_tools;
mod gemini;
mod gemini_stream;
mod hooks;
mod hooks_kernel;
mod hooks_sandbox;
mod hooks_unattended;
mod jobs;
mod jobs_daemon;
mod jobs_rpc;
mod jobs_timeout;
mod jobs_tools;
mod journal;
mod json_mode;
mod kernel;
mod link;
mod local_servers;
mod lsp;
mod max_cost;
mod mcp;
mod mcp_cli;
mod mcp_http;
mod mcp_interop;
mod mentions;
mod model_scope;
mod output_schema;
mod permission_rules;
mod permission_rules_hostile;
mod project_trust;
mod projectors;
mod providers;
mod remote;
mod responses;
mod rpc;
mod sandbox;
mod sandbox_caps;
mod sandbox_env;
mod sandbox_escalation;
mod sandbox_git;
mod sandbox_limits;
mod sandbox_net;
mod sandbox_race;
mod sandbox_settings;
mod sandbox_sockets;
mod sandbox_zygote;
mod schedule;
mod session_load;
mod session_safety;
mod sessions;
mod settings;
mod skills;
mod stdio;
mod subagent_dialogs;
mod subagents;
mod todo_plan;
mod tool_loop;
mod tools_hardening;
mod tui;
mod tui_attach;
mod tui_cells;
mod tui_claude;
mod tui_daemon;
mod tui_daily;
mod tui_first_run;
mod tui_jobs;
mod tui_live;
mod tui_live_picker;
mod tui_md;
mod tui_permissions;
mod tui_pty;
mod tui_reflow;
mod tui_rewind;
mod tui_states;
mod tui_subagent;
mod tui_transcript;
mod tui_vt100;
mod tui_wire;
mod web;
mod web_browser;
mod web_relay;
mod web_sse;
mod worktree_cli;
mod worktrees;

/// A test file that is not declared above (or a helper not declared in `tests/common/mod.rs`)
/// would silently never be compiled.
#[test]
fn every_test_file_is_declared() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    assert_declared(&dir, "all.rs");
    assert_declared(&dir.join("common"), "mod.rs");
}

/// Every `*.rs` file in `dir` but `root` appears as `mod NAME;` in `root`.
fn assert_declared(dir: &std::path::Path, root: &str) {
    let declared = std::fs::read_to_string(dir.join(root)).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_name().and_then(|s| s.to_str()) else {
            continue;
        };
        let Some(stem) = name.strip_suffix(".rs") else {
            continue;
        };
        if name == root {
            continue;
        }
        assert!(
            declared.contains(&format!("mod {stem};")),
            "{} is not declared in {}",
            path.display(),
            dir.join(root).display()
        );
    }
}
