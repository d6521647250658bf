//! The `details` of the built-in tools' results, typed: what each tool reports beside the text
//! the model reads (bash's exit code and truncation, edit's diff, read's range, …). Tools build
//! them; front ends read them back with [`ToolDetails::read`] instead of picking fields out of
//! JSON. Declared once here (the wire re-exports them); must never hold text for humans.
//!
//! On the wire and in session files `details` stay a JSON object: the fields below are written
//! in this order, so the encoded form is what the tools wrote before these types existed.
//! Reading is tolerant (unknown fields are ignored; a field a peer left out reads as its
//! default unless the doc says the details are then unreadable).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `bash`: how the command ended and whether its output was cut.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BashDetails {
    /// The exit code; `null` when the command was killed, timed out, aborted or never ran.
    pub exit_code: Option<i32>,
    /// The command was aborted.
    #[serde(default)]
    pub cancelled: bool,
    /// The command ran past its timeout.
    #[serde(default)]
    pub timed_out: bool,
    /// The output the model read is the tail of a longer output.
    #[serde(default)]
    pub truncated: bool,
    /// Where the whole output was kept, when it was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_output_path: Option<String>,
    /// The kept whole output was itself capped (written only when true).
    #[serde(default, skip_serializing_if = "is_false")]
    pub full_output_truncated: bool,
    /// The command reached its timeout and runs on as this background job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<crate::kernel::jobs::JobInfo>,
}

/// `edit`: the change as a unified diff.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditDetails {
    /// The edited file's full path.
    #[serde(default)]
    pub path: String,
    /// The unified diff of the change (required: details without it are unreadable).
    pub diff: String,
    /// The first changed line of the new text (1-based).
    #[serde(default)]
    pub first_changed_line: usize,
    /// What the file's language server said about the change (`docs/lsp.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsp: Option<crate::kernel::lsp::LspReport>,
}

/// `read`: the range of lines returned.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadDetails {
    /// The file's full path.
    #[serde(default)]
    pub path: String,
    /// The file's line count; `null` when the read stopped before the end.
    pub total_lines: Option<u64>,
    /// The first line returned (1-based; required).
    pub start_line: u64,
    /// The last line returned (required).
    pub end_line: u64,
    /// The text was cut at the output limit.
    #[serde(default)]
    pub truncated: bool,
}

/// `write`: what was written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteDetails {
    /// The written file's full path.
    #[serde(default)]
    pub path: String,
    /// The bytes written (always written by keel; `None` only from a peer that left it out).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// The file did not exist before.
    #[serde(default)]
    pub created: bool,
    /// What the file's language server said about the change (`docs/lsp.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsp: Option<crate::kernel::lsp::LspReport>,
}

/// `grep`: how much matched.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrepDetails {
    /// Matching lines (required).
    pub matches: u64,
    /// Files with a match (required).
    pub files: u64,
    /// The match limit was reached.
    #[serde(default)]
    pub truncated: bool,
}

/// `find` and `ls`: how many paths were listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CountDetails {
    /// Paths listed (required).
    pub count: u64,
    /// The listing was cut at its limit.
    #[serde(default)]
    pub truncated: bool,
}

/// The details of a built-in tool's result, by tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolDetails {
    Bash(BashDetails),
    Edit(EditDetails),
    Read(ReadDetails),
    Write(WriteDetails),
    Grep(GrepDetails),
    Find(CountDetails),
    Ls(CountDetails),
}

impl ToolDetails {
    /// The typed details of a result of `tool`; `None` for a tool that is not built in (MCP,
    /// `task`, whose details are `SubagentDetails`) or details of another shape (a peer's
    /// tool of the same name).
    pub fn read(tool: &str, details: &Value) -> Option<ToolDetails> {
        fn de<T: for<'de> Deserialize<'de>>(v: &Value) -> Option<T> {
            object(v).and_then(|v| T::deserialize(v).ok())
        }
        Some(match tool {
            "bash" => ToolDetails::Bash(de(details)?),
            "edit" => ToolDetails::Edit(de(details)?),
            "read" => ToolDetails::Read(de(details)?),
            "write" => ToolDetails::Write(de(details)?),
            "grep" => ToolDetails::Grep(de(details)?),
            "find" => ToolDetails::Find(de(details)?),
            "ls" => ToolDetails::Ls(de(details)?),
            _ => return None,
        })
    }

    /// Whether the output shown was cut (bash, read, grep, find, ls).
    pub fn truncated(&self) -> bool {
        match self {
            ToolDetails::Bash(d) => d.truncated,
            ToolDetails::Read(d) => d.truncated,
            ToolDetails::Grep(d) => d.truncated,
            ToolDetails::Find(d) | ToolDetails::Ls(d) => d.truncated,
            ToolDetails::Edit(_) | ToolDetails::Write(_) => false,
        }
    }
}

/// The items of a `todo_write` call's arguments, as far as they read as items (a list the
/// tool would reject still counts).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct TodoCount {
    todos: Vec<serde::de::IgnoredAny>,
}

impl TodoCount {
    /// How many items a `todo_write` call's arguments hold; `None` without a `todos` array.
    pub fn of(args: &Value) -> Option<usize> {
        let args = object(args)?;
        TodoCount::deserialize(args).ok().map(|c| c.todos.len())
    }
}

/// The argument fields of the built-in tools that front ends show (a call's title, its
/// location, an approval's command). Read leniently: a field that is absent or of another type
/// (the model's arguments are not checked until the tool runs) reads as `None`; arguments that
/// are not an object read as all `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ShownArgs {
    /// `bash`.
    #[serde(deserialize_with = "lenient")]
    pub command: Option<String>,
    /// `read`, `write`, `edit`, `grep`, `find`, `ls`.
    #[serde(deserialize_with = "lenient")]
    pub path: Option<String>,
    /// Claude's name for `path` (accepted by `read`, `write`, `edit`).
    #[serde(deserialize_with = "lenient", rename = "file_path")]
    pub file_path: Option<String>,
    /// `read`: the first line (1-based) and the line count.
    #[serde(deserialize_with = "lenient")]
    pub offset: Option<u64>,
    #[serde(deserialize_with = "lenient")]
    pub limit: Option<u64>,
    /// `grep`, `find`.
    #[serde(deserialize_with = "lenient")]
    pub pattern: Option<String>,
    /// `grep`.
    #[serde(deserialize_with = "lenient")]
    pub glob: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub literal: Option<bool>,
    #[serde(deserialize_with = "lenient")]
    pub ignore_case: Option<bool>,
    #[serde(deserialize_with = "lenient")]
    pub context: Option<u64>,
    /// `write`.
    #[serde(deserialize_with = "lenient")]
    pub content: Option<String>,
    /// `edit` (and Claude's names for them).
    #[serde(deserialize_with = "lenient")]
    pub old_text: Option<String>,
    #[serde(deserialize_with = "lenient")]
    pub new_text: Option<String>,
    #[serde(deserialize_with = "lenient", rename = "old_string")]
    pub old_string: Option<String>,
    #[serde(deserialize_with = "lenient", rename = "new_string")]
    pub new_string: Option<String>,
    /// `plan`.
    #[serde(deserialize_with = "lenient")]
    pub plan: Option<String>,
}

impl ShownArgs {
    /// The shown fields of a call's arguments.
    pub fn of(args: &Value) -> ShownArgs {
        object(args)
            .and_then(|a| ShownArgs::deserialize(a).ok())
            .unwrap_or_default()
    }

    /// The string field, or "".
    pub fn str(field: &Option<String>) -> &str {
        field.as_deref().unwrap_or("")
    }

    /// `path`, else Claude's `file_path`.
    pub fn any_path(&self) -> Option<&str> {
        self.path.as_deref().or(self.file_path.as_deref())
    }
}

/// A field of the expected type, else `None`.
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    Ok(T::deserialize(Value::deserialize(d)?).ok())
}

/// `v` when it is an object: serde would read an array field by field, in declaration order.
fn object(v: &Value) -> Option<&Value> {
    v.is_object().then_some(v)
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn details_encode_as_the_tools_wrote_them() {
        let bash = BashDetails {
            exit_code: Some(2),
            truncated: true,
            full_output_path: Some("/tmp/o".into()),
            ..BashDetails::default()
        };
        assert_eq!(
            serde_json::to_string(&bash).unwrap(),
            r#"{"exitCode":2,"cancelled":false,"timedOut":false,"truncated":true,"fullOutputPath":"/tmp/o"}"#
        );
        let read = ReadDetails {
            path: "/w/a".into(),
            total_lines: None,
            start_line: 1,
            end_line: 3,
            truncated: false,
        };
        assert_eq!(
            serde_json::to_string(&read).unwrap(),
            r#"{"path":"/w/a","totalLines":null,"startLine":1,"endLine":3,"truncated":false}"#
        );
    }

    #[test]
    fn details_read_back_per_tool_and_not_for_other_tools_or_shapes() {
        let d = json!({"exitCode": null, "cancelled": true, "timedOut": false, "truncated": false});
        let Some(ToolDetails::Bash(b)) = ToolDetails::read("bash", &d) else {
            panic!("bash details unread")
        };
        assert!(b.cancelled && b.exit_code.is_none());
        assert_eq!(ToolDetails::read("mcp__x__bash", &d), None);
        assert_eq!(ToolDetails::read("edit", &json!({"path": "a"})), None);
        let created = ToolDetails::read("write", &json!({"created": true, "x": 1}));
        assert!(matches!(created, Some(ToolDetails::Write(w)) if w.created && w.bytes.is_none()));
        assert_eq!(TodoCount::of(&json!({"todos": [1, {"a": 2}]})), Some(2));
        assert_eq!(TodoCount::of(&json!({"todos": "x"})), None);
        assert_eq!(TodoCount::of(&json!([[1, 2]])), None);
        assert_eq!(ToolDetails::read("write", &json!(["/p", 3, true])), None);
    }

    #[test]
    fn shown_args_read_fields_of_the_wrong_type_as_absent() {
        let a = ShownArgs::of(&json!({"command": 3, "path": "a", "offset": 2, "limit": "x"}));
        assert_eq!((a.command, a.path.as_deref()), (None, Some("a")));
        assert_eq!((a.offset, a.limit), (Some(2), None));
        assert_eq!(ShownArgs::of(&json!("not an object")), ShownArgs::default());
        assert_eq!(ShownArgs::of(&json!(["ls -la"])), ShownArgs::default());
        let claude = ShownArgs::of(&json!({"file_path": "b", "old_string": "o"}));
        assert_eq!(
            (claude.any_path(), claude.old_string.as_deref()),
            (Some("b"), Some("o"))
        );
    }
}
