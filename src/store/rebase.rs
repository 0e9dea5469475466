//! Taking a commit that lost its race onto the new head, when no commit made since its base
//! wrote any key it writes (RFC 0004, "Commits that touch different rows").
//!
//! DuckLake's commits that insert a snapshot all write the next snapshot's key, so two of them
//! always meet here and DuckLake retries the loser. Its expiry and cleanup commits insert no
//! snapshot and are not retried by DuckLake: on Postgres they land unless a concurrent commit
//! changed the same rows, and so they do here.

use crate::checkpoint::{Commit, Writes};
use crate::head::Head;
use crate::keys;

/// `commit`, made on `base`, taken onto the head of `since` (every commit after `base`, in
/// order): the same writes with the head they now make. `None` when it cannot be: a commit of
/// `since` is retired (its writes are unknown) or out of order, one wrote a key `commit` writes
/// (`sys/head` aside, which every commit writes), both `commit` and one of `since` insert a
/// snapshot of the default lake, or one of them changes the catalog's structure (a metadata
/// table or schema created or dropped, another lake's head: writes that follow from what the
/// commit scanned, not only from the keys it wrote), or the lake lost its snapshots since.
pub(crate) fn onto(commit: &Commit, base: Head, since: &[Commit]) -> Option<Commit> {
    let top = since.last()?.head;
    if (base.snapshot_id.is_some() && top.snapshot_id.is_none())
        || std::iter::once(commit)
            .chain(since)
            .any(|c| c.writes.keys().any(|k| structural(k)))
    {
        return None;
    }
    let consecutive = since
        .iter()
        .enumerate()
        .all(|(i, c)| !c.retired && c.head.batch_count == base.batch_count + 1 + i as u64);
    if !consecutive || commit.head.batch_count != base.batch_count + 1 {
        return None;
    }
    let head_key = keys::sys_head();
    if since
        .iter()
        .any(|c| overlap(&commit.writes, &c.writes, &head_key))
    {
        return None;
    }
    let snapshot_id = if commit.head.snapshot_id == base.snapshot_id {
        // it inserts no snapshot: the head keeps the newest one
        top.snapshot_id
    } else {
        // it inserts one (or drops the snapshot table): only over commits that inserted none
        match (base.snapshot_id, commit.head.snapshot_id) {
            (b, Some(ours)) if top.snapshot_id == b && b.is_none_or(|b| ours > b) => Some(ours),
            _ => return None,
        }
    };
    let head = Head {
        snapshot_id,
        batch_count: top.batch_count + 1,
    };
    let mut writes = commit.writes.clone();
    writes.insert(head_key, Some(head.encode()));
    Some(Commit {
        id: commit.id,
        head,
        writes,
        retired: false,
    })
}

/// Whether `key` changes the catalog's structure: a metadata table's or schema's definition
/// (`sys/table/...`, `sys/schema/...`) or the head of a lake other than the default one
/// (`lake/<name>/head`).
fn structural(key: &[u8]) -> bool {
    if key.starts_with(&keys::sys_table_prefix()) || key.starts_with(&keys::sys_schema_prefix()) {
        return true;
    }
    matches!(
        keys::raw_segments(key, 4).as_deref(),
        Ok([lake, _, head]) if keys::segment_is_text(lake, "lake") && keys::segment_is_text(head, "head")
    )
}

/// Whether `a` and `b` write a key in common other than `except`.
fn overlap(a: &Writes, b: &Writes, except: &[u8]) -> bool {
    let (small, large) = if a.len() <= b.len() { (a, b) } else { (b, a) };
    small
        .keys()
        .any(|k| k.as_slice() != except && large.contains_key(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(snapshot: i64, batch: u64) -> Head {
        Head {
            snapshot_id: Some(snapshot),
            batch_count: batch,
        }
    }

    /// A commit making `made` that writes `keys` (and `sys/head`).
    fn commit(made: Head, keys: &[&str]) -> Commit {
        let mut writes: Writes = keys
            .iter()
            .map(|k| (k.as_bytes().to_vec(), Some(b"v".to_vec())))
            .collect();
        writes.insert(keys::sys_head(), Some(made.encode()));
        Commit::new(made, writes)
    }

    #[test]
    fn a_commit_inserting_no_snapshot_goes_over_commits_that_touched_other_keys() {
        let base = head(7, 10);
        let expiry = commit(head(7, 11), &["snapshot/3", "file/1"]);
        let since = [
            commit(head(8, 11), &["snapshot/8", "file/9"]),
            commit(head(9, 12), &["snapshot/9"]),
        ];
        let got = onto(&expiry, base, &since).expect("disjoint");
        assert_eq!(got.head, head(9, 13));
        assert_eq!(got.id, expiry.id);
        assert_eq!(
            got.writes.get(&keys::sys_head()),
            Some(&Some(head(9, 13).encode()))
        );
        assert_eq!(got.writes.len(), expiry.writes.len());
        assert!(got.writes.contains_key(b"file/1".as_slice()));
    }

    #[test]
    fn a_commit_that_wrote_the_same_key_is_a_conflict() {
        let base = head(7, 10);
        let expiry = commit(head(7, 11), &["snapshot/3", "file/1"]);
        let since = [
            commit(head(8, 11), &["snapshot/8"]),
            commit(head(8, 12), &["file/1"]),
        ];
        assert!(onto(&expiry, base, &since).is_none());
    }

    #[test]
    fn two_commits_inserting_snapshots_never_pass_each_other() {
        let base = head(7, 10);
        // (they write the same snapshot key; even if they did not, the head says so)
        let ours = commit(head(8, 11), &["snapshot/8a"]);
        let since = [commit(head(8, 11), &["snapshot/8b"])];
        assert!(onto(&ours, base, &since).is_none());
    }

    #[test]
    fn a_commit_inserting_a_snapshot_goes_over_maintenance() {
        let base = head(7, 10);
        let insert = commit(head(8, 11), &["snapshot/8", "file/9"]);
        let since = [commit(head(7, 11), &["snapshot/2"])];
        let got = onto(&insert, base, &since).expect("disjoint");
        assert_eq!(got.head, head(8, 12));
    }

    #[test]
    fn structural_changes_are_not_gone_over() {
        let base = head(7, 10);
        let expiry = commit(head(7, 11), &["snapshot/3"]);
        let mut dropped = commit(head(8, 11), &["snapshot/8"]);
        dropped
            .writes
            .insert(keys::sys_table("main", "ducklake_inlined_data_1_1"), None);
        assert!(onto(&expiry, base, &[dropped]).is_none());
        let mut other_lake = commit(head(7, 11), &["x"]);
        other_lake
            .writes
            .insert(keys::lake_head("metadata_s2"), Some(b"h".to_vec()));
        assert!(onto(&other_lake, base, &[commit(head(8, 11), &["y"])]).is_none());
        // a lake whose snapshot table was dropped meanwhile
        let emptied = Commit::new(
            Head {
                snapshot_id: None,
                batch_count: 11,
            },
            Writes::new(),
        );
        assert!(onto(&expiry, base, &[emptied]).is_none());
        // a store with no DuckLake snapshot at all (raw tables) goes on as any other
        let none = |batch| Head {
            snapshot_id: None,
            batch_count: batch,
        };
        let raw = commit(none(11), &["row/1"]);
        let got = onto(&raw, none(10), &[commit(none(11), &["row/2"])]).expect("disjoint");
        assert_eq!(got.head, none(12));
        // (a lake's other keys are not structural)
        assert!(!structural(&keys::snapshot("metadata_s2", 4)));
        assert!(!structural(&keys::sys_head()));
    }

    #[test]
    fn retired_missing_or_foreign_commits_are_not_gone_over() {
        let base = head(7, 10);
        let expiry = commit(head(7, 11), &["snapshot/3"]);
        let retired = commit(head(8, 11), &["snapshot/8"]).retired();
        assert!(onto(&expiry, base, &[retired]).is_none());
        // a gap: batch 11 is not among them
        let later = commit(head(8, 12), &["snapshot/8"]);
        assert!(onto(&expiry, base, &[later]).is_none());
        // nothing since: nothing to go over
        assert!(onto(&expiry, base, &[]).is_none());
        // a commit not made on `base`
        let other = commit(head(7, 12), &["snapshot/3"]);
        assert!(onto(&other, base, &[commit(head(8, 11), &["x"])]).is_none());
    }
}
