//! `todo_write` (Claude's `TodoWrite` shape): the model's task list, sent whole each time. Owns
//! the schema, the checked reading of a call's arguments and the list as a session entry
//! (`keel.todos`, a pi `custom` entry); the turn loop keeps the list as session state and
//! publishes it. Must never touch the workspace.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::args::{Field, FieldType};
use super::ToolSpec;
use crate::kernel::session::{Entry, EntryData};

/// The `customType` of the entry that records the list.
pub const TODOS_TYPE: &str = "keel.todos";

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Completed,
}

impl TodoStatus {
    /// The word on the wire.
    pub fn word(self) -> &'static str {
        match self {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Completed => "completed",
        }
    }
}

/// One item of the list, Claude's field names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TodoItem {
    /// What is to be done, imperative ("Run the tests").
    pub content: String,
    pub status: TodoStatus,
    /// The present-continuous label shown while the item is in progress ("Running the tests").
    pub active_form: String,
}

/// The whole list as it was written: what the `keel.todos` entry holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todos {
    pub todos: Vec<TodoItem>,
}

impl Todos {
    /// The session entry.
    pub fn to_entry(&self) -> EntryData {
        EntryData::custom(TODOS_TYPE, self)
    }

    /// The list an entry holds, if it is one.
    pub fn from_entry(entry: &Entry) -> Option<Todos> {
        entry.custom(TODOS_TYPE)
    }
}

pub(super) fn spec() -> ToolSpec {
    ToolSpec {
        name: Cow::Borrowed("todo_write"),
        description: Cow::Borrowed(
            "Write the task list for this session: the whole list each time (it replaces the \
             previous one). Use it for work of three or more steps; keep exactly one item \
             in_progress while you work, and mark items completed as soon as they are done. \
             The user sees the list.",
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "todos": {
                    "type": "array",
                    "description": "The updated list",
                    "items": {
                        "type": "object",
                        "properties": {
                            "content": {"type": "string", "minLength": 1, "description": "The task, imperative (\"Run the tests\")"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]},
                            "activeForm": {"type": "string", "minLength": 1, "description": "Present continuous, shown while in progress (\"Running the tests\")"}
                        },
                        "required": ["content", "status", "activeForm"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["todos"],
            "additionalProperties": false
        }),
    }
}

/// A `todo_write` call's arguments, read once.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct TodoArgs {
    todos: Field<Vec<Field<ItemArgs>>>,
}

/// One item as the model sent it; `extra` holds the fields it should not have sent.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
struct ItemArgs {
    content: Field<String>,
    status: Field<String>,
    active_form: Field<String>,
    #[serde(flatten)]
    extra: serde_json::Map<String, Value>,
}

impl FieldType for ItemArgs {
    const MUST_BE: &'static str = "an object";
    fn accepts(v: &Value) -> bool {
        v.is_object()
    }
}

/// The list a call's arguments hold, or what is wrong with them (said so the model can fix
/// the call: the item's index and field).
pub fn parse(args: &Value) -> Result<Vec<TodoItem>, String> {
    let TodoArgs { todos } = super::args::read(args);
    let items = todos.required("todos").map_err(|e| e.text())?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let Field::Given(fields) = item else {
            return Err(format!("invalid arguments: `todos[{i}]` must be an object"));
        };
        let text = |key: &str, arg: Field<String>| match arg {
            Field::Given(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
            Field::Given(_) => Err(format!(
                "invalid arguments: `todos[{i}].{key}` must not be empty"
            )),
            Field::Null | Field::Wrong => Err(format!(
                "invalid arguments: `todos[{i}].{key}` must be a string"
            )),
            Field::Absent => Err(format!(
                "invalid arguments: `todos[{i}]` is missing `{key}`"
            )),
        };
        let content = text("content", fields.content)?;
        let active_form = text("activeForm", fields.active_form)?;
        let status = match fields.status.given().as_deref() {
            Some("pending") => TodoStatus::Pending,
            Some("in_progress") => TodoStatus::InProgress,
            Some("completed") => TodoStatus::Completed,
            Some(other) => {
                return Err(format!(
                    "invalid arguments: `todos[{i}].status` is `{other}`; it must be pending, in_progress or completed"
                ))
            }
            None => {
                return Err(format!(
                    "invalid arguments: `todos[{i}].status` must be pending, in_progress or completed"
                ))
            }
        };
        if let Some(extra) = fields.extra.keys().next() {
            return Err(format!(
                "invalid arguments: `todos[{i}]` has an unknown field `{extra}` (content, status and activeForm only)"
            ));
        }
        out.push(TodoItem {
            content,
            status,
            active_form,
        });
    }
    let running = out
        .iter()
        .filter(|t| t.status == TodoStatus::InProgress)
        .count();
    if running > 1 {
        return Err(format!(
            "invalid arguments: {running} items are in_progress; keep exactly one in progress at a time"
        ));
    }
    Ok(out)
}

/// What the model reads back: the list as it now stands.
pub fn summary(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "Todo list cleared.".into();
    }
    let mut out = String::from("Todo list updated:\n");
    for t in todos {
        let mark = match t.status {
            TodoStatus::Pending => "[ ]",
            TodoStatus::InProgress => "[~]",
            TodoStatus::Completed => "[x]",
        };
        out.push_str(&format!("{mark} {}\n", t.content));
    }
    out.trim_end().to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn claudes_shape_reads_and_bad_items_say_which_field() {
        let ok = json!({"todos": [
            {"content": "Run the tests", "status": "in_progress", "activeForm": "Running the tests"},
            {"content": "Fix them", "status": "pending", "activeForm": "Fixing them"}]});
        let todos = parse(&ok).unwrap();
        assert_eq!(todos.len(), 2);
        assert_eq!(todos[0].status, TodoStatus::InProgress);
        let bad = |v: Value| parse(&v).unwrap_err();
        assert!(bad(json!({})).contains("missing required field `todos`"));
        assert!(
            bad(json!({"todos": [{"content": "a", "status": "done", "activeForm": "b"}]}))
                .contains("`todos[0].status` is `done`")
        );
        assert!(
            bad(json!({"todos": [{"content": "a", "status": "pending"}]}))
                .contains("`todos[0]` is missing `activeForm`")
        );
        assert!(bad(json!({"todos": [
            {"content": "a", "status": "in_progress", "activeForm": "b"},
            {"content": "c", "status": "in_progress", "activeForm": "d"}]}))
        .contains("2 items are in_progress"));
        assert_eq!(parse(&json!({"todos": []})).unwrap(), Vec::new());
    }

    /// The exact words for each wrong shape, in the order the items and fields are checked
    /// (an unknown field is named as the model sent it first).
    #[test]
    fn each_wrong_shape_is_said_exactly() {
        let bad = |v: Value| parse(&v).unwrap_err();
        let item = |extra: Value| {
            let mut i = json!({"content": "a", "status": "pending", "activeForm": "b"});
            i.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            json!({"todos": [i]})
        };
        let cases = [
            (json!({"todos": null}), "invalid arguments: `todos` must be an array"),
            (json!({"todos": {"a": 1}}), "invalid arguments: `todos` must be an array"),
            (json!("text"), "invalid arguments: missing required field `todos`"),
            (json!({"todos": [[1]]}), "invalid arguments: `todos[0]` must be an object"),
            (
                json!({"todos": [{"content": "a", "status": "pending", "activeForm": "b"}, null]}),
                "invalid arguments: `todos[1]` must be an object",
            ),
            (
                item(json!({"content": null, "activeForm": 1})),
                "invalid arguments: `todos[0].content` must be a string",
            ),
            (
                item(json!({"activeForm": "  "})),
                "invalid arguments: `todos[0].activeForm` must not be empty",
            ),
            (
                item(json!({"status": 2})),
                "invalid arguments: `todos[0].status` must be pending, in_progress or completed",
            ),
            (
                item(json!({"zeta": 1, "alpha": 2})),
                "invalid arguments: `todos[0]` has an unknown field `zeta` (content, status and activeForm only)",
            ),
        ];
        for (args, want) in cases {
            assert_eq!(bad(args.clone()), want, "{args}");
        }
    }

    #[test]
    fn the_list_round_trips_through_its_session_entry() {
        let list = Todos {
            todos: parse(&json!({"todos": [
                {"content": "a", "status": "completed", "activeForm": "b"}]}))
            .unwrap(),
        };
        let entry = Entry {
            id: "00000001".into(),
            parent_id: None,
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            data: list.to_entry(),
        };
        assert_eq!(entry.data.type_name(), "custom");
        assert_eq!(Todos::from_entry(&entry), Some(list));
    }
}
