//! A session's modes and config options: keel's permission policies as ACP session modes and
//! a `mode` option (`ask`, `auto`, `read-only`, `accept-edits`, `plan`), the model (`model`, from
//! `get_available_models`) and the thinking level (`thought_level`). Read from the host with
//! pi commands; the builders are pure.

use serde::Deserialize;
use serde_json::Value;

use super::schema::{
    AvailableCommand, AvailableCommandInput, SessionConfigOption, SessionConfigOptionCategory,
    SessionConfigSelectOption, SessionMode, SessionModeState, UnstructuredCommandInput,
};
use crate::client::link::Commands;
use crate::wire::pi::data::{LevelsData, ModelsData};
use crate::wire::pi::Command;

/// A permission mode as ACP offers it; choosing one sets the session's own mode
/// (`set_permission_mode`), so the settings' rules hold whatever the editor picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Write, edit and bash ask the client (`session/request_permission`).
    Ask,
    /// They run without asking.
    Auto,
    /// They are refused; the model sees the refusal.
    ReadOnly,
    /// Write and edit run; bash and MCP tools that change things ask the client.
    AcceptEdits,
    /// Plan mode: read-only tools, then `exit_plan_mode` asks the client to approve the plan.
    Plan,
}

impl Policy {
    pub const ALL: [Policy; 5] = [
        Policy::Ask,
        Policy::Auto,
        Policy::ReadOnly,
        Policy::AcceptEdits,
        Policy::Plan,
    ];

    pub fn id(self) -> &'static str {
        match self {
            Policy::Ask => "ask",
            Policy::Auto => "auto",
            Policy::ReadOnly => "read-only",
            Policy::AcceptEdits => "accept-edits",
            Policy::Plan => "plan",
        }
    }

    pub fn parse(id: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.id() == id)
    }

    fn name(self) -> &'static str {
        match self {
            Policy::Ask => "Ask",
            Policy::Auto => "Auto",
            Policy::ReadOnly => "Read-only",
            Policy::AcceptEdits => "Accept edits",
            Policy::Plan => "Plan",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Policy::Ask => "write, edit and bash ask for permission",
            Policy::Auto => "write, edit and bash run without asking",
            Policy::ReadOnly => "write, edit and bash are refused",
            Policy::AcceptEdits => "write and edit run; bash asks for permission",
            Policy::Plan => "read-only tools until you approve the agent's plan",
        }
    }
}

/// A session's current settings and what they can be set to.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The policy, when it can change (`None`: fixed by `--permission`).
    pub policy: Option<Policy>,
    /// `provider/id` of the current model.
    pub model: String,
    /// `(provider/id, name)` of each model the session can switch to.
    pub models: Vec<(String, String)>,
    pub thinking: String,
    pub levels: Vec<String>,
}

fn model_value(m: &Value) -> Option<(String, String)> {
    let m = ModelRef::deserialize(m).ok()?;
    let name = m.name.as_ref().and_then(Value::as_str).unwrap_or(&m.id);
    Some((format!("{}/{}", m.provider, m.id), name.to_string()))
}

/// What an option shows of a model (`get_state`'s `model`); without a provider and an id
/// it shows nothing, a name that is not a string is the id.
#[derive(Deserialize)]
struct ModelRef {
    provider: String,
    id: String,
    #[serde(default)]
    name: Option<Value>,
}

/// What the config reads of a `get_state` answer: each part that does not fit is left out.
#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase", default)]
struct StateRef {
    model: Value,
    thinking_level: Value,
}

/// What a menu entry shows of a `get_commands` entry; one without a name is left out.
#[derive(Deserialize)]
struct CommandRef {
    name: String,
    #[serde(default)]
    description: Option<Value>,
}

impl Config {
    /// Reads the session's model, models and thinking levels.
    pub async fn fetch(commands: &Commands, policy: Option<Policy>) -> Config {
        let state = commands
            .send(&Command::GetState {})
            .await
            .unwrap_or_default();
        let models = commands
            .ask::<ModelsData>(&Command::GetAvailableModels {})
            .await
            .unwrap_or_default();
        let levels = commands
            .ask::<LevelsData>(&Command::GetAvailableThinkingLevels {})
            .await
            .unwrap_or_default();
        let mut config = Config {
            policy,
            model: String::new(),
            models: models
                .models
                .into_iter()
                .map(|m| (format!("{}/{}", m.provider, m.id), m.name))
                .collect(),
            thinking: String::new(),
            levels: levels.levels,
        };
        config.read_state(&state);
        config
    }

    /// Takes the model and thinking level from a `get_state` answer.
    pub fn read_state(&mut self, state: &Value) {
        let state = StateRef::deserialize(state).unwrap_or_default();
        if let Some((value, name)) = model_value(&state.model) {
            if !self.models.iter().any(|(v, _)| *v == value) {
                self.models.insert(0, (value.clone(), name));
            }
            self.model = value;
        }
        if let Some(level) = state.thinking_level.as_str() {
            self.thinking = level.to_string();
        }
    }

    /// The legacy modes state (`None` when the policy is fixed).
    pub fn modes(&self) -> Option<SessionModeState> {
        let current = self.policy?;
        let modes = Policy::ALL
            .into_iter()
            .map(|p| SessionMode::new(p.id(), p.name()).description(p.description().to_string()))
            .collect();
        Some(SessionModeState::new(current.id(), modes))
    }

    /// The complete config options, in priority order.
    pub fn options(&self) -> Vec<SessionConfigOption> {
        let mut out = Vec::new();
        if let Some(current) = self.policy {
            let choices: Vec<SessionConfigSelectOption> = Policy::ALL
                .into_iter()
                .map(|p| {
                    SessionConfigSelectOption::new(p.id(), p.name())
                        .description(p.description().to_string())
                })
                .collect();
            out.push(
                SessionConfigOption::select("mode", "Mode", current.id(), choices)
                    .category(SessionConfigOptionCategory::Mode),
            );
        }
        let models: Vec<SessionConfigSelectOption> = self
            .models
            .iter()
            .map(|(v, n)| SessionConfigSelectOption::new(v.clone(), n.clone()))
            .collect();
        out.push(
            SessionConfigOption::select("model", "Model", self.model.clone(), models)
                .category(SessionConfigOptionCategory::Model),
        );
        let levels: Vec<SessionConfigSelectOption> = self
            .levels
            .iter()
            .map(|l| SessionConfigSelectOption::new(l.clone(), l.clone()))
            .collect();
        out.push(
            SessionConfigOption::select("thought_level", "Thinking", self.thinking.clone(), levels)
                .category(SessionConfigOptionCategory::ThoughtLevel),
        );
        out
    }
}

/// The session's prompt templates and skills (`get_commands`) as ACP commands: a prompt
/// `/NAME args` runs them, as in RPC mode; then keel's own `/rewind`.
pub async fn commands(commands: &Commands) -> Vec<AvailableCommand> {
    let listed = commands
        .send(&Command::GetCommands {})
        .await
        .unwrap_or_default();
    let mut list = available(&listed);
    list.push(super::rewind::command());
    list
}

/// A `get_commands` answer's list (empty when there is none).
#[derive(Deserialize, Default)]
#[serde(default)]
struct ListedRef {
    commands: Vec<Value>,
}

/// [`commands`]' pure part: a `get_commands` answer as ACP commands.
/// A skill listed as `NAME` is not offered again as `skill:NAME` (which still runs when typed).
pub fn available(listed: &Value) -> Vec<AvailableCommand> {
    let listed = ListedRef::deserialize(listed).unwrap_or_default();
    let refs: Vec<CommandRef> = listed
        .commands
        .iter()
        .filter_map(|c| CommandRef::deserialize(c).ok())
        .collect();
    let named = |n: &str| refs.iter().any(|c| c.name == n);
    refs.iter()
        .filter(|c| !c.name.strip_prefix("skill:").is_some_and(named))
        .map(|c| {
            let name = c.name.as_str();
            let description = c.description.as_ref().and_then(Value::as_str);
            let description = description.unwrap_or(name);
            let hint =
                AvailableCommandInput::Unstructured(UnstructuredCommandInput::new("arguments"));
            AvailableCommand::new(name, description).input(hint)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_list_mode_model_and_thinking_with_current_values() {
        let mut c = Config {
            policy: Some(Policy::Ask),
            model: String::new(),
            models: vec![("openai/gpt-x".into(), "GPT X".into())],
            thinking: String::new(),
            levels: vec!["off".into(), "high".into()],
        };
        c.read_state(&json!({"model": {"provider": "scripted", "id": "s1", "name": "S1"}, "thinkingLevel": "off"}));
        let v = serde_json::to_value(c.options()).unwrap();
        let ids: Vec<(&str, &str, &str)> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|o| {
                (
                    o["id"].as_str().unwrap(),
                    o["category"].as_str().unwrap(),
                    o["currentValue"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                ("mode", "mode", "ask"),
                ("model", "model", "scripted/s1"),
                ("thought_level", "thought_level", "off")
            ]
        );
        assert_eq!(
            v[1]["options"][0]["value"], "scripted/s1",
            "the current model is listed"
        );
        assert_eq!(
            serde_json::to_value(c.modes()).unwrap()["currentModeId"],
            "ask"
        );
        c.policy = None;
        assert_eq!(
            c.options().len(),
            2,
            "a policy fixed by --permission is no option"
        );
        assert!(c.modes().is_none());
    }

    #[test]
    fn accept_edits_is_one_of_the_modes() {
        let c = Config {
            policy: Some(Policy::parse("accept-edits").unwrap()),
            model: String::new(),
            models: Vec::new(),
            thinking: String::new(),
            levels: Vec::new(),
        };
        let modes = serde_json::to_value(c.modes()).unwrap();
        let ids: Vec<&str> = modes["availableModes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["ask", "auto", "read-only", "accept-edits", "plan"]);
        assert_eq!(modes["currentModeId"], "accept-edits");
    }

    #[test]
    fn templates_become_commands_with_an_input_hint() {
        let listed = json!({"commands": [{"name": "review", "description": "Review a file", "source": "prompt"}, {"nameless": 1}]});
        assert_eq!(
            serde_json::to_value(available(&listed)).unwrap(),
            json!([{"name": "review", "description": "Review a file", "input": {"hint": "arguments"}}])
        );
        let skill = |n: &str| json!({"name": n, "description": "Lints", "source": "skill"});
        let listed =
            json!({"commands": [skill("lint"), skill("skill:lint"), skill("skill:deploy")]});
        let names: Vec<String> = available(&listed).into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["lint", "skill:deploy"]);
    }
}
