//! The one exit-code table (`DESIGN.md` §5). Everything that ends the process maps to an
//! [`Exit`] here; only `main` turns it into a process status.

/// How a keel process ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// 0: the run completed.
    Success,
    /// 1: provider error, stream cut, truncated answer, model error, a session that cannot be
    /// saved (`session_write`), a stdout that fails (`output_write`), the same failing tool
    /// call repeated (`tool_loop`).
    Failed,
    /// 2: bad flags or flag combinations.
    Usage,
    /// 3: credentials, provider/model, config or session lookup problem.
    Config,
    /// 4: `--max-turns` reached before the model finished.
    TurnLimit,
    /// 5: a tool call needed an approval a headless run could not give.
    Blocked,
    /// 4: the run cost more than `--max-cost` before its next model call (the session is
    /// saved; `--continue` goes on).
    Budget,
    /// 70: a bug.
    Internal,
    /// 128+n: ended by signal n after saving the session (141 = broken pipe on stdout).
    Signal(i32),
}

/// Signal numbers keel handles.
pub const SIGHUP: i32 = 1;
pub const SIGINT: i32 = 2;
pub const SIGPIPE: i32 = 13;
pub const SIGTERM: i32 = 15;

impl Exit {
    /// The process exit status.
    pub fn code(self) -> i32 {
        match self {
            Exit::Success => 0,
            Exit::Failed => 1,
            Exit::Usage => 2,
            Exit::Config => 3,
            Exit::TurnLimit => 4,
            Exit::Blocked => 5,
            Exit::Budget => 4,
            Exit::Internal => 70,
            Exit::Signal(n) => 128 + n,
        }
    }

    /// The `outcome` word of the JSON `result` line.
    pub fn outcome(self) -> &'static str {
        match self {
            Exit::Success => "success",
            Exit::Failed => "failed",
            Exit::Usage => "usage",
            Exit::Config => "config_error",
            Exit::TurnLimit => "turn_limit",
            Exit::Blocked => "blocked",
            Exit::Budget => "budget",
            Exit::Internal => "internal",
            Exit::Signal(_) => "interrupted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_design() {
        let rows = [
            (Exit::Success, 0, "success"),
            (Exit::Failed, 1, "failed"),
            (Exit::Usage, 2, "usage"),
            (Exit::Config, 3, "config_error"),
            (Exit::TurnLimit, 4, "turn_limit"),
            (Exit::Blocked, 5, "blocked"),
            (Exit::Budget, 4, "budget"),
            (Exit::Internal, 70, "internal"),
            (Exit::Signal(SIGINT), 130, "interrupted"),
            (Exit::Signal(SIGTERM), 143, "interrupted"),
            (Exit::Signal(SIGHUP), 129, "interrupted"),
            (Exit::Signal(SIGPIPE), 141, "interrupted"),
        ];
        for (exit, code, word) in rows {
            assert_eq!((exit.code(), exit.outcome()), (code, word), "{exit:?}");
        }
    }
}
