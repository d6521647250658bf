//! The TUI shows the permission policy (issue 29 point 8): the status line names the session's
//! mode, Shift+Tab cycles it (ask → accept-edits → auto → ask) and tells the session, and
//! `/permissions` lists the rules in force with their origin. Screens at 80x24, snapshotted.

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use keel::front::tui::permissions::listing;
use keel::front::tui::transcript::HistoryCell;
use keel::front::tui::view::Action;
use keel::wire::pi::data::{PermissionRule, PermissionsData};
use keel::Permission;

use crate::common::support::snap;
use crate::tui::Feed;

fn asking() -> Feed {
    let mut f = Feed::new();
    f.view.permission = Some(Permission::Ask);
    f
}

fn status(f: &mut Feed) -> String {
    let screen = f.screen(80, 24);
    let line = screen.lines().find(|l| l.contains("thinking medium"));
    line.unwrap_or_default().to_string()
}

#[test]
fn the_status_line_names_the_permission_mode() {
    let mut f = asking();
    let screen = f.screen(80, 24);
    assert!(status(&mut f).contains("ask mode"), "{screen}");
    snap("tui_permission_mode_ask_80x24", &screen);
}

#[test]
fn shift_tab_cycles_the_mode_and_tells_the_session() {
    let mut f = asking();
    let back_tab = KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT);
    assert_eq!(
        f.view.on_key(back_tab),
        Some(Action::SetPermission(Permission::AcceptEdits))
    );
    assert!(
        status(&mut f).contains("accept-edits mode"),
        "{}",
        status(&mut f)
    );
    snap("tui_permission_mode_accept_edits_80x24", &f.screen(80, 24));
    assert_eq!(
        f.view.on_key(back_tab),
        Some(Action::SetPermission(Permission::Plan))
    );
    assert!(status(&mut f).contains("plan mode"), "{}", status(&mut f));
    assert_eq!(
        f.view.on_key(back_tab),
        Some(Action::SetPermission(Permission::Auto))
    );
    assert_eq!(
        f.view.on_key(back_tab),
        Some(Action::SetPermission(Permission::Ask))
    );
    assert!(status(&mut f).contains("ask mode"));
    let mut unknown = Feed::new();
    assert_eq!(
        unknown.view.on_key(back_tab),
        None,
        "no mode known: nothing to cycle"
    );
}

#[test]
fn slash_permissions_lists_the_rules_with_their_origin() {
    let rule = |list: &str, rule: &str, origin: &str| PermissionRule {
        list: list.into(),
        rule: rule.into(),
        origin: origin.into(),
    };
    let data = PermissionsData {
        mode: "accept-edits".into(),
        rules: vec![
            rule("deny", "Bash(rm:*)", "/p/.keel/settings.json"),
            rule("ask", "Bash(git push:*)", "/home/u/.keel/settings.json"),
            rule("allow", "Bash(npm test:*)", "flag --settings"),
            rule(
                "allow",
                "Edit(/src/a.rs)",
                "an \"always\" answer, saved to /p/.keel/settings.local.json",
            ),
        ],
    };
    let mut f = asking();
    f.view.notice(HistoryCell::Notice(listing(&data)));
    let screen = f.screen(80, 24);
    assert!(screen.contains("permission mode: accept-edits"), "{screen}");
    assert!(screen.contains("deny  Bash(rm:*)"), "{screen}");
    assert!(screen.contains("\"always\" answer"), "{screen}");
    snap("tui_permissions_listing_80x24", &screen);
    let none = listing(&PermissionsData {
        mode: "ask".into(),
        rules: Vec::new(),
    });
    assert!(none.contains("no permission rules"), "{none}");
    assert!(
        keel::front::tui::view::COMMANDS
            .iter()
            .any(|(name, _)| *name == "permissions"),
        "/permissions is a slash command"
    );
}
