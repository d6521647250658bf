//! The JSON Schema of a settings file (`keel config schema`), written once beside the types it
//! describes; a test checks that it names exactly the keys the parser knows.

use serde_json::{json, Value};

/// Where the schema is published (docs/settings.md's example points its `$schema` here).
pub const ID: &str = "https://keel.dev/settings.schema.json";

/// The schema, draft 2020-12.
pub fn schema() -> Value {
    let rules = |what: &str| {
        json!({
            "type": "array",
            "items": {"type": "string"},
            "description": format!("{what} Rules as Claude Code writes them: `Tool` or `Tool(specifier)`. Lists of all levels are concatenated.")
        })
    };
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": ID,
        "title": "keel settings",
        "description": "A keel settings file: managed /etc/keel/managed-settings.json > flags > --settings > <project>/.keel/settings.local.json > <project>/.keel/settings.json > $KEEL_HOME/settings.json. Scalars: the highest level wins; lists concatenate; objects merge per key. Unknown keys are skipped with a warning.",
        "type": "object",
        "properties": {
            "$schema": {"type": "string", "description": "This schema's URL, for editors."},
            "model": {"type": "string", "description": "The model: `provider/id` or an id (`--model`)."},
            "thinking": {
                "enum": ["off", "minimal", "low", "medium", "high", "xhigh"],
                "description": "Reasoning effort, clamped to what the model supports (`--thinking`)."
            },
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "The tool allowlist (`--tools`): built-in names and MCP tools as mcp__server__tool, mcp__server or mcp__server__*. An allowlist: the highest level that sets it wins."
            },
            "maxTurns": {"type": "integer", "minimum": 1, "description": "Stop after this many model turns (`--max-turns`)."},
            "jobs": {"type": "object", "additionalProperties": false, "description": "The model's background jobs (taken whole from the highest level that sets it).", "properties": {
                "tools": {"enum": ["auto", "claude", "codex"], "description": "Which shapes of the job tools the model gets with bash: auto (Codex's exec_command/write_stdin for OpenAI's APIs, else Claude's bash run_in_background, bash_output, bash_kill), claude or codex."},
                "maxLive": {"type": "integer", "minimum": 1, "description": "Jobs running at once in a session (default 16)."},
                "backgroundOnTimeout": {"type": "boolean", "description": "A foreground bash command that reaches its timeout becomes a background job instead of being killed (default true; never git or sleep)."}
            }},
            "worktree": {"type": "object", "additionalProperties": false, "description": "Sessions run in a worktree of their own (`-w`; taken whole from the highest level that sets it).", "properties": {
                "base": {"enum": ["head", "fresh"], "description": "What a worktree is made from: head (default), or fresh: the remote's default branch, fetched first (5 s at most)."},
                "baseRef": {"enum": ["head", "fresh"], "description": "Claude Code's name for base."},
                "cleanupDays": {"type": "integer", "minimum": 0, "description": "The daemon removes unlocked, clean worktrees older than this many days (default 7)."}
            }},
            "lsp": lsp(),
            "maxSubagentDepth": {"type": "integer", "minimum": 0, "description": "How deep subagents nest: 1 (default) gives the session the `task` tool and its subagents none; 0 removes the `task` tool."},
            "approvalTimeout": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds an approval dialog waits before the call is denied (`--approval-timeout`)."},
            "autoCompaction": {"type": "boolean", "description": "Compact the conversation when the context fills up (default true; `--no-auto-compaction`)."},
            "maxCost": {"type": "number", "minimum": 0, "description": "A cost cap in dollars (kept; not applied yet)."},
            "notify": {
                "enum": ["bell", "osc9", "osc777", "off", "terminal_bell", "auto", "iterm2", "iterm2_with_bell", "kitty", "ghostty", "notifications_disabled"],
                "description": "How the TUI tells you a run finished or waits for an approval while its window is not focused: the terminal bell (default), a desktop notification by OSC 9 or OSC 777, or off. Claude Code's preferredNotifChannel words are aliases."
            },
            "statusLine": {
                "type": "object",
                "properties": {
                    "type": {"const": "command"},
                    "command": {"type": "string", "description": "Run by sh -c in the session's directory with Claude Code's status JSON on stdin; the first line of its stdout is shown under the editor."},
                    "padding": {"type": "integer", "minimum": 0, "description": "Blank columns before the text."}
                },
                "required": ["type", "command"],
                "additionalProperties": false,
                "description": "The TUI's status line (Claude Code's shape)."
            },
            "claudeFiles": {
                "type": "boolean",
                "description": "false: Claude Code's settings files (~/.claude/settings.json, .claude/settings.json, .claude/settings.local.json) are not read. The highest of keel's own files that sets it wins (--no-claude-files too); Claude's files cannot turn themselves off."
            },
            "env": {
                "type": "object",
                "additionalProperties": {"type": "string"},
                "description": "Variables set for the session's tools (bash, MCP servers). Merged per variable."
            },
            "permissions": {
                "type": "object",
                "properties": {
                    "defaultMode": {
                        "enum": ["auto", "ask", "read-only", "accept-edits", "plan", "default", "manual", "dontAsk", "bypassPermissions", "acceptEdits", "readOnly"],
                        "description": "The permission mode (`--permission` overrides). Claude's names are aliases: default, manual and dontAsk = ask, bypassPermissions = auto, acceptEdits = accept-edits."
                    },
                    "allow": rules("Tool calls that run without asking."),
                    "ask": rules("Tool calls that always ask."),
                    "deny": rules("Tool calls that never run."),
                    "additionalDirectories": {"type": "array", "items": {"type": "string"}, "description": "Directories besides the project the tools may work in."}
                },
                "additionalProperties": false
            },
            "mcpServers": {
                "type": "object",
                "additionalProperties": {"type": "object"},
                "description": "MCP servers, as in mcp.json ({command, args, env, cwd} or {type: \"http\", url, headers}); merged with mcp.json's. The highest level that names a server wins."
            },
            "sandbox": sandbox(),
            "hooks": {"type": "object", "description": "Lifecycle hooks (DESIGN §15): Claude Code's shape; every level's run. Merged per key. Hooks run in the session's sandbox; keel's `\"sandbox\": false` on a command hook runs it outside, in your own settings files only (a project's hooks stay sandboxed)."},
            "checkpoints": {
                "type": "object",
                "properties": {
                    "enabled": {"type": "boolean", "description": "Snapshot the workspace before the first change after each prompt, for `keel rewind` (default true; needs `git`)."},
                    "maxFileBytes": {"type": "integer", "minimum": 0, "description": "Files larger than this are left out of a snapshot, with a warning (default 10 MiB)."},
                    "maxFiles": {"type": "integer", "minimum": 0, "description": "At most this many files in a snapshot (default 100000)."},
                    "maxTotalBytes": {"type": "integer", "minimum": 0, "description": "At most this many new bytes copied by one snapshot (default 1 GiB)."}
                },
                "additionalProperties": false,
                "description": "Checkpoints and rewind (DESIGN §16). Merged per key."
            }
        },
        "additionalProperties": false
    })
}

/// `sandbox {…}`: what the processes the model starts may do (DESIGN §14).
fn sandbox() -> Value {
    let paths = |what: &str| {
        json!({
            "type": "array",
            "items": {"type": "string"},
            "description": format!("{what} `/abs`, `~/…`, or relative to the project. Lists of all levels are concatenated; a project's own file widens the sandbox only with --trust-project.")
        })
    };
    json!({
        "type": "object",
        "description": "The OS sandbox of every command the model runs (and the file tools' checks). Scalars: the highest level wins; the filesystem lists concatenate.",
        "properties": {
            "mode": {
                "enum": ["workspace-write", "read-only", "off", "danger-full-access"],
                "description": "workspace-write (default): the session's directory, additionalDirectories, allowWrite and /tmp are writable; read-only; off (danger-full-access): no sandbox. `--sandbox` overrides."
            },
            "network": {
                "description": "\"off\" (default), \"on\", or {\"allow\": [hosts]} (an allowlist served by a proxy outside the sandbox): `example.com` or `*.example.com` (its subdomains), on ports 80 and 443 unless followed by `:PORT` (that port only) or `:*` (any port).",
                "oneOf": [
                    {"enum": ["on", "off"]},
                    {
                        "type": "object",
                        "properties": {"allow": {"type": "array", "items": {"type": "string"}}},
                        "required": ["allow"],
                        "additionalProperties": false
                    }
                ]
            },
            "filesystem": {
                "type": "object",
                "properties": {
                    "allowWrite": paths("Writable roots besides the session's directory."),
                    "denyRead": paths("Unreadable, besides the default secrets (~/.ssh, ~/.aws, $KEEL_HOME, …)."),
                    "allowRead": paths("Readable again although under a denied path.")
                },
                "additionalProperties": false
            },
            "bwrapPath": {"type": "string", "description": "The bubblewrap to use (default: the first `bwrap` on PATH outside the workspace)."},
            "failIfUnavailable": {"type": "boolean", "description": "When no sandbox works here: true (default) refuses the model's commands; false runs them unsandboxed with one warning per session."},
            "allowEscalation": {"type": "boolean", "description": "A bash call with escalate: true runs outside the sandbox after an approval. true: an allow rule may also run it without asking; false: never."},
            "passEnv": {"type": "array", "items": {"type": "string"}, "description": "Credential variables (AWS_*, GITHUB_TOKEN, *_TOKEN, *_SECRET*, *_PASSWORD, *_KEY, …) the model's commands may see after all; by default they are removed."},
            "limits": {
                "type": "object",
                "properties": {
                    "pids": {"type": "integer", "minimum": 8, "description": "Processes and threads the session's commands may run at once (default 4096). Held by a cgroup of the session where keel may make one (cgroup v2 with pids delegated, or v1), else by RLIMIT_NPROC, which counts every process of the user and does not bind root."},
                    "memory": {
                        "description": "Memory of the session's commands: bytes, or a size like \"4G\" or \"512M\" (powers of 1024; at least 32M). Default: three quarters of the machine's memory. A cgroup's limit on all of them together, else RLIMIT_AS on each process (its address space, which many runtimes reserve generously).",
                        "oneOf": [
                            {"type": "integer", "minimum": 33554432},
                            {"type": "string", "pattern": "^\\s*[0-9]+(\\.[0-9]+)?\\s*([KkMmGgTt]([Ii]?[Bb])?|[Bb])?\\s*$"}
                        ]
                    }
                },
                "additionalProperties": false,
                "description": "Resource limits of the session's commands (docs/sandbox.md, Resource limits). Merged per key; a project's own file raises them only with --trust-project."
            }
        },
        "additionalProperties": false
    })
}

/// The schema as `keel config schema` prints it.
pub fn text() -> String {
    let pretty = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    format!("{pretty}\n")
}

/// The `lsp` object's schema (apart: one `json!` of it all passes the macro's recursion limit).
fn lsp() -> Value {
    json!({"type": "object", "additionalProperties": false, "description": "Language servers (taken whole from the highest level that sets it): diagnostics after edit and write, and the lsp tool. Built-in defaults for rust-analyzer, pyright-langserver, typescript-language-server, clangd and gopls when found on PATH; keel never downloads one.", "properties": {
        "servers": {"type": "object", "description": "Servers by name, each as a Claude Code .lsp.json entry.", "additionalProperties": {
            "type": "object", "required": ["command"], "additionalProperties": false, "properties": {
                "command": {"type": "string", "description": "The server's program (looked up on PATH)."},
                "args": {"type": "array", "items": {"type": "string"}},
                "extensionToLanguage": {"type": "object", "additionalProperties": {"type": "string"}, "description": "File extension (\".py\") to LSP language id (\"python\")."},
                "env": {"type": "object", "additionalProperties": {"type": "string"}},
                "initializationOptions": {"description": "Sent with initialize."},
                "settings": {"description": "Sent as workspace/didChangeConfiguration and served to workspace/configuration."},
                "startupTimeout": {"type": "integer", "minimum": 0, "description": "Milliseconds the server has to answer initialize (default 10000)."},
                "transport": {"enum": ["stdio"], "description": "Only stdio is spoken."},
                "workspaceFolder": {"type": "string"},
                "restartOnCrash": {"type": "boolean"},
                "maxRestarts": {"type": "integer", "minimum": 0},
                "shutdownTimeout": {"type": "integer", "minimum": 0}
            }
        }},
        "diagnostics": {"enum": ["off", "errors", "all"], "description": "What edit and write append: off, errors (default) or all."},
        "diagnosticsTimeout": {"type": "integer", "minimum": 0, "description": "Milliseconds edit and write wait for the diagnostics of their change (default 1500)."},
        "tool": {"type": "boolean", "description": "Whether the model gets the lsp navigation tool (default true when servers names a server, false with only the built-in defaults)."},
        "defaults": {"type": "boolean", "description": "false: only the servers listed here, no built-in defaults."}
    }})
}
