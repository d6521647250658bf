//! Failed model calls and their automatic retries as one cell: a failed answer's error is held
//! until it is known whether a retry follows (`auto_retry_start`); while retrying, the live
//! status row counts down (`↻ retry 2/3 in 4s: connection refused`); then one line for a
//! retry that worked, or one error for a prompt that failed for good.

use super::{first_line, Activity, HistoryCell, Transcript};

impl Transcript {
    /// A failed answer's error: shown when the run ends, unless a retry takes it over.
    pub(super) fn answer_failed(&mut self, error: &str) {
        self.held_error = Some(error.to_string());
    }

    /// `auto_retry_start`: the live row says which attempt comes, when, and why.
    pub(super) fn retry_scheduled(&mut self, attempt: u32, max: u32, until_ms: i64, error: &str) {
        self.held_error = None;
        self.retry_error = Some((error.to_string(), attempt));
        self.activity = Some(Activity::Retrying {
            attempt,
            max,
            until_ms,
            error: first_line(error).to_string(),
        });
    }

    /// An answer came after retries: one line says so (`auto_retry_end` only comes when the
    /// whole run ends, follow-ups included).
    pub(super) fn answered(&mut self) {
        if let Some((why, attempt)) = self.retry_error.take() {
            let why = first_line(&why);
            let cell = format!("↻ answered after {} ({why})", retries(attempt));
            self.pending.push_back(HistoryCell::Notice(cell));
        }
    }

    /// `auto_retry_end`: one error for a prompt that failed for good.
    pub(super) fn retry_ended(&mut self, success: bool, attempt: u32, final_error: Option<&str>) {
        if success {
            return self.answered();
        }
        let why = self.retry_error.take().map(|(e, _)| e);
        self.held_error = None;
        let e = final_error
            .or(why.as_deref())
            .unwrap_or("the model call failed");
        self.error_shown = true;
        let cell = HistoryCell::Error(format!("{e}\n(gave up after {})", retries(attempt)));
        self.pending.push_back(cell);
    }

    /// The held error, once the run ended without a retry taking it over.
    pub(super) fn take_held_error(&mut self) -> Option<String> {
        self.retry_error = None;
        self.held_error.take()
    }
}

/// `1 retry`, `3 retries`.
fn retries(n: u32) -> String {
    match n {
        1 => "1 retry".to_string(),
        n => format!("{n} retries"),
    }
}
