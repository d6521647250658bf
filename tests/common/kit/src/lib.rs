//! The test helpers shared by keel's integration tests, unit tests and benchmarks: a generated
//! session file of realistic messages (`session_gen`) and a private sshd on 127.0.0.1 (`sshd`).
//! They use std, serde_json and nix only, not keel.

pub mod session_gen;
pub mod sshd;
