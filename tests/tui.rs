//! The TUI without a terminal: screens rendered into ratatui's `TestBackend` at 80x24 and
//! 40x12 (snapshots) and the keys → actions contract (the real bytes are `tui_vt100.rs`).

use keel::front::tui::picker::Picker;
use keel::front::tui::view::{Action, View};
use keel::front::tui::{self};
use keel::kernel::event::{
    ApprovalDecision, AssistantDelta, CompactionReason, Event, EventPayload, RunOutcome,
};
use keel::kernel::message::{AssistantMessage, Content, Message, StopReason, Usage};
use keel::kernel::session::SessionSummary;
use keel::kernel::tool::ToolOutput;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde_json::{json, Value};

use crate::common::support::snap;

/// Builds a view by feeding it kernel events the way the controller does: each one as the
/// wire lines a host publishes for it, parsed back (so every snapshot here goes through the
/// public vocabulary).
pub struct Feed {
    pub view: View,
    seq: u64,
    ts: i64,
}

impl Feed {
    pub fn new() -> Feed {
        let mut view = View::new();
        view.now_ms = 1_796_000_000_000;
        view.context_window = 200_000;
        let mut f = Feed {
            view,
            seq: 0,
            ts: 1_796_000_000_000,
        };
        f.send(EventPayload::ModelChanged {
            provider: "anthropic".into(),
            model: "claude-sonnet-4-5".into(),
        });
        f.send(EventPayload::ThinkingLevelChanged {
            level: "medium".into(),
        });
        f
    }

    pub fn send(&mut self, payload: EventPayload) {
        self.seq += 1;
        self.ts += 250;
        self.view.now_ms = self.ts;
        let actions = self.feed(&Event {
            seq: self.seq,
            ts: self.ts,
            payload,
        });
        assert!(actions.is_empty(), "unexpected actions {actions:?}");
    }

    /// A kernel event as the controller feeds it: through the wire lines a host publishes.
    pub fn feed(&mut self, event: &Event) -> Vec<Action> {
        tui::wire::events_for(event)
            .iter()
            .flat_map(|e| self.view.on_event(e, event.ts))
            .collect()
    }

    /// After `prompt`, a call (`call_1`) of `tool` with `args` waits for approval, with
    /// `preview` of its change.
    pub fn asking(
        prompt: &str,
        tool: &str,
        args: Value,
        preview: Option<keel::kernel::tool::preview::Preview>,
    ) -> Feed {
        let mut f = Feed::new();
        f.user(prompt);
        f.tool("call_1", tool, args.clone(), None);
        f.send(EventPayload::ApprovalRequested {
            call_id: "call_1".into(),
            tool_name: tool.into(),
            args,
            preview,
        });
        f
    }

    pub fn delta(&mut self, delta: AssistantDelta) {
        self.send(EventPayload::MessageDelta {
            usage: Usage::default(),
            delta,
        });
    }

    pub fn user(&mut self, text: &str) {
        self.send(EventPayload::AgentStarted);
        self.send(EventPayload::MessageStarted {
            message: Message::user(text, 0),
        });
    }

    /// Streams `text` as one text block in pieces of `chunk` characters (not finished).
    pub fn stream(&mut self, text: &str, chunk: usize) {
        self.send(EventPayload::MessageStarted {
            message: Message::from(assistant(vec![], StopReason::Pending)),
        });
        self.delta(AssistantDelta::TextStarted { index: 0 });
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(chunk.max(1)) {
            self.delta(AssistantDelta::TextDelta {
                index: 0,
                delta: piece.iter().collect(),
            });
        }
    }

    /// Ends the streamed message and the run.
    pub fn finish(&mut self, text: &str) {
        self.delta(AssistantDelta::TextFinished {
            index: 0,
            text: text.into(),
        });
        let mut m = assistant(vec![Content::text(text)], StopReason::Stop);
        m.usage = Usage {
            input: 12_400,
            output: 830,
            total_tokens: 13_230,
            ..Usage::default()
        };
        m.usage.cost.total = 0.0497;
        self.send(EventPayload::MessageFinished {
            message: Message::from(m),
            entry_id: "e1".into(),
        });
        self.settle(RunOutcome::Completed);
    }

    pub fn settle(&mut self, outcome: RunOutcome) {
        self.send(EventPayload::AgentSettled {
            aborted: outcome == RunOutcome::Aborted,
            outcome,
            structured_output: None,
        });
    }

    pub fn tool(&mut self, id: &str, name: &str, args: Value, result: Option<ToolOutput>) {
        self.send(EventPayload::ToolCallStarted {
            call_id: id.into(),
            tool_name: name.into(),
            args,
        });
        if let Some(result) = result {
            self.send(EventPayload::ToolCallFinished {
                call_id: id.into(),
                tool_name: name.into(),
                result,
                duration_ms: 1_250,
            });
        }
    }

    /// The screen as drawn, with its styles.
    pub fn buffer(&mut self, w: u16, h: u16) -> ratatui::buffer::Buffer {
        let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
        terminal
            .draw(|f| self.view.render_screen(f.buffer_mut()))
            .unwrap();
        terminal.backend().buffer().clone()
    }

    pub fn screen(&mut self, w: u16, h: u16) -> String {
        // One row per line, trailing spaces dropped, so snapshots read like the screen.
        let buf = self.buffer(w, h);
        (0..h)
            .map(|y| keel::front::tui::paint::row_text(&buf, y))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Snapshots the screen at 80x24 and 40x12 (from two identical feeds).
    pub fn snap_both(build: impl Fn() -> Feed, name: &str) {
        let wide = build().screen(80, 24);
        let narrow = build().screen(40, 12);
        snap(&format!("tui_{name}_80x24"), &wide);
        snap(&format!("tui_{name}_40x12"), &narrow);
        for (w, screen) in [(80, &wide), (40, &narrow)] {
            for line in screen.lines() {
                assert!(
                    keel::text::width(line) <= w,
                    "{name}: a row is wider than {w}: {line:?}"
                );
            }
        }
    }
}

pub fn assistant(content: Vec<Content>, stop_reason: StopReason) -> AssistantMessage {
    AssistantMessage {
        content,
        api: "anthropic-messages".into(),
        provider: "anthropic".into(),
        model: "claude-sonnet-4-5".into(),
        usage: Usage::default(),
        stop_reason,
        error_message: None,
        duration_ms: None,
        timestamp: 0,
    }
}

const ANSWER: &str = "# Plan\n\nThe parser has **two** problems:\n\n1. `parse_line` drops the last field\n2. errors lose their [context](https://example.com/ctx)\n\n```rust\nfn parse_line(s: &str) -> Vec<&str> {\n    s.split(',').collect()\n}\n```\n\n- fix the split\n  - add a test\n- done\n";

#[test]
fn streamed_markdown_answer() {
    Feed::snap_both(
        || {
            let mut f = Feed::new();
            f.user("Why does the parser drop fields?");
            f.stream(ANSWER, 7);
            f.finish(ANSWER);
            f
        },
        "markdown_answer",
    );
}

#[test]
fn answer_while_streaming_shows_the_partial_line_and_status() {
    Feed::snap_both(
        || {
            let mut f = Feed::new();
            f.user("Why does the parser drop fields?");
            f.stream("# Plan\n\nThe parser has **two** prob", 5);
            f
        },
        "markdown_streaming",
    );
}

const CJK: &str = "日本語の説明です。This line mixes 中文字符 and emoji 👩\u{200d}💻 ❤\u{fe0f} 🇯🇵 with combining e\u{301}\u{301} marks.\n\nAmbiguous: ± ① … § ° — these are one column on most terminals and two on CJK ones.\n";

fn cjk_feed() -> Feed {
    let mut f = Feed::new();
    f.user("日本語で説明してください 👩\u{200d}💻");
    f.stream(CJK, 3);
    f.finish(CJK);
    f
}

#[test]
fn cjk_emoji_and_ambiguous_width_transcript() {
    Feed::snap_both(cjk_feed, "cjk_narrow_ambiguous");
    keel::text::set_ambiguous_wide(true);
    let wide = cjk_feed().screen(80, 24);
    let narrow = cjk_feed().screen(40, 12);
    keel::text::set_ambiguous_wide(false);
    snap("tui_cjk_wide_ambiguous_80x24", &wide);
    snap("tui_cjk_wide_ambiguous_40x12", &narrow);
    keel::text::set_ambiguous_wide(true);
    for (w, screen) in [(80, &wide), (40, &narrow)] {
        for line in screen.lines() {
            assert!(keel::text::width(line) <= w, "wider than {w}: {line:?}");
        }
    }
    keel::text::set_ambiguous_wide(false);
}

fn ok(text: &str, details: Value) -> Option<ToolOutput> {
    Some(ToolOutput::ok(text).with_details(details))
}

#[test]
fn tool_cells_of_every_kind() {
    Feed::snap_both(
        || {
            let mut f = Feed::new();
            f.user("Tidy up the config loader");
            f.tool(
                "t1",
                "read",
                json!({"path": "src/config.rs", "offset": 1, "limit": 40}),
                ok("...", json!({"path": "src/config.rs", "totalLines": 120, "startLine": 1, "endLine": 40, "truncated": false})),
            );
            f.tool(
                "t2",
                "grep",
                json!({"pattern": "load_config", "path": "src"}),
                ok("...", json!({"matches": 7, "files": 3, "truncated": false})),
            );
            f.tool(
                "t3",
                "find",
                json!({"pattern": "*.toml"}),
                ok("a.toml\nb.toml", json!({"count": 2, "truncated": false})),
            );
            f.tool(
                "t4",
                "ls",
                json!({"path": "src"}),
                ok("...", json!({"count": 9, "truncated": false})),
            );
            f.tool(
                "t5",
                "edit",
                json!({"path": "src/config.rs", "oldText": "a", "newText": "b"}),
                ok("Successfully replaced text", json!({"path": "src/config.rs", "firstChangedLine": 12, "diff": "--- src/config.rs\n+++ src/config.rs\n@@ -11,3 +11,3 @@\n fn load() {\n-    let path = \"a\";\n+    let path = \"b\";\n }\n"})),
            );
            f.tool(
                "t6",
                "write",
                json!({"path": "notes.md", "content": "x"}),
                ok(
                    "Wrote 1300 bytes",
                    json!({"path": "notes.md", "bytes": 1300, "created": true}),
                ),
            );
            f.tool(
                "t7",
                "bash",
                json!({"command": "cargo test"}),
                ok("running 3 tests\ntest a ... ok\ntest b ... ok\ntest c ... ok\n\ntest result: ok. 3 passed", json!({"exitCode": 0, "cancelled": false, "timedOut": false, "truncated": false})),
            );
            f.tool(
                "t8",
                "read",
                json!({"path": "missing.rs"}),
                Some(ToolOutput::error("File not found: missing.rs")),
            );
            f.tool(
                "t9",
                "bash",
                json!({"command": "cargo build --release"}),
                None,
            );
            f.send(EventPayload::ToolCallUpdated {
                call_id: "t9".into(),
                tool_name: "bash".into(),
                args: json!({"command": "cargo build --release"}),
                partial: ToolOutput::ok(
                    "   Compiling serde v1\n   Compiling tokio v1\n   Compiling keel v0.1.0",
                ),
            });
            f
        },
        "tool_cells",
    );
}

#[test]
fn error_cell() {
    Feed::snap_both(
        || {
            let mut f = Feed::new();
            f.user("hello");
            let mut m = assistant(vec![], StopReason::Error);
            m.error_message = Some("auth: invalid x-api-key (check ANTHROPIC_API_KEY)".into());
            f.send(EventPayload::MessageFinished {
                message: Message::from(m),
                entry_id: "e".into(),
            });
            f.settle(RunOutcome::Failed {
                kind: "auth".into(),
                message: "invalid x-api-key".into(),
            });
            f
        },
        "error",
    );
}

#[test]
fn retry_is_visible() {
    Feed::snap_both(
        || {
            let mut f = Feed::new();
            f.user("hello");
            let mut m = assistant(vec![], StopReason::Error);
            m.error_message = Some("overloaded: the server is busy".into());
            f.send(EventPayload::AgentFinished {
                messages: vec![],
                will_retry: true,
            });
            f.send(EventPayload::RetryScheduled {
                attempt: 1,
                max_attempts: 3,
                delay_ms: 2_000,
                error_message: "overloaded: the server is busy".into(),
            });
            f
        },
        "retry",
    );
}

fn approval_feed() -> Feed {
    let args = json!({"command": "rm -rf target/"});
    Feed::asking("clean the build directory", "bash", args, None)
}

#[test]
fn approval_dialog() {
    Feed::snap_both(approval_feed, "approval");
}

#[test]
fn queue_with_steering_and_follow_ups() {
    Feed::snap_both(
        || {
            let mut f = Feed::new();
            f.user("refactor the loader");
            f.stream("Looking at the loader first.\nIt has three ", 6);
            f.send(EventPayload::QueueChanged {
                steering: vec!["use the new error type".into()],
                follow_up: vec!["then update the docs".into(), "and run the tests".into()],
            });
            f
        },
        "queue",
    );
}

fn summary(id: &str, cwd: &str, minutes_ago: i64, count: usize, first: &str) -> SessionSummary {
    SessionSummary {
        path: format!("/s/{id}.jsonl").into(),
        id: id.into(),
        cwd: cwd.into(),
        created: "2026-11-30T00:00:00.000Z".into(),
        modified_ms: 1_796_000_000_000 - minutes_ago * 60_000,
        message_count: count,
        first_message: Some(first.into()),
        name: None,
    }
}

fn picker_feed() -> Feed {
    let here = vec![
        summary("0194a1", "/work/app", 3, 12, "Fix the flaky login test"),
        summary(
            "0194a2",
            "/work/app",
            180,
            4,
            "日本語のドキュメントを書いて",
        ),
        summary(
            "0194a3",
            "/work/app",
            60 * 24 * 3,
            40,
            "Refactor the config loader 👩\u{200d}💻",
        ),
    ];
    let mut all = here.clone();
    all.push(summary(
        "0194b1",
        "/work/other",
        30,
        2,
        "What does this repo do?",
    ));
    let mut f = Feed::new();
    f.view
        .open_picker(Picker::new(here, all, 1_796_000_000_000));
    f
}

#[test]
fn session_picker() {
    Feed::snap_both(picker_feed, "picker");
}

// ---------------------------------------------------------------------------------------------
// Keys → actions.

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn type_text(view: &mut View, text: &str) {
    for c in text.chars() {
        assert_eq!(view.on_key(key(KeyCode::Char(c))), None);
    }
}

#[test]
fn enter_prompts_when_idle_and_steers_while_working() {
    let mut f = Feed::new();
    type_text(&mut f.view, "hello");
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        Some(Action::Prompt("hello".into()))
    );
    assert!(f.view.composer.is_empty());
    f.user("hello");
    type_text(&mut f.view, "focus on tests");
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        Some(Action::Steer("focus on tests".into()))
    );
    type_text(&mut f.view, "then docs");
    assert_eq!(
        f.view
            .on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT)),
        Some(Action::FollowUp("then docs".into()))
    );
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        None,
        "empty editor sends nothing"
    );
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), Some(Action::Abort));
    f.view
        .restore_to_composer(vec!["focus on tests".into(), "then docs".into()]);
    assert_eq!(f.view.composer.text(), "focus on tests\nthen docs");
    f.settle(RunOutcome::Aborted);
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), None, "nothing to abort");
}

#[test]
fn ctrl_c_clears_then_quits_and_ctrl_d_quits_on_empty() {
    let mut f = Feed::new();
    type_text(&mut f.view, "draft");
    assert_eq!(
        f.view.on_key(ctrl('d')),
        None,
        "Ctrl+D with text does not quit"
    );
    assert_eq!(f.view.on_key(ctrl('c')), None);
    assert!(f.view.composer.is_empty(), "first Ctrl+C clears the editor");
    assert_eq!(f.view.on_key(ctrl('c')), None, "the next one arms quitting");
    assert!(f.screen(80, 24).contains("press Ctrl+C again to quit"));
    assert_eq!(f.view.on_key(ctrl('c')), Some(Action::Quit));
    type_text(&mut f.view, "x");
    assert_eq!(f.view.on_key(ctrl('c')), None);
    assert_eq!(f.view.on_key(ctrl('d')), Some(Action::Quit));
}

#[test]
fn slash_commands_and_shell_commands_become_actions() {
    let mut f = Feed::new();
    type_text(&mut f.view, "/model anthropic/claude-opus-4");
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        Some(Action::Command {
            name: "model".into(),
            args: "anthropic/claude-opus-4".into()
        })
    );
    type_text(&mut f.view, "/comp");
    f.view.on_key(key(KeyCode::Tab));
    assert_eq!(f.view.composer.text(), "/compact ");
    f.view.composer.clear();
    type_text(&mut f.view, "/nope");
    assert_eq!(f.view.on_key(key(KeyCode::Enter)), None);
    let screen = f.screen(80, 24);
    assert!(
        screen.contains("unknown command /nope: /help lists the commands"),
        "{screen}"
    );
    // Nothing was sent and the editor is empty; Up brings the text back to fix.
    assert_eq!(f.view.composer.text(), "", "the editor is emptied");
    f.view.on_key(key(KeyCode::Up));
    assert_eq!(f.view.composer.text(), "/nope");
    f.view.composer.clear();
    type_text(&mut f.view, "!ls -la");
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        Some(Action::Bash("ls -la".into()))
    );
}

#[test]
fn approval_keys_allow_once_always_or_deny() {
    let mut f = approval_feed();
    assert_eq!(f.view.on_key(key(KeyCode::Char('x'))), None);
    assert!(f.view.composer.is_empty(), "the dialog has the keyboard");
    assert_eq!(
        f.view.on_key(key(KeyCode::Char('y'))),
        Some(Action::Approve {
            call_id: "call_1".into(),
            decision: ApprovalDecision::Allow
        })
    );
    let mut f = approval_feed();
    assert_eq!(
        f.view.on_key(key(KeyCode::Char('n'))),
        Some(Action::Approve {
            call_id: "call_1".into(),
            decision: ApprovalDecision::Deny
        })
    );
    let mut f = approval_feed();
    // "Always" goes to the session, which saves a rule and applies it (the view keeps no
    // list of its own: the next call of the tool is asked unless the rule covers it).
    assert_eq!(
        f.view.on_key(key(KeyCode::Char('a'))),
        Some(Action::AllowAlways {
            call_id: "call_1".into()
        })
    );
    f.tool("call_2", "bash", json!({"command": "ls"}), None);
    let actions = f.feed(&Event {
        seq: 99,
        ts: 0,
        payload: EventPayload::ApprovalRequested {
            call_id: "call_2".into(),
            tool_name: "bash".into(),
            args: json!({"command": "ls"}),
            preview: None,
        },
    });
    assert_eq!(actions, [], "asked, not answered by the view");
}

#[test]
fn picker_enter_opens_the_selected_session() {
    let mut f = picker_feed();
    assert!(f.view.picker_open());
    f.view.on_key(key(KeyCode::Down));
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        Some(Action::OpenSession("/s/0194a2.jsonl".into()))
    );
    assert!(!f.view.picker_open());
}

#[test]
fn compaction_and_thinking_cells() {
    let mut f = Feed::new();
    f.user("go");
    f.send(EventPayload::MessageStarted {
        message: Message::from(assistant(vec![], StopReason::Pending)),
    });
    f.delta(AssistantDelta::ThinkingStarted { index: 0 });
    f.delta(AssistantDelta::ThinkingDelta {
        index: 0,
        delta: "The user wants me to go.\nI should check the files first.".into(),
    });
    let live = f.screen(80, 24);
    assert!(live.contains("✻ Thinking… (12 words)"), "{live}");
    f.delta(AssistantDelta::ThinkingFinished {
        index: 0,
        thinking: "The user wants me to go.\nI should check the files first.".into(),
    });
    f.send(EventPayload::CompactionStarted {
        reason: CompactionReason::Threshold,
    });
    let screen = f.screen(80, 24);
    assert!(screen.contains("✻ Thought for 12 words"), "{screen}");
    assert!(screen.contains("Compacting the conversation"), "{screen}");
}

#[test]
fn at_opens_a_fuzzy_file_menu_and_tab_inserts_the_chosen_path() {
    let mut f = Feed::new();
    f.view.files = Some(keel::front::tui::files::FileIndex::of(
        [
            "Cargo.toml",
            "README.md",
            "src/main.rs",
            "src/mentions.rs",
            "src/front/tui/view.rs",
            "docs/notes on menus.md",
        ]
        .map(String::from)
        .to_vec(),
    ));
    type_text(&mut f.view, "explain @men");
    let menu = f.view.mention.clone().expect("the menu is open");
    assert_eq!(menu.matches[0], "src/mentions.rs", "{menu:?}");
    snap("tui_at_file_menu_80x24", &f.screen(80, 24));
    // Down then Tab takes the second match; the word becomes `@path `.
    assert_eq!(f.view.on_key(key(KeyCode::Down)), None);
    assert_eq!(f.view.on_key(key(KeyCode::Tab)), None);
    let second = &menu.matches[1];
    let quoted = match second.contains(' ') {
        true => format!("\"{second}\""),
        false => second.clone(),
    };
    assert_eq!(f.view.composer.text(), format!("explain @{quoted} "));
    assert!(f.view.mention.is_none());
    // Esc closes a menu; it stays closed for that word, and a plain word has none.
    type_text(&mut f.view, "@RE");
    assert!(f.view.mention.is_some());
    assert_eq!(f.view.on_key(key(KeyCode::Esc)), None);
    assert!(f.view.mention.is_none());
    assert_eq!(
        f.view.on_key(key(KeyCode::Enter)),
        Some(Action::Prompt(format!("explain @{quoted} @RE"))),
        "Enter sends when the menu is closed"
    );
    type_text(&mut f.view, "mail me@host");
    assert!(f.view.mention.is_none());
    // Enter on an open menu inserts instead of sending.
    f.view.composer.clear();
    type_text(&mut f.view, "@Carg");
    assert_eq!(f.view.on_key(key(KeyCode::Enter)), None);
    assert_eq!(f.view.composer.text(), "@Cargo.toml ");
}
