//! What a run promised its caller besides the model's own stop: the cost cap (`--max-cost`),
//! checked before each model call, and the output schema (`--output-schema`), checked when the
//! model stops (one request for a correction, then `schema_mismatch`). Decides only; the turn
//! loop publishes.

use serde_json::Value;

use crate::kernel::agent::AgentConfig;
use crate::kernel::event::RunOutcome;
use crate::kernel::message::Usage;
use crate::kernel::op::UserInput;

/// The error kind of a final answer that still breaks the schema after the correction.
pub(crate) const SCHEMA_MISMATCH: &str = "schema_mismatch";

/// One run's account: USD spent on its model calls, and whether a correction was asked for.
#[derive(Debug, Default)]
pub(super) struct Contract {
    spent: f64,
    repair_asked: bool,
}

/// What becomes of the answer the model stopped with.
#[derive(Debug)]
pub(super) enum Verdict {
    /// The run completes; with a schema, the answer as JSON.
    Accept(Option<Value>),
    /// The model is asked once to correct its answer (this user message).
    Repair(UserInput),
    /// The answer still breaks the schema.
    Fail(RunOutcome),
}

impl Contract {
    /// Counts one model call's cost (as its provider priced it).
    pub(super) fn spend(&mut self, usage: &Usage) {
        self.spent += usage.cost.total;
    }

    /// `Budget` when the run has cost more than its cap: no further model call.
    pub(super) fn over_budget(&self, config: &AgentConfig) -> Option<RunOutcome> {
        let max_cost = config.max_cost?;
        (self.spent > max_cost).then_some(RunOutcome::Budget {
            max_cost,
            spent: self.spent,
        })
    }

    /// Judges `answer` (the final assistant text) against the output schema, if any.
    pub(super) fn final_answer(&mut self, config: &AgentConfig, answer: &str) -> Verdict {
        let Some(schema) = &config.output_schema else {
            return Verdict::Accept(None);
        };
        match schema.check(answer) {
            Ok(value) => Verdict::Accept(Some(value)),
            Err(violation) if !self.repair_asked => {
                self.repair_asked = true;
                Verdict::Repair(UserInput::text(format!(
                    "Your final answer does not match the JSON Schema it must follow: \
                     {violation}. Reply with only the corrected JSON value."
                )))
            }
            Err(violation) => Verdict::Fail(RunOutcome::Failed {
                kind: SCHEMA_MISMATCH.into(),
                message: format!("the final answer does not match the output schema: {violation}"),
            }),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::kernel::output_schema::OutputSchema;

    fn config(max_cost: Option<f64>, schema: Option<&str>) -> AgentConfig {
        let mut c = AgentConfig::new(".".into(), "/tmp".into());
        c.max_cost = max_cost;
        c.output_schema = schema.map(|s| Arc::new(OutputSchema::parse(s).unwrap()));
        c
    }

    fn usage(cost: f64) -> Usage {
        let mut u = Usage::default();
        u.cost.total = cost;
        u
    }

    #[test]
    fn the_cap_stops_only_once_exceeded() {
        let c = config(Some(0.25), None);
        let mut k = Contract::default();
        k.spend(&usage(0.25));
        assert_eq!(
            k.over_budget(&c),
            None,
            "reaching the cap is not exceeding it"
        );
        k.spend(&usage(0.01));
        assert!(
            matches!(k.over_budget(&c), Some(RunOutcome::Budget { max_cost, .. }) if max_cost == 0.25)
        );
        assert_eq!(k.over_budget(&config(None, None)), None);
    }

    #[test]
    fn a_mismatch_is_sent_back_once_then_fails() {
        let c = config(None, Some(r#"{"type":"integer"}"#));
        let mut k = Contract::default();
        assert!(matches!(k.final_answer(&c, "7"), Verdict::Accept(Some(v)) if v == 7));
        assert!(matches!(k.final_answer(&c, "seven"), Verdict::Repair(_)));
        let Verdict::Fail(RunOutcome::Failed { kind, message }) = k.final_answer(&c, "\"7\"")
        else {
            panic!("not failed");
        };
        assert_eq!(kind, SCHEMA_MISMATCH);
        assert!(message.contains("at '/'"), "{message}");
        let mut k = Contract::default();
        assert!(matches!(
            k.final_answer(&config(None, None), "free text"),
            Verdict::Accept(None)
        ));
    }
}
