//! The first and last lines of JSON mode: the session header and keel's `result` line (written
//! by the JSON front end around the event stream; not events themselves).

use serde::Serialize;

use crate::kernel::message::Usage;

/// The first line of JSON mode: the session header.
#[derive(Debug, Serialize)]
pub struct SessionLine<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub version: u32,
    pub id: &'a str,
    pub timestamp: &'a str,
    pub cwd: &'a str,
    #[serde(rename = "parentSession", skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<&'a str>,
    /// keel's: the git worktree the session runs in (`-w`), its path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worktree: Option<&'a str>,
    /// keel's: that worktree's branch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch: Option<&'a str>,
}

/// The last line of JSON mode (keel's extension; pi clients ignore unknown types).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResultLine<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// `success|failed|turn_limit|budget|blocked|interrupted|config_error|usage|internal`.
    pub outcome: &'a str,
    /// The process exit status that follows this line.
    pub exit_code: i32,
    /// Null when no session existed (e.g. a config error before it was opened).
    pub session_id: Option<&'a str>,
    /// The final assistant text (empty when there was none).
    pub final_text: &'a str,
    /// Summed usage of every model call of the run.
    pub usage: &'a Usage,
    pub duration_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ResultError<'a>>,
    /// With `--output-schema`: the final answer as the JSON value that matched the schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<&'a serde_json::Value>,
}

/// Why a run did not succeed.
#[derive(Debug, Serialize)]
pub struct ResultError<'a> {
    pub kind: &'a str,
    pub message: &'a str,
}
