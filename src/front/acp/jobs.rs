//! keel's ACP extension methods for a session's background jobs (issue 47, DESIGN §19):
//! `_keel/jobs/list`, `_keel/jobs/read` and `_keel/jobs/kill`, with the params and results of
//! the pi commands `get_jobs`, `read_job` and `kill_job` (plus the session's `sessionId`),
//! which the session's host serves as it does for RPC and the daemon. ACP reserves method
//! names starting with `_` for extensions; an agent answers the ones it does not know with
//! "method not found".

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::kernel::jobs::JobId;
use crate::wire::jsonrpc::{self as j, ErrorObject};
use crate::wire::pi::Command;

/// The extension methods' names.
pub const LIST: &str = "_keel/jobs/list";
pub const READ: &str = "_keel/jobs/read";
pub const KILL: &str = "_keel/jobs/kill";

/// Whether `method` is one of them.
pub fn is_jobs_method(method: &str) -> bool {
    [LIST, READ, KILL].contains(&method)
}

/// Their params: the session, and the job with the offsets for `read`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    session_id: String,
    #[serde(default)]
    job_id: Option<JobId>,
    #[serde(default)]
    since: Option<u64>,
    #[serde(default)]
    max: Option<u64>,
}

/// The session `method`'s params name and the pi command it runs there.
pub fn command(method: &str, params: Option<&RawValue>) -> Result<(String, Command), ErrorObject> {
    let p: Params = j::params(params)?;
    let job = || {
        p.job_id.ok_or_else(|| {
            ErrorObject::new(
                j::INVALID_PARAMS,
                format!("Invalid params: {method} takes `jobId` (a job's id)"),
            )
        })
    };
    let command = match method {
        READ => Command::ReadJob {
            job_id: job()?,
            since: p.since,
            max: p.max,
        },
        KILL => Command::KillJob { job_id: job()? },
        _ => Command::GetJobs {},
    };
    Ok((p.session_id, command))
}
