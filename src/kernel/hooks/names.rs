//! keel's built-in tools under Claude Code's names and argument shapes, both ways: hook scripts
//! written for Claude read `Bash {command, timeout}` and `Edit {file_path, old_string,
//! new_string}`, and an `updatedInput` they return in that shape is mapped back to keel's.
//! Other tools (MCP's `mcp__server__tool`) keep their names and input.

use std::path::Path;

use serde_json::{Map, Value};

/// One built-in: keel's name, Claude's name, and the argument names (keel's, Claude's).
struct Alias {
    keel: &'static str,
    claude: &'static str,
    args: &'static [(&'static str, &'static str)],
}

const ALIASES: &[Alias] = &[
    Alias {
        keel: "bash",
        claude: "Bash",
        args: &[("command", "command"), ("timeout", "timeout")],
    },
    Alias {
        keel: "read",
        claude: "Read",
        args: &[
            ("path", "file_path"),
            ("offset", "offset"),
            ("limit", "limit"),
        ],
    },
    Alias {
        keel: "edit",
        claude: "Edit",
        args: &[
            ("path", "file_path"),
            ("oldText", "old_string"),
            ("newText", "new_string"),
        ],
    },
    Alias {
        keel: "write",
        claude: "Write",
        args: &[("path", "file_path"), ("content", "content")],
    },
    Alias {
        keel: "grep",
        claude: "Grep",
        args: &[
            ("pattern", "pattern"),
            ("path", "path"),
            ("glob", "glob"),
            ("ignoreCase", "-i"),
            ("context", "-C"),
            ("limit", "head_limit"),
        ],
    },
    Alias {
        keel: "find",
        claude: "Glob",
        args: &[("pattern", "pattern"), ("path", "path")],
    },
    Alias {
        keel: "ls",
        claude: "LS",
        args: &[("path", "path")],
    },
    // The input shapes are Claude's already.
    Alias {
        keel: "todo_write",
        claude: "TodoWrite",
        args: &[],
    },
    Alias {
        keel: "task",
        claude: "Agent",
        args: &[],
    },
    // Claude Code's `LSP` tool (its operations keep keel's names).
    Alias {
        keel: "lsp",
        claude: "LSP",
        args: &[("path", "filePath"), ("column", "character")],
    },
    // Codex's shape of `bash`: a guard on `Bash` holds it too.
    Alias {
        keel: "exec_command",
        claude: "Bash",
        args: &[("cmd", "command")],
    },
    // Background jobs (`bash` with `run_in_background` is `Bash`).
    Alias {
        keel: "bash_output",
        claude: "TaskOutput",
        args: &[("id", "task_id")],
    },
    Alias {
        keel: "bash_kill",
        claude: "TaskStop",
        args: &[("id", "task_id")],
    },
];

/// Claude's former names of its tools, still matched (`Task` is `Agent`'s).
const FORMER: &[(&str, &str)] = &[
    ("task", "Task"),
    ("bash_output", "BashOutput"),
    ("bash_kill", "KillShell"),
];

/// The names a hook's matcher is tried against for the keel tool `keel`: Claude's, keel's,
/// and a name Claude's tool had before (hooks written for it still match).
pub fn matched(keel: &str) -> Vec<&str> {
    let mut out = vec![claude_name(keel), keel];
    out.extend(FORMER.iter().filter(|(k, _)| *k == keel).map(|(_, f)| *f));
    out
}

/// Claude's name of a keel tool (`bash` → `Bash`); other names unchanged.
pub fn claude_name(keel: &str) -> &str {
    ALIASES
        .iter()
        .find(|a| a.keel == keel)
        .map_or(keel, |a| a.claude)
}

/// A keel tool's arguments in Claude's shape. `bash`'s `timeout` is seconds in keel and
/// milliseconds in Claude; `file_path` is absolute in Claude (a relative path is taken from
/// `cwd`, the session's directory); arguments without a Claude name keep keel's.
pub fn claude_input(keel: &str, args: &Value, cwd: &Path) -> Value {
    let Some(alias) = ALIASES.iter().find(|a| a.keel == keel) else {
        return args.clone();
    };
    let Some(obj) = args.as_object() else {
        return args.clone();
    };
    let mut out = Map::new();
    for (k, v) in obj {
        let name = alias
            .args
            .iter()
            .find(|(ours, _)| ours == k)
            .map_or(k.as_str(), |(_, theirs)| theirs);
        let v = match (name, v.as_str()) {
            ("file_path", Some(path)) => {
                let full = crate::kernel::tool::resolve_path(cwd, path);
                Value::from(full.to_string_lossy().as_ref())
            }
            _ => convert_timeout(keel, name, v, 1000.0),
        };
        out.insert(name.to_string(), v);
    }
    Value::Object(out)
}

/// An `updatedInput` in Claude's shape (or keel's) back as keel's arguments for `keel`.
pub fn keel_input(keel: &str, input: &Value) -> Value {
    let Some(alias) = ALIASES.iter().find(|a| a.keel == keel) else {
        return input.clone();
    };
    let Some(obj) = input.as_object() else {
        return input.clone();
    };
    let mut out = Map::new();
    for (k, v) in obj {
        let name = alias
            .args
            .iter()
            .find(|(_, theirs)| theirs == k)
            .map_or(k.as_str(), |(ours, _)| ours);
        out.insert(name.to_string(), convert_timeout(keel, name, v, 0.001));
    }
    Value::Object(out)
}

fn convert_timeout(keel: &str, name: &str, v: &Value, factor: f64) -> Value {
    if keel != "bash" || name != "timeout" {
        return v.clone();
    }
    match v.as_f64() {
        Some(n) => {
            let scaled = n * factor;
            if scaled.fract() == 0.0 && scaled.abs() < 9.0e15 {
                Value::from(scaled as i64)
            } else {
                Value::from(scaled)
            }
        }
        None => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_subagent_and_todo_tools_have_claudes_names_and_task_still_matches() {
        assert_eq!(claude_name("task"), "Agent");
        assert_eq!(matched("lsp"), ["LSP", "lsp"]);
        let input = json!({"operation": "hover", "path": "a.py", "line": 1, "column": 2});
        let claude = claude_input("lsp", &input, Path::new("/w"));
        assert_eq!(
            claude,
            json!({"operation": "hover", "filePath": "a.py", "line": 1, "character": 2})
        );
        assert_eq!(keel_input("lsp", &claude), input);
        assert_eq!(claude_name("todo_write"), "TodoWrite");
        assert_eq!(matched("task"), ["Agent", "task", "Task"]);
        assert_eq!(matched("bash"), ["Bash", "bash"]);
        assert_eq!(
            matched("bash_output"),
            ["TaskOutput", "bash_output", "BashOutput"]
        );
        assert_eq!(matched("bash_kill"), ["TaskStop", "bash_kill", "KillShell"]);
        assert_eq!(matched("exec_command"), ["Bash", "exec_command"]);
        let input = claude_input("exec_command", &json!({"cmd": "rm -rf x"}), Path::new("/w"));
        assert_eq!(input, json!({"command": "rm -rf x"}));
        let input = claude_input("bash_kill", &json!({"id": "3"}), Path::new("/w"));
        assert_eq!(input, json!({"task_id": "3"}));
        assert_eq!(keel_input("bash_kill", &input), json!({"id": "3"}));
    }

    #[test]
    fn built_ins_appear_under_claudes_names() {
        let pairs = [
            ("bash", "Bash"),
            ("read", "Read"),
            ("edit", "Edit"),
            ("write", "Write"),
            ("grep", "Grep"),
            ("find", "Glob"),
            ("ls", "LS"),
            ("mcp__gh__issue", "mcp__gh__issue"),
        ];
        for (keel, claude) in pairs {
            assert_eq!(claude_name(keel), claude);
        }
    }

    #[test]
    fn arguments_map_to_claudes_shape_and_back() {
        let edit = json!({"path": "src/a.rs", "oldText": "a", "newText": "b"});
        let claude = claude_input("edit", &edit, Path::new("/w"));
        assert_eq!(
            claude,
            json!({"file_path": "/w/src/a.rs", "old_string": "a", "new_string": "b"})
        );
        // An absolute path stays as it is, both ways.
        let edit = json!({"path": "/w/src/a.rs", "oldText": "a", "newText": "b"});
        let claude = claude_input("edit", &edit, Path::new("/elsewhere"));
        assert_eq!(claude["file_path"], "/w/src/a.rs");
        assert_eq!(keel_input("edit", &claude), edit);
    }

    #[test]
    fn bash_timeout_is_milliseconds_for_claude_and_seconds_for_keel() {
        let claude = claude_input(
            "bash",
            &json!({"command": "npm test", "timeout": 120}),
            Path::new("/w"),
        );
        assert_eq!(claude, json!({"command": "npm test", "timeout": 120000}));
        let back = keel_input(
            "bash",
            &json!({"command": "npm test -- --ci", "timeout": 1500}),
        );
        assert_eq!(back, json!({"command": "npm test -- --ci", "timeout": 1.5}));
    }

    #[test]
    fn keel_shaped_updates_and_other_tools_pass_through() {
        let keel_shaped = json!({"path": "x", "content": "y"});
        assert_eq!(keel_input("write", &keel_shaped), keel_shaped);
        let mcp = json!({"title": "t"});
        assert_eq!(claude_input("mcp__gh__issue", &mcp, Path::new("/w")), mcp);
    }
}
