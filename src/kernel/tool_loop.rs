//! Spotting a model that repeats the same failing tool call: the turn loop hands it every
//! finished call, in order, and it says when the last N were one call (same tool, same
//! arguments) that failed each time. It decides nothing else and publishes nothing.

use crate::kernel::failure::ErrorKind;
use serde_json::Value;

use crate::kernel::event::RunOutcome;
use crate::kernel::message::{Content, ToolResultMessage};

/// The longest argument or error text a message quotes, in characters.
const QUOTED: usize = 120;

/// The identical failing calls in a row so far (`--max-repeated-failures`).
#[derive(Debug)]
pub(crate) struct ToolLoop {
    /// How many identical failures stop the run; 0 never does.
    limit: u32,
    /// The last call, while it keeps failing identically.
    last: Option<(String, Value)>,
    count: u32,
}

impl ToolLoop {
    pub(crate) fn new(limit: u32) -> ToolLoop {
        ToolLoop {
            limit,
            last: None,
            count: 0,
        }
    }

    /// Records a turn's calls (`(id, name, arguments)`) with their results, in order; the
    /// outcome that stops the run once the last `limit` calls were one call failing each time.
    pub(crate) fn record(
        &mut self,
        calls: &[(String, String, Value)],
        results: &[ToolResultMessage],
    ) -> Option<RunOutcome> {
        let mut stop = None;
        for ((_, name, args), result) in calls.iter().zip(results) {
            stop = self.record_one(name, args, result);
        }
        stop
    }

    fn record_one(
        &mut self,
        name: &str,
        args: &Value,
        result: &ToolResultMessage,
    ) -> Option<RunOutcome> {
        if !result.is_error {
            self.last = None;
            self.count = 0;
            return None;
        }
        let same = self
            .last
            .as_ref()
            .is_some_and(|(n, a)| n == name && a == args);
        if same {
            self.count += 1;
        } else {
            self.last = Some((name.to_string(), args.clone()));
            self.count = 1;
        }
        (self.limit > 0 && self.count >= self.limit).then(|| RunOutcome::Failed {
            kind: ErrorKind::ToolLoop,
            message: format!(
                "the model repeated the same failing tool call {} times: {name} {}; last error: {}",
                self.count,
                quote(&args.to_string()),
                quote(&error_text(result)),
            ),
        })
    }
}

/// The first line of a result's text.
fn error_text(result: &ToolResultMessage) -> String {
    let text = result.content.iter().find_map(|c| match c {
        Content::Text { text } => Some(text.as_str()),
        _ => None,
    });
    text.unwrap_or("").lines().next().unwrap_or("").to_string()
}

/// `text` cut to [`QUOTED`] characters, with `…` when cut.
fn quote(text: &str) -> String {
    match text.char_indices().nth(QUOTED) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(is_error: bool) -> ToolResultMessage {
        ToolResultMessage {
            tool_call_id: "c".into(),
            tool_name: "read".into(),
            content: vec![Content::Text {
                text: "File not found: x\nmore".into(),
            }],
            details: None,
            is_error,
            duration_ms: None,
            timestamp: 0,
        }
    }

    fn call(path: &str) -> Vec<(String, String, Value)> {
        vec![("c".into(), "read".into(), json!({ "path": path }))]
    }

    #[test]
    fn three_identical_failures_stop_and_anything_else_starts_over() {
        let mut d = ToolLoop::new(3);
        let fail = [result(true)];
        assert_eq!(d.record(&call("x"), &fail), None);
        assert_eq!(d.record(&call("x"), &fail), None);
        assert_eq!(
            d.record(&call("x"), &[result(false)]),
            None,
            "a success resets"
        );
        assert_eq!(d.record(&call("x"), &fail), None);
        assert_eq!(d.record(&call("y"), &fail), None, "other arguments reset");
        assert_eq!(d.record(&call("y"), &fail), None);
        let Some(RunOutcome::Failed { kind, message }) = d.record(&call("y"), &fail) else {
            panic!("the third identical failure stops");
        };
        assert_eq!(kind, ErrorKind::ToolLoop);
        assert_eq!(
            message,
            r#"the model repeated the same failing tool call 3 times: read {"path":"y"}; last error: File not found: x"#
        );
        let mut off = ToolLoop::new(0);
        assert!((0..10).all(|_| off.record(&call("x"), &fail).is_none()));
    }

    #[test]
    fn long_arguments_are_cut() {
        let long = "é".repeat(200);
        assert_eq!(quote(&long).chars().count(), QUOTED + 1);
        assert!(quote(&long).ends_with('…'));
        assert_eq!(quote("short"), "short");
    }
}
