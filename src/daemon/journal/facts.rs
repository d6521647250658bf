//! Session lifecycle facts for `keel.sessions.<host>` (`opened`, `attached`, `detached`,
//! `settled`, `replaced`, `closed`): what a dashboard needs without parsing every event. Keeps
//! per session what the events told it (cwd, model, usage and cost of the current run and of
//! the whole session) and adds it to each fact. Pure bookkeeping: no I/O.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::{json, Value};

use crate::kernel::message::Usage;

#[derive(Debug, Default)]
struct Known {
    cwd: Option<Value>,
    model: Option<String>,
    provider: Option<String>,
    run: Usage,
    total: Usage,
}

/// What the journal knows of each session it has seen.
#[derive(Debug, Default)]
pub struct Sessions {
    known: HashMap<String, Known>,
}

#[derive(Deserialize)]
struct TurnEnd {
    message: Assistant,
}

#[derive(Deserialize)]
struct Assistant {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    provider: Option<String>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Settled {
    aborted: bool,
    outcome: String,
    #[serde(default)]
    error: Option<Value>,
}

/// The part of a fact the journal remembers (a `null` `cwd` is none).
#[derive(Default, Deserialize)]
struct Noted {
    #[serde(default)]
    cwd: Option<Value>,
}

impl Sessions {
    /// A fact from the daemon (`opened`, `attached`, …): remembers its `cwd`, adds what is
    /// known. `closed` forgets the session.
    pub fn note(&mut self, session: &str, mut fact: Value) -> Value {
        let k = self.known.entry(session.to_string()).or_default();
        let Noted { cwd } = crate::kernel::field::read(&fact);
        if cwd.is_some() {
            k.cwd = cwd;
        }
        enrich(k, &mut fact);
        if fact["type"] == "closed" {
            self.known.remove(session);
        }
        fact
    }

    /// Looks at one event line of `session`: `agent_start` begins a run's usage, `turn_end`
    /// adds its message's usage, `agent_settled` gives a `settled` fact.
    pub fn event(&mut self, session: &str, line: &str) -> Option<Value> {
        if !looks_at(line.as_bytes()) {
            return None;
        }
        let kind = event_type(line)?;
        let k = self.known.entry(session.to_string()).or_default();
        match kind {
            "agent_start" => {
                k.run = Usage::default();
                None
            }
            "turn_end" => {
                let t: TurnEnd = serde_json::from_str(line).ok()?;
                if let Some(m) = t.message.model {
                    k.model = Some(m);
                }
                if let Some(p) = t.message.provider {
                    k.provider = Some(p);
                }
                if let Some(u) = t.message.usage {
                    k.run.add(&u);
                    k.total.add(&u);
                }
                None
            }
            "agent_settled" => {
                let s: Settled = serde_json::from_str(line).ok()?;
                let mut fact = json!({
                    "type": "settled",
                    "sessionId": session,
                    "outcome": s.outcome,
                    "aborted": s.aborted,
                    "runUsage": usage_json(&k.run),
                    "runCost": k.run.cost.total,
                });
                if let Some(e) = s.error {
                    fact["error"] = e;
                }
                enrich(k, &mut fact);
                Some(fact)
            }
            _ => None,
        }
    }

    /// The session is known as `new` from now on.
    pub fn rename(&mut self, old: &str, new: &str) {
        if let Some(k) = self.known.remove(old) {
            self.known.insert(new.to_string(), k);
        }
    }
}

/// Whether [`Sessions::event`] has anything to do with this event line (looked at as bytes,
/// for the many it has not).
pub fn looks_at(line: &[u8]) -> bool {
    let Some(rest) = line.strip_prefix(b"{\"type\":\"") else {
        return false;
    };
    [&b"agent_start\""[..], b"turn_end\"", b"agent_settled\""]
        .iter()
        .any(|t| rest.starts_with(t))
}

/// The `type` of an event line, read without parsing the whole line when it comes first (it
/// does in every wire event).
fn event_type(line: &str) -> Option<&str> {
    let rest = line.strip_prefix("{\"type\":\"")?;
    rest.split('"').next()
}

fn usage_json(u: &Usage) -> Value {
    json!({
        "input": u.input,
        "output": u.output,
        "cacheRead": u.cache_read,
        "cacheWrite": u.cache_write,
        "totalTokens": u.total_tokens,
    })
}

fn enrich(k: &Known, fact: &mut Value) {
    let Some(m) = fact.as_object_mut() else {
        return;
    };
    if let Some(cwd) = &k.cwd {
        m.entry("cwd").or_insert_with(|| cwd.clone());
    }
    if let Some(model) = &k.model {
        m.insert("model".into(), json!(model));
    }
    if let Some(p) = &k.provider {
        m.insert("provider".into(), json!(p));
    }
    m.insert("usage".into(), usage_json(&k.total));
    m.insert("cost".into(), json!(k.total.cost.total));
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_settled_fact_carries_the_runs_usage_and_the_sessions_totals() {
        let mut s = Sessions::default();
        s.note(
            "s1",
            json!({"type": "opened", "sessionId": "s1", "cwd": "/w"}),
        );
        let turn = |input: u64, cost: f64| {
            json!({"type": "turn_end", "message": {"role": "assistant", "model": "m1",
                "provider": "p", "usage": {"input": input, "output": 1, "cacheRead": 0,
                "cacheWrite": 0, "totalTokens": input + 1, "cost": {"input": 0.0, "output": 0.0,
                "cacheRead": 0.0, "cacheWrite": 0.0, "total": cost}}}, "toolResults": []})
            .to_string()
        };
        assert!(s.event("s1", r#"{"type":"agent_start"}"#).is_none());
        assert!(s.event("s1", &turn(10, 0.5)).is_none());
        let settled = r#"{"type":"agent_settled","aborted":false,"outcome":"completed"}"#;
        let first = s.event("s1", settled).unwrap();
        assert_eq!(first["runUsage"]["input"], 10);
        s.event("s1", r#"{"type":"agent_start"}"#);
        s.event("s1", &turn(5, 0.25));
        s.event("s1", &turn(5, 0.25));
        let fact = s.event("s1", settled).unwrap();
        assert_eq!(fact["type"], "settled");
        assert_eq!(fact["outcome"], "completed");
        assert_eq!(fact["cwd"], "/w");
        assert_eq!(fact["model"], "m1");
        assert_eq!(fact["runUsage"]["input"], 10, "this run: two turns of 5");
        assert_eq!(fact["runCost"], 0.5);
        assert_eq!(fact["usage"]["input"], 20, "the session: both runs");
        assert_eq!(fact["cost"], 1.0);
        s.rename("s1", "s2");
        let closed = s.note("s2", json!({"type": "closed", "sessionId": "s2"}));
        assert_eq!(closed["cwd"], "/w", "followed the rename");
        assert!(s.known.is_empty(), "closed forgets");
    }
}
