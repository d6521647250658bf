//! Loading long sessions through the binary: a generated session of realistic messages is
//! continued in RPC mode, and the memory it costs is compared with the size of its file.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::common::rpc::Rpc;
use crate::common::support::{fixture, scripted_args, Sandbox};

pub use keel_testkit::session_gen;

const SESSION_ID: &str = "01a22a4d-c23c-773e-be8a-b1dc1a1a060b";

/// Writes a generated session of `entries` entries where `--continue` in the sandbox finds
/// it; returns the file's size in bytes.
fn write_session(sb: &Sandbox, entries: usize) -> u64 {
    let cwd = sb.work().canonicalize().unwrap();
    let dir = keel::kernel::session::session_dir(&sb.home(), &cwd);
    std::fs::create_dir_all(&dir).unwrap();
    for d in [sb.home().join("sessions"), dir.clone()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let text = session_gen::session_text(&cwd.display().to_string(), SESSION_ID, entries);
    let path: PathBuf = dir.join(format!("2026-01-01T00-00-00-000Z_{SESSION_ID}.jsonl"));
    std::fs::write(&path, &text).unwrap();
    text.len() as u64
}

/// The peak resident memory (VmHWM, bytes) of `keel --mode rpc --continue` after it loaded
/// the session and answered one prompt, so the model request was built from the whole history.
fn peak_after_one_prompt(sb: &Sandbox) -> u64 {
    let script = fixture("hello.json");
    let args = scripted_args(&["--mode", "rpc", "--continue"], &script, &[]);
    let mut rpc = Rpc::spawn(sb.cmd(&args));
    rpc.send_bytes(b"{\"id\":\"p\",\"type\":\"prompt\",\"message\":\"hi\"}\n");
    rpc.wait(&serde_json::json!({"type": "agent_settled"}));
    let status = std::fs::read_to_string(format!("/proc/{}/status", rpc.pid())).unwrap();
    let (_, stderr, code) = rpc.finish();
    assert_eq!(code, 0, "{stderr}");
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// A long session is held in memory once: continuing it and answering a prompt costs less
/// than 2.5x its file size (about 1.6x here, 1.5x for 50,000 entries in the release bench).
/// Before, the file was read whole next to its entries, and the agent's history and every
/// model request were deep copies of the stored messages: 3.8x.
#[cfg(target_os = "linux")]
#[test]
fn a_long_session_is_held_in_memory_once() {
    let small = Sandbox::new();
    write_session(&small, 3);
    let base = peak_after_one_prompt(&small);
    let big = Sandbox::new();
    let size = write_session(&big, 6_000);
    assert!(size > 8 << 20, "the generated session is {size} bytes");
    let peak = peak_after_one_prompt(&big);
    let cost = peak.saturating_sub(base);
    assert!(
        cost * 2 <= size * 5,
        "continuing a {size}-byte session cost {cost} bytes of memory ({:.2}x)",
        cost as f64 / size as f64
    );
}
