//! The dependency budget: the packages `Cargo.lock` holds may not grow past
//! the figure BENCHMARKS.md's `## Budgets` table states (issue 49: 527 to
//! 589 in two days, unnoticed). Growing is a decision: raise the figure in
//! the same change, and say in the commit why the new crates are worth it.

use crate::source::{read, root};

/// The row of BENCHMARKS.md that holds the budget.
const ROW: &str = "| Packages in `Cargo.lock` |";

/// How many packages the lock file holds, and the budget; a problem when
/// either cannot be read or the count is over the budget.
pub fn over_budget() -> Vec<String> {
    let lock = read(&root().join("Cargo.lock"));
    let count = lock.lines().filter(|l| *l == "[[package]]").count();
    let benchmarks = read(&root().join("BENCHMARKS.md"));
    let budget = benchmarks
        .lines()
        .find(|l| l.starts_with(ROW))
        .and_then(|l| l[ROW.len()..].split('|').next())
        .and_then(|cell| {
            cell.trim()
                .trim_matches('*')
                .replace(',', "")
                .parse::<usize>()
                .ok()
        });
    match budget {
        None => vec![format!(
            "BENCHMARKS.md has no budget row `{ROW} <number> |` in `## Budgets`"
        )],
        Some(budget) if count > budget => vec![format!(
            "Cargo.lock holds {count} packages, over the budget of {budget} in BENCHMARKS.md \
             (`## Budgets`). Fix: drop what pulled them in (`cargo tree -i <crate>`; default \
             features off), or raise the budget there and say in the commit why they are worth it."
        )],
        Some(_) => Vec::new(),
    }
}
