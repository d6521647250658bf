//! Protocol v2's scheduler methods: `schedule/reload` (re-read the store) and `schedule/run`
//! (start a task's run now).

use serde::{Deserialize, Serialize};

use super::{Method, NoParams};

/// `schedule/reload`: re-reads the schedule store.
pub enum Reload {}
impl Method for Reload {
    const NAME: &'static str = "schedule/reload";
    type Params = NoParams;
    type Result = ReloadResult;
}

/// `schedule/reload`'s result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadResult {
    /// Tasks in the store now.
    pub tasks: usize,
}

/// `schedule/run`: starts a task's run now; answered once its session is open and prompted.
pub enum Run {}
impl Method for Run {
    const NAME: &'static str = "schedule/run";
    type Params = RunParams;
    type Result = RunResult;
}

/// `schedule/run`'s params.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunParams {
    /// The task's name.
    pub name: String,
}

/// `schedule/run`'s result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunResult {
    /// The task that runs.
    pub task: String,
    /// The session its run goes on in.
    pub session_id: String,
}
