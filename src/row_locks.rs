//! In-process row locks: DuckDB's write-write rule for open transactions.
//!
//! DuckDB's own storage fails a statement that deletes or updates a row another open
//! transaction has already deleted or updated ("Conflict on tuple deletion"), before either
//! commits. DuckLake relies on that: two connections flushing the same inlined rows see the
//! second flush fail at once, not at COMMIT. moraine keeps the same rule for the transactions
//! of one process (they share one `Store`); across processes SlateDB's write-write detection
//! catches the race at commit instead.

use std::collections::HashMap;
use std::sync::Mutex;

/// Which open transaction holds each row, by row identity.
#[derive(Default)]
pub(crate) struct RowLocks {
    /// Owners are transaction ids ([`crate::txn::Stamp::txn`]), unique in the process.
    held: Mutex<HashMap<Vec<u8>, u64>>,
}

impl RowLocks {
    /// Take every row for `owner`, or none: on a row another owner holds, nothing is taken and
    /// the index of that row is returned. Rows `owner` already holds are not returned in `taken`.
    pub(crate) fn acquire(
        &self,
        owner: u64,
        rows: Vec<Vec<u8>>,
        taken: &mut Vec<Vec<u8>>,
    ) -> Result<(), usize> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = rows
            .iter()
            .position(|r| held.get(r).is_some_and(|&o| o != owner))
        {
            return Err(i);
        }
        held.reserve(rows.len());
        taken.reserve(rows.len());
        for r in rows {
            if held.insert(r.clone(), owner).is_none() {
                taken.push(r);
            }
        }
        Ok(())
    }

    /// How many rows are held (tests).
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Release the rows `owner` took.
    pub(crate) fn release(&self, owner: u64, rows: &[Vec<u8>]) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        for r in rows {
            if held.get(r) == Some(&owner) {
                held.remove(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_held_by_one_owner_until_released() {
        let locks = RowLocks::default();
        let (a, b) = (1, 2);
        let (mut ta, mut tb) = (Vec::new(), Vec::new());
        let rows = vec![b"r1".to_vec(), b"r2".to_vec()];
        assert_eq!(locks.acquire(a, rows.clone(), &mut ta), Ok(()));
        assert_eq!(
            locks.acquire(a, rows.clone(), &mut ta),
            Ok(()),
            "re-taking its own rows is fine"
        );
        assert_eq!(ta.len(), 2);
        // all or nothing: r3 is not taken when r2 is held elsewhere
        let more = vec![b"r3".to_vec(), b"r2".to_vec()];
        assert_eq!(locks.acquire(b, more.clone(), &mut tb), Err(1));
        assert!(tb.is_empty());
        locks.release(a, &ta);
        assert_eq!(locks.acquire(b, more.clone(), &mut tb), Ok(()));
        assert_eq!(tb.len(), 2);
    }
}
