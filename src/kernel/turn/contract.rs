//! What a run promised its caller besides the model's own stop: the cost cap (`--max-cost`),
//! checked before each model call against the account the run shares with its subagents
//! ([`Budget`]), and the output schema (`--output-schema`), checked when the
//! model stops (one request for a correction, then `schema_mismatch`). Decides only; the turn
//! loop publishes.

use crate::kernel::failure::ErrorKind;
use serde_json::Value;

use crate::kernel::agent::AgentConfig;
use crate::kernel::budget::Budget;
use crate::kernel::event::RunOutcome;
use crate::kernel::message::Usage;
use crate::kernel::op::UserInput;

/// One run's promises: its cost account (`None`: uncapped), and whether a correction was
/// asked for.
#[derive(Debug, Default)]
pub(super) struct Contract {
    budget: Option<Budget>,
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
    /// A run's contract under `config`: a subagent spends from its parent's account, a capped
    /// run opens its own.
    pub(super) fn new(config: &AgentConfig) -> Contract {
        Contract {
            budget: config
                .budget
                .clone()
                .or_else(|| config.max_cost.map(Budget::new)),
            repair_asked: false,
        }
    }

    /// The run's cost account, which the subagents it starts spend from.
    pub(super) fn budget(&self) -> Option<Budget> {
        self.budget.clone()
    }

    /// Counts one model call's cost (as its provider priced it).
    pub(super) fn spend(&mut self, usage: &Usage) {
        if let Some(b) = &self.budget {
            b.spend(usage.cost.total);
        }
    }

    /// `Budget` when the run (its subagents included) has cost more than its cap: no further
    /// model call.
    pub(super) fn over_budget(&self) -> Option<RunOutcome> {
        let b = self.budget.as_ref()?;
        b.exceeded().then(|| RunOutcome::Budget {
            max_cost: b.cap(),
            spent: b.spent(),
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
                kind: ErrorKind::SchemaMismatch,
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
        let mut k = Contract::new(&c);
        k.spend(&usage(0.25));
        assert_eq!(
            k.over_budget(),
            None,
            "reaching the cap is not exceeding it"
        );
        k.spend(&usage(0.01));
        assert!(
            matches!(k.over_budget(), Some(RunOutcome::Budget { max_cost, .. }) if max_cost == 0.25)
        );
        let mut uncapped = Contract::new(&config(None, None));
        uncapped.spend(&usage(1.0));
        assert_eq!(uncapped.over_budget(), None);
    }

    #[test]
    fn a_subagent_spends_from_its_parent_s_account() {
        let parent = Contract::new(&config(Some(0.25), None));
        let mut c = config(Some(0.25), None);
        c.budget = parent.budget();
        let mut child = Contract::new(&c);
        child.spend(&usage(0.3));
        assert!(
            matches!(parent.over_budget(), Some(RunOutcome::Budget { spent, .. }) if spent == 0.3),
            "the parent sees what its child spent"
        );
        assert!(child.over_budget().is_some());
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
        assert_eq!(kind, ErrorKind::SchemaMismatch);
        assert!(message.contains("at '/'"), "{message}");
        let mut k = Contract::default();
        assert!(matches!(
            k.final_answer(&config(None, None), "free text"),
            Verdict::Accept(None)
        ));
    }
}
