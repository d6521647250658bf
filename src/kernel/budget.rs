//! A run's cost account (`--max-cost`): the USD its model calls have cost so far and the cap,
//! shared by the run and every subagent it starts (and theirs), so that a child spends from
//! its parent's remaining budget and the run stops once any of them crossed the cap. Counts
//! and compares only; the turn loop decides what to do about it.

use std::sync::{Arc, Mutex};

/// One run's account; clones share it.
#[derive(Debug, Clone)]
pub struct Budget(Arc<Account>);

#[derive(Debug)]
struct Account {
    cap: f64,
    spent: Mutex<f64>,
}

impl Budget {
    /// A fresh account with `cap` USD and nothing spent.
    pub fn new(cap: f64) -> Budget {
        Budget(Arc::new(Account {
            cap,
            spent: Mutex::new(0.0),
        }))
    }

    /// The cap in USD.
    pub fn cap(&self) -> f64 {
        self.0.cap
    }

    /// USD spent so far by the run and its subagents.
    pub fn spent(&self) -> f64 {
        *self.0.spent.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds one model call's cost.
    pub fn spend(&self, usd: f64) {
        *self.0.spent.lock().unwrap_or_else(|e| e.into_inner()) += usd;
    }

    /// Whether more than the cap was spent (reaching it exactly is not exceeding it).
    pub fn exceeded(&self) -> bool {
        self.spent() > self.cap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_one_account() {
        let parent = Budget::new(0.25);
        let child = parent.clone();
        parent.spend(0.125);
        child.spend(0.125);
        assert_eq!(parent.spent(), 0.25);
        assert!(!parent.exceeded(), "reaching the cap is not exceeding it");
        child.spend(0.01);
        assert!(parent.exceeded() && child.exceeded());
        assert!(!Budget::new(0.25).exceeded(), "a fresh account is its own");
    }
}
