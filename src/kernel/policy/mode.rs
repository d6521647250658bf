//! The permission modes by name: keel's words (`auto`, `accept-edits`, `ask`, `read-only`),
//! Claude Code's aliases (`default`, `acceptEdits`, `bypassPermissions`), and the order
//! Shift+Tab cycles them in, Claude's: ask → accept-edits → plan → auto → ask (`read-only` is
//! left by the cycle, never entered).

use crate::kernel::agent::Permission;

impl Permission {
    /// keel's word for the mode (`--permission`'s value).
    pub fn word(self) -> &'static str {
        match self {
            Permission::Auto => "auto",
            Permission::ReadOnly => "read-only",
            Permission::Ask => "ask",
            Permission::AcceptEdits => "accept-edits",
            Permission::Plan => "plan",
        }
    }

    /// The mode a word names: keel's or Claude's; `None` for any other word.
    pub fn parse(word: &str) -> Option<Permission> {
        match word {
            "auto" | "bypassPermissions" => Some(Permission::Auto),
            "read-only" | "readOnly" => Some(Permission::ReadOnly),
            "ask" | "default" => Some(Permission::Ask),
            "accept-edits" | "acceptEdits" => Some(Permission::AcceptEdits),
            "plan" => Some(Permission::Plan),
            _ => None,
        }
    }

    /// The mode Shift+Tab goes to from this one.
    pub fn next(self) -> Permission {
        match self {
            Permission::Ask => Permission::AcceptEdits,
            Permission::AcceptEdits => Permission::Plan,
            Permission::Plan => Permission::Auto,
            Permission::Auto | Permission::ReadOnly => Permission::Ask,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_claude_aliases_parse() {
        for p in [
            Permission::Auto,
            Permission::ReadOnly,
            Permission::Ask,
            Permission::AcceptEdits,
            Permission::Plan,
        ] {
            assert_eq!(Permission::parse(p.word()), Some(p));
        }
        assert_eq!(Permission::parse("default"), Some(Permission::Ask));
        assert_eq!(
            Permission::parse("acceptEdits"),
            Some(Permission::AcceptEdits)
        );
        assert_eq!(
            Permission::parse("bypassPermissions"),
            Some(Permission::Auto)
        );
        assert_eq!(Permission::parse("yolo"), None);
    }

    #[test]
    fn shift_tab_cycles_ask_accept_edits_plan_auto() {
        let mut p = Permission::Ask;
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(p.word());
            p = p.next();
        }
        assert_eq!(seen, ["ask", "accept-edits", "plan", "auto", "ask"]);
        assert_eq!(Permission::ReadOnly.next(), Permission::Ask);
    }
}
