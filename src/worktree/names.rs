//! Names for worktrees made without one: two words and four hex digits (`calm-otter-3f2a`),
//! one that no worktree of the repository has.

use std::path::Path;

const FIRST: &[&str] = &[
    "amber", "brisk", "calm", "deft", "eager", "fair", "glad", "hale", "keen", "lucid", "merry",
    "neat", "quick", "steady", "tidy", "vivid",
];
const SECOND: &[&str] = &[
    "badger", "crane", "dingo", "egret", "finch", "gecko", "heron", "ibis", "lynx", "marten",
    "newt", "otter", "puffin", "raven", "stoat", "wren",
];

/// A fresh name for a worktree of the checkout at `main`.
pub fn fresh(main: &Path) -> String {
    loop {
        let n = uuid::Uuid::new_v4().as_u128();
        let name = format!(
            "{}-{}-{:04x}",
            FIRST[(n % 16) as usize],
            SECOND[((n >> 4) % 16) as usize],
            (n >> 8) & 0xffff
        );
        if !main.join(super::DIR).join(&name).exists() {
            return name;
        }
    }
}
