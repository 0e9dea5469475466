//! Core tests on real SlateDB: process-local in-memory object stores (`memory://`) and local
//! directories. No mocks: every test opens a store, commits through `Transaction`, and reads
//! back through a new transaction or the raw keyspace.

use super::*;
use crate::catalog::{fixed_table_def, ColumnDef, OnConflict, SnapshotRecord};
use crate::cell::Cell::{self, Int, Null, Text};
use crate::testing::lakes::*;
use crate::testing::*;

// ---- lake creation, snapshots, what a commit may hold -------------------------------------------

#[test]
fn lake_creation_commits_tables_snapshot_and_head() {
    let store = new_lake(&mem_url("create"));
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(0),
            batch_count: 1
        }
    );
    let mut t = store.begin();
    let names: Vec<String> = t
        .tables(M)
        .unwrap()
        .iter()
        .map(|d| d.name.clone())
        .collect();
    let mut expected: Vec<String> = LAKE_TABLES.iter().map(|s| s.to_string()).collect();
    expected.sort();
    assert_eq!(names, expected);
    assert_eq!(
        t.rows(M, "ducklake_snapshot", true).unwrap().rows,
        vec![snap(0)]
    );
    assert_eq!(
        t.rows(M, "ducklake_snapshot_changes", true).unwrap().rows,
        vec![changes(0, "created_schema:\"main\"")]
    );
    // a second table creation in another transaction is refused; unknown tables too
    assert!(t
        .create_table(def("ducklake_table"))
        .unwrap_err()
        .to_string()
        .contains("already exists"));
    let e = t.rows(M, "nope", false).unwrap_err().to_string();
    assert!(e.contains("main.nope"), "{e}");
}

#[test]
fn snapshot_and_changes_rows_are_one_merged_record() {
    let store = new_lake(&mem_url("merged"));
    commit_table(&store, 1, 1, "t1");
    let recs = raw(&store, &keys::snapshot_prefix(M));
    assert_eq!(recs.len(), 2, "one record per snapshot id, not per table");
    let rec1 = SnapshotRecord::decode(&recs[1].1).unwrap();
    assert_eq!(rec1.snapshot, Some(snap(1)));
    assert_eq!(rec1.changes, Some(changes(1, "created_table")));
    assert_eq!(recs[1].0, keys::snapshot(M, 1));

    // expiring snapshot 0: both halves deleted -> the key is gone; head unchanged
    let mut t = store.begin();
    let s = t.rows(M, "ducklake_snapshot", true).unwrap();
    let c = t.rows(M, "ducklake_snapshot_changes", true).unwrap();
    let s0 = s.rows.iter().position(|r| r[0] == Int(0)).unwrap();
    let c0 = c.rows.iter().position(|r| r[0] == Int(0)).unwrap();
    t.stage_delete(M, "ducklake_snapshot", vec![rowid(s.id, s0)])
        .unwrap();
    // read-your-writes: the staged delete is visible to the next scan of the same transaction
    assert_eq!(
        t.rows(M, "ducklake_snapshot", true).unwrap().rows,
        vec![snap(1)]
    );
    t.stage_delete(M, "ducklake_snapshot_changes", vec![rowid(c.id, c0)])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(raw(&store, &keys::snapshot_prefix(M)).len(), 1);
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(1),
            batch_count: 3
        }
    );

    // the changes row cannot go while its snapshot stays: refused, nothing written
    let before = everything(&store);
    let mut t = store.begin();
    let c = t.rows(M, "ducklake_snapshot_changes", true).unwrap();
    t.stage_delete(M, "ducklake_snapshot_changes", vec![rowid(c.id, 0)])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert!(matches!(e, Error::Constraint(_)), "{e}");
    assert!(
        e.to_string()
            .contains("snapshot 1 while the snapshot stays"),
        "{e}"
    );
    assert_eq!(everything(&store), before);
}

/// DuckLake's expiry deletes `ducklake_snapshot` rows, then `ducklake_snapshot_changes` rows of
/// the same ids. The changes row rides its snapshot: deleting the snapshot removes the whole
/// record, the transaction stops serving the changes row, and the paired delete is a validated
/// no-op, in either order.
#[test]
fn the_paired_snapshot_changes_delete_is_a_validated_no_op() {
    let store = new_lake(&mem_url("changes-noop"));
    commit_table(&store, 1, 1, "t1");
    commit_table(&store, 2, 2, "t2");
    let before = everything(&store);
    let mut t = store.begin();
    let s = t.rows(M, "ducklake_snapshot", true).unwrap();
    let c = t.rows(M, "ducklake_snapshot_changes", true).unwrap();
    let at = |m: &Materialized, id: i64| {
        rowid(m.id, m.rows.iter().position(|r| r[0] == Int(id)).unwrap())
    };
    // snapshot 0: snapshot first, then its changes row through the earlier scan
    t.stage_delete(M, "ducklake_snapshot", vec![at(&s, 0)])
        .unwrap();
    let ids = first_cells(&mut t, "ducklake_snapshot_changes");
    assert_eq!(
        ids,
        vec![Int(1), Int(2)],
        "the deleted snapshot's changes row is no longer read"
    );
    t.stage_delete(M, "ducklake_snapshot_changes", vec![at(&c, 0)])
        .unwrap();
    // snapshot 1: changes row first
    t.stage_delete(M, "ducklake_snapshot_changes", vec![at(&c, 1)])
        .unwrap();
    t.stage_delete(M, "ducklake_snapshot", vec![at(&s, 1)])
        .unwrap();
    t.commit().unwrap();
    let after = everything(&store);
    let removed: Vec<&Vec<u8>> = before
        .iter()
        .map(|(k, _)| k)
        .filter(|k| !after.iter().any(|(a, _)| a == *k))
        .collect();
    assert_eq!(removed, vec![&keys::snapshot(M, 0), &keys::snapshot(M, 1)]);
    let changed: Vec<&Vec<u8>> = after
        .iter()
        .filter(|(k, v)| before.iter().any(|(b, bv)| b == k && bv != v))
        .map(|(k, _)| k)
        .collect();
    assert_eq!(changed, vec![&keys::sys_head()], "nothing else is written");
}

#[test]
fn a_large_commit_releases_its_row_locks_at_once() {
    // (it frees the rest of what it held on another thread, which nothing here can observe;
    // the locks must not go with it)
    let store = new_lake(&mem_url("free-aside"));
    let n = super::FREE_ASIDE_OPS as i64 + 10;
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", (1..=n).map(snap).collect())
        .unwrap();
    t.stage_insert(
        M,
        "ducklake_snapshot_changes",
        (1..=n)
            .map(|id| changes(id, "inserted_into_table:1"))
            .collect(),
    )
    .unwrap();
    t.commit().unwrap();
    // expire every snapshot but the head, one staged delete per row
    let mut t = store.begin();
    let s = t.rows(M, "ducklake_snapshot", true).unwrap();
    assert_eq!(s.rows.len() as i64, n + 1);
    let doomed: Vec<i64> = (0..s.rows.len() - 1).map(|i| rowid(s.id, i)).collect();
    t.stage_delete(M, "ducklake_snapshot", doomed).unwrap();
    assert!(t.staged().len() >= super::FREE_ASIDE_OPS);
    assert_eq!(
        store.row_locks.held() as i64,
        n,
        "the deleted rows are locked"
    );
    t.commit().unwrap();
    assert_eq!(
        store.row_locks.held(),
        0,
        "the commit released every row lock"
    );
    let mut t = store.begin();
    assert_eq!(first_cells(&mut t, "ducklake_snapshot"), vec![Int(n)]);
    assert_eq!(
        first_cells(&mut t, "ducklake_snapshot_changes"),
        vec![Int(n)]
    );
}

#[test]
fn deleting_the_head_snapshot_is_a_constraint_error() {
    let store = new_lake(&mem_url("headdel"));
    let before = everything(&store);
    let mut t = store.begin();
    let s = t.rows(M, "ducklake_snapshot", true).unwrap();
    t.stage_delete(M, "ducklake_snapshot", vec![rowid(s.id, 0)])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert!(matches!(e, Error::Constraint(_)), "{e}");
    assert!(e.to_string().contains("head snapshot"), "{e}");
    assert_eq!(everything(&store), before);
}

#[test]
fn maintenance_commit_keeps_the_head_snapshot_and_advances_the_batch_count() {
    let store = new_lake(&mem_url("maint"));
    commit_table(&store, 1, 1, "t1");
    let mut t = store.begin();
    t.stage_insert(
        M,
        "ducklake_files_scheduled_for_deletion",
        vec![gc_row(10), gc_row(11)],
    )
    .unwrap();
    let s = t.rows(M, "ducklake_snapshot", true).unwrap();
    t.stage_delete(M, "ducklake_snapshot", vec![rowid(s.id, 0)])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(1),
            batch_count: 3
        }
    );
    let gc = raw(
        &store,
        &keys::current_prefix(M, "ducklake_files_scheduled_for_deletion"),
    );
    assert_eq!(gc.len(), 2);
    assert_eq!(
        gc[0].0,
        keys::current(M, "ducklake_files_scheduled_for_deletion", &[Int(10)], None)
    );

    // cleanup forgets: a schedule-row delete removes the key
    let mut t = store.begin();
    let m = t
        .rows(M, "ducklake_files_scheduled_for_deletion", false)
        .unwrap();
    t.stage_delete(
        M,
        "ducklake_files_scheduled_for_deletion",
        vec![rowid(m.id, 0)],
    )
    .unwrap();
    t.commit().unwrap();
    assert_eq!(
        column_of(
            &store,
            "ducklake_files_scheduled_for_deletion",
            false,
            "data_file_id"
        ),
        vec![Int(11)]
    );
}

#[test]
fn a_commit_minting_snapshots_cannot_carry_a_version_beyond_them() {
    let store = new_lake(&mem_url("nosnap"));
    let before = everything(&store);
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    t.stage_insert(M, "ducklake_table", vec![table_row(1, 2, None, "t1")])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert!(matches!(e, Error::Constraint(_)), "{e}");
    assert!(
        e.to_string().contains("ducklake_table") && e.to_string().contains("snapshot 2"),
        "{e}"
    );
    assert_eq!(everything(&store), before);
    // ... and at the snapshot it mints the same row commits
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    t.stage_insert(M, "ducklake_table", vec![table_row(1, 1, None, "t1")])
        .unwrap();
    t.commit().unwrap();
}

fn file_stats_row(data_file_id: i64, column_id: i64) -> Row {
    row(
        "ducklake_file_column_stats",
        &[
            ("data_file_id", Int(data_file_id)),
            ("table_id", Int(1)),
            ("column_id", Int(column_id)),
        ],
    )
}

#[test]
fn only_row_id_file_statistics_may_be_inserted_without_a_snapshot() {
    let store = new_lake(&mem_url("rowidstats"));
    commit_table(&store, 1, 1, "t1");
    let mut t = store.begin();
    t.create_table(def("ducklake_file_column_stats")).unwrap();
    t.commit().unwrap();
    let before = everything(&store);
    // an ordinary file-statistics row needs a snapshot-minting commit
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_file_column_stats", vec![file_stats_row(5, 1)])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert!(matches!(e, Error::Constraint(_)), "{e}");
    assert!(e.to_string().contains("ducklake_file_column_stats"), "{e}");
    assert_eq!(everything(&store), before);
    // the derived row-id statistics row (field id 2147483540) is maintenance: no snapshot minted
    let mut t = store.begin();
    t.stage_insert(
        M,
        "ducklake_file_column_stats",
        vec![file_stats_row(5, 2147483540)],
    )
    .unwrap();
    t.commit().unwrap();
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(1),
            batch_count: 4
        }
    );
    assert_eq!(
        rows_of(&store, "ducklake_file_column_stats", false).len(),
        1
    );
}

// ---- materialization, rowids, caching ---------------------------------------------------------

#[test]
fn one_materialization_per_table_until_a_write() {
    let store = new_lake(&mem_url("cache"));
    commit_table(&store, 1, 1, "t1");
    let mut t = store.begin();
    let a = t.rows(M, "ducklake_table", false).unwrap();
    let b = t.rows(M, "ducklake_table", false).unwrap();
    assert!(Arc::ptr_eq(&a, &b), "same Arc until a write");
    let h = t.rows(M, "ducklake_table", true).unwrap();
    assert!(
        !Arc::ptr_eq(&a, &h),
        "the history variant is its own materialization"
    );
    assert_ne!(a.id, h.id);

    // a write to another table keeps this one's materialization
    t.stage_insert(M, "ducklake_table_stats", vec![stats_row(1, 5)])
        .unwrap();
    assert!(Arc::ptr_eq(
        &a,
        &t.rows(M, "ducklake_table", false).unwrap()
    ));

    // a write to this table: the next call re-materializes with a new id...
    let r = rowid(a.id, 0);
    t.stage_insert(M, "ducklake_snapshot", vec![snap(2)])
        .unwrap();
    t.stage_update(
        M,
        "ducklake_table",
        vec![(r, table_row(1, 1, Some(2), "t1"))],
    )
    .unwrap();
    let c = t.rows(M, "ducklake_table", false).unwrap();
    assert!(!Arc::ptr_eq(&a, &c));
    assert!(c.id > h.id);
    assert!(c.rows.is_empty(), "the head view drops the ended version");
    let c_hist = t.rows(M, "ducklake_table", true).unwrap();
    assert_eq!(c_hist.rows, vec![table_row(1, 1, Some(2), "t1")]);
    // ...and rowids of the earlier materialization still resolve to what that scan emitted
    let (m, i) = t.resolve(r).unwrap();
    assert!(Arc::ptr_eq(&m, &a));
    assert_eq!(m.rows[i], table_row(1, 1, None, "t1"));
}

#[test]
fn empty_tables_share_one_row_set_and_its_kept_selections() {
    // every table with no live row reads the image's one empty set, so a selection a scan made
    // of it is kept for the next scan (of any such table, in any transaction on the image)
    let store = new_lake(&mem_url("empty-sets"));
    let narrowing = [crate::rowset::Narrowing::In {
        column: 0,
        values: vec![1],
    }];
    let a = store
        .begin()
        .rows(M, "ducklake_table_stats", false)
        .unwrap();
    let b = store
        .begin()
        .rows(M, "ducklake_files_scheduled_for_deletion", false)
        .unwrap();
    assert!(a.rows.is_empty() && b.rows.is_empty());
    assert!(Arc::ptr_eq(&a.rows.0, &b.rows.0));
    let first = a.rows.0.select(&narrowing).expect("a selection");
    let again = b.rows.0.select(&narrowing).expect("a selection");
    assert!(
        Arc::ptr_eq(&first, &again),
        "the second scan finds the first one's"
    );
    assert_eq!(b.rows.0.selections_kept(), 1);
    // a table with rows has its own set; the image a commit advances to serves the same empty
    // set, with what was kept of it
    commit_table(&store, 1, 1, "t1");
    let c = store.begin().rows(M, "ducklake_table", false).unwrap();
    let d = store
        .begin()
        .rows(M, "ducklake_table_stats", false)
        .unwrap();
    assert!(!Arc::ptr_eq(&c.rows.0, &d.rows.0));
    assert!(d.rows.is_empty());
    assert!(Arc::ptr_eq(&d.rows.0, &a.rows.0));
    assert_eq!(d.rows.0.selections_kept(), 1);
}

#[test]
fn the_stamp_moves_on_whenever_rows_already_served_may_change() {
    // the C++ scan keeps the rows it read under a stamp: equal stamps must read equal rows
    let store = new_lake(&mem_url("stamp"));
    commit_table(&store, 1, 1, "t1");
    let mut t = store.begin();
    let u = store.begin();
    assert_ne!(t.stamp().txn, u.stamp().txn, "each transaction has its own");
    let before = t.stamp();
    let a = t.rows(M, "ducklake_table", false).unwrap();
    t.tables(M).unwrap();
    t.rows(M, "ducklake_snapshot", true).unwrap();
    assert_eq!(t.stamp(), before, "reads keep it");
    assert!(Arc::ptr_eq(
        &a,
        &t.rows(M, "ducklake_table", false).unwrap()
    ));

    let mut last = before;
    let mut moved = |t: &Transaction, what: &str| {
        let now = t.stamp();
        assert_eq!(now.txn, last.txn, "{what}: still the same transaction");
        assert!(now.generation > last.generation, "{what} keeps the stamp");
        last = now;
    };
    t.stage_insert(M, "ducklake_snapshot", vec![snap(2)])
        .unwrap();
    moved(&t, "an insert");
    let r = rowid(a.id, 0);
    t.stage_update(
        M,
        "ducklake_table",
        vec![(r, table_row(1, 1, Some(2), "t1"))],
    )
    .unwrap();
    moved(&t, "an update");
    let s = t.rows(M, "ducklake_snapshot", true).unwrap();
    t.stage_delete(M, "ducklake_snapshot", vec![rowid(s.id, 0)])
        .unwrap();
    moved(&t, "a delete");
    t.create_table(inline_def()).unwrap();
    moved(&t, "a CREATE TABLE");
    t.drop_table(M, &inline_def().name).unwrap();
    moved(&t, "a DROP TABLE");
    t.create_schema("s2", false).unwrap();
    moved(&t, "a CREATE SCHEMA");
    t.drop_schema("s2", false).unwrap();
    moved(&t, "a DROP SCHEMA");
}

#[test]
fn definitions_are_shared_until_a_commit_writes_one_and_never_after_staged_ddl() {
    let store = new_lake(&mem_url("definitions"));
    let ids = |store: &Arc<Store>| store.begin().definitions().unwrap().unwrap();
    let first = ids(&store);
    assert_eq!(
        ids(&store),
        first,
        "transactions on one catalog share its id"
    );
    // a commit that writes rows but no definition keeps the catalog, and its id
    commit_table(&store, 1, 1, "t1");
    assert_eq!(ids(&store), first);
    // a transaction that began before a commit creating a table keeps the old id
    let mut before = store.begin();
    assert_eq!(before.definitions().unwrap(), Some(first));
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    assert_eq!(
        t.definitions().unwrap(),
        None,
        "staged DDL: its own definitions"
    );
    t.commit().unwrap();
    let second = ids(&store);
    assert_ne!(second, first, "a committed definition: another id");
    assert_eq!(before.definitions().unwrap(), Some(first));
    // the other kinds of DDL are their own too, and a rollback leaves the id as it was
    let mut t = store.begin();
    t.drop_table(M, &inline_def().name).unwrap();
    assert_eq!(t.definitions().unwrap(), None);
    let mut t = store.begin();
    t.create_schema("s2", false).unwrap();
    assert_eq!(t.definitions().unwrap(), None);
    drop(t);
    assert_eq!(ids(&store), second);
    // a store opened afresh decodes its catalog again: a new id, never an old one reused
    let reopened = Store::open(store.url(), true).unwrap();
    let third = ids(&reopened);
    assert!(third != first && third != second);
}

#[test]
fn rowids_resolve_only_within_their_transaction_and_table() {
    let store = new_lake(&mem_url("rowid"));
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_snapshot", true).unwrap();
    let r = rowid(m.id, 0);
    assert_eq!(split_rowid(r), (m.id, 0));
    assert!(r >= 0);
    assert!(t.resolve(r).is_ok());
    assert!(matches!(
        t.resolve(rowid(m.id, 5)),
        Err(Error::RowId { .. })
    ));
    assert!(matches!(t.resolve(rowid(999, 0)), Err(Error::RowId { .. })));
    assert!(matches!(t.resolve(-1), Err(Error::RowId { .. })));
    // a rowid of one table cannot delete from another
    let e = t
        .stage_delete(M, "ducklake_snapshot_changes", vec![r])
        .unwrap_err()
        .to_string();
    assert!(e.contains("ducklake_snapshot"), "{e}");
    // another transaction has its own registry
    let t2 = store.begin();
    assert!(t2.resolve(r).is_err());
    // wrong row width is refused at staging
    let e = t
        .stage_insert(M, "ducklake_table", vec![vec![Int(1)]])
        .unwrap_err()
        .to_string();
    assert!(e.contains("ducklake_table") && e.contains("1 cells"), "{e}");
}

// ---- translation -------------------------------------------------------------------------------

#[test]
fn translation_is_one_batch_and_moves_ended_versions_to_history() {
    let store = new_lake(&mem_url("translate"));
    commit_table(&store, 1, 1, "t1");
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_table", false).unwrap();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(2)])
        .unwrap();
    t.stage_insert(
        M,
        "ducklake_snapshot_changes",
        vec![changes(2, "altered_table")],
    )
    .unwrap();
    t.stage_update(
        M,
        "ducklake_table",
        vec![(rowid(m.id, 0), table_row(1, 1, Some(2), "t1"))],
    )
    .unwrap();
    t.stage_insert(
        M,
        "ducklake_table",
        vec![table_row(1, 2, None, "t1_renamed")],
    )
    .unwrap();
    t.stage_insert(M, "ducklake_table_stats", vec![stats_row(1, 3)])
        .unwrap();

    // translate exactly what commit will write
    let image = t.pinned().unwrap();
    t.committed_catalog().unwrap();
    let tables = &t.catalog.as_ref().unwrap().tables;
    let out = block_on(translate::translate(&store, &image, tables, &t.ops)).unwrap();
    let cur_old = keys::current(M, "ducklake_table", &[Int(1)], Some(&Int(1)));
    let cur_new = keys::current(M, "ducklake_table", &[Int(1)], Some(&Int(2)));
    let hist = keys::history(M, "ducklake_table", &[Int(1)], &Int(2), &Int(1));
    assert_eq!(out.writes.get(&cur_old), Some(&None), "current key deleted");
    let (moved, seq) = crate::cell::decode_row_at(out.writes[&hist].as_ref().unwrap()).unwrap();
    assert_eq!(moved, table_row(1, 1, Some(2), "t1"));
    // the ended version keeps its place: where snapshot 1's commit first wrote it
    let (_, first_written) = crate::cell::decode_row_at(&raw(&store, &cur_old)[0].1).unwrap();
    assert_eq!(seq, first_written);
    assert!(seq.is_some());
    assert!(matches!(out.writes.get(&cur_new), Some(Some(_))));
    assert!(matches!(
        out.writes.get(&keys::snapshot(M, 2)),
        Some(Some(_))
    ));
    let stats_prefix = keys::current_prefix(M, "ducklake_table_stats");
    assert_eq!(
        out.writes
            .iter()
            .filter(|(k, v)| k.starts_with(&stats_prefix) && v.is_some())
            .count(),
        1
    );
    assert_eq!(
        out.head,
        Head {
            snapshot_id: Some(2),
            batch_count: 3
        }
    );
    assert_eq!(
        out.writes.len(),
        6,
        "{:?}",
        out.writes
            .keys()
            .map(|k| keys::decode_key(k).unwrap())
            .collect::<Vec<_>>()
    );

    t.commit().unwrap();
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(2),
            batch_count: 3
        }
    );
    let current: Vec<_> = raw(&store, &keys::current_prefix(M, "ducklake_table"))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(current, vec![cur_new]);
    let history: Vec<_> = raw(&store, &keys::history_prefix(M, "ducklake_table"))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(history, vec![hist]);
    assert_eq!(
        rows_of(&store, "ducklake_table", false),
        vec![table_row(1, 2, None, "t1_renamed")]
    );
    assert_eq!(rows_of(&store, "ducklake_table", true).len(), 2);
}

#[test]
fn unversioned_rows_overwrite_by_key() {
    let store = new_lake(&mem_url("stats"));
    let mut t = store.begin();
    t.stage_insert(
        M,
        "ducklake_table_stats",
        vec![stats_row(1, 1), stats_row(2, 2)],
    )
    .unwrap();
    t.commit().unwrap();
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_table_stats", false).unwrap();
    t.stage_update(
        M,
        "ducklake_table_stats",
        vec![(rowid(m.id, 0), stats_row(1, 100))],
    )
    .unwrap();
    t.stage_update(
        M,
        "ducklake_table_stats",
        vec![(rowid(m.id, 1), stats_row(2, 200))],
    )
    .unwrap();
    assert_eq!(
        t.rows(M, "ducklake_table_stats", false).unwrap().rows,
        vec![stats_row(1, 100), stats_row(2, 200)]
    );
    t.commit().unwrap();
    assert_eq!(
        raw(&store, &keys::current_prefix(M, "ducklake_table_stats")).len(),
        2
    );
    assert_eq!(
        rows_of(&store, "ducklake_table_stats", false),
        vec![stats_row(1, 100), stats_row(2, 200)]
    );
}

#[test]
fn rollback_writes_nothing() {
    let store = new_lake(&mem_url("rollback"));
    let before = everything(&store);
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    t.stage_insert(M, "ducklake_table", vec![table_row(1, 1, None, "t1")])
        .unwrap();
    t.create_schema("s2", false).unwrap();
    assert!(t.has_writes());
    assert_eq!(t.rows(M, "ducklake_table", false).unwrap().rows.len(), 1);
    t.rollback();
    assert_eq!(everything(&store), before);
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(0),
            batch_count: 1
        }
    );
    assert!(rows_of(&store, "ducklake_table", false).is_empty());
    // dropping a transaction without commit is a rollback too
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    drop(t);
    assert_eq!(everything(&store), before);
}

#[test]
fn a_failed_commit_writes_nothing() {
    let store = new_lake(&mem_url("failed"));
    let before = everything(&store);
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    t.stage_insert(M, "ducklake_table", vec![table_row(1, 1, None, "good")])
        .unwrap();
    t.stage_insert(M, "ducklake_table_stats", vec![stats_row(1, 1)])
        .unwrap();
    // a NULL in ducklake_metadata.key (NOT NULL in DuckLake's schema)
    let bad = row("ducklake_metadata", &[("value", Text("v".into()))]);
    t.stage_insert(M, "ducklake_metadata", vec![bad]).unwrap();
    let e = t.commit().unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("ducklake_metadata.key") && msg.contains("NOT NULL"),
        "{msg}"
    );
    assert_eq!(everything(&store), before, "the store is unchanged");
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(0),
            batch_count: 1
        }
    );
}

#[test]
fn duplicate_keys_are_unique_constraint_errors() {
    let store = new_lake(&mem_url("dup"));
    commit_table(&store, 1, 1, "t1");
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    let e = t.commit().unwrap_err().to_string();
    assert!(
        e.contains("primary key") && e.contains("unique") && e.contains("ducklake_snapshot"),
        "{e}"
    );
    // DuckLake declares no key on its unversioned tables: rows sharing the usual key columns
    // but differing elsewhere are two rows ...
    let mut t = store.begin();
    t.stage_insert(
        M,
        "ducklake_table_stats",
        vec![stats_row(7, 1), stats_row(7, 2)],
    )
    .unwrap();
    t.commit().unwrap();
    assert_eq!(rows_of(&store, "ducklake_table_stats", false).len(), 2);
    // ... and only an exact duplicate of a stored row is refused
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_table_stats", vec![stats_row(7, 2)])
        .unwrap();
    let e = t.commit().unwrap_err().to_string();
    assert!(
        e.contains("duplicate key (7") && e.contains("ducklake_table_stats"),
        "{e}"
    );
    assert_eq!(rows_of(&store, "ducklake_table_stats", false).len(), 2);
}

#[test]
fn changing_a_row_that_is_gone_is_a_conflict() {
    let store = new_lake(&mem_url("gone"));
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_table_stats", vec![stats_row(1, 1)])
        .unwrap();
    t.commit().unwrap();
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_table_stats", false).unwrap();
    let r = rowid(m.id, 0);
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    t.stage_delete(M, "ducklake_table_stats", vec![r]).unwrap();
    // an update of the same old row staged after it: the row is already gone when translation
    // reaches it (what a lost race looks like to translation)
    t.ops.push(Op::Update {
        schema: M.into(),
        table: "ducklake_table_stats".into(),
        old: stats_row(1, 1),
        new: stats_row(1, 9),
    });
    let e = t.commit().unwrap_err();
    assert!(e.is_conflict() && e.to_string().contains("conflict"), "{e}");
}

/// Two transactions on one read point that insert no snapshot: on disjoint rows the second goes
/// over the first (as on Postgres, where they touch different rows); on one row it conflicts,
/// writing nothing, and DuckLake's retry from a fresh read point lands.
#[test]
fn two_transactions_from_one_read_point_conflict_only_on_the_same_rows() {
    let store = new_lake(&mem_url("conflict"));
    let meta = |k: &str| {
        row(
            "ducklake_metadata",
            &[("key", Text(k.into())), ("value", Text("v".into()))],
        )
    };
    let start = store.head().unwrap().batch_count;
    let metadata = rows_of(&store, "ducklake_metadata", false).len();
    let mut t1 = store.begin();
    let mut t2 = store.begin();
    // both pin the same committed state
    assert_eq!(t1.head().unwrap(), t2.head().unwrap());
    t1.rows(M, "ducklake_table_stats", false).unwrap();
    t2.rows(M, "ducklake_metadata", false).unwrap();
    // disjoint rows: only sys/head is common to both write sets
    t1.stage_insert(M, "ducklake_table_stats", vec![stats_row(1, 1)])
        .unwrap();
    t2.stage_insert(M, "ducklake_metadata", vec![meta("k")])
        .unwrap();
    t1.commit().unwrap();
    t2.commit().unwrap();
    assert_eq!(store.head().unwrap().batch_count, start + 2);
    assert_eq!(rows_of(&store, "ducklake_table_stats", false).len(), 1);
    assert_eq!(
        rows_of(&store, "ducklake_metadata", false).len(),
        metadata + 1
    );

    // the same row
    let mut t3 = store.begin();
    let mut t4 = store.begin();
    assert_eq!(t3.head().unwrap(), t4.head().unwrap());
    t3.stage_insert(M, "ducklake_metadata", vec![meta("k2")])
        .unwrap();
    t4.stage_insert(M, "ducklake_metadata", vec![meta("k2")])
        .unwrap();
    t3.commit().unwrap();
    let after_t3 = everything(&store);
    let e = t4.commit().unwrap_err();
    assert!(e.to_string().contains("conflict"), "{e}");
    assert!(e.is_conflict());
    assert_eq!(everything(&store), after_t3, "the loser wrote nothing");

    // the retry from a fresh read point succeeds (DuckLake's retry loop)
    let mut t5 = store.begin();
    t5.stage_insert(M, "ducklake_metadata", vec![meta("k3")])
        .unwrap();
    t5.commit().unwrap();
    assert_eq!(store.head().unwrap().batch_count, start + 4);
}

#[test]
fn loading_at_head_does_not_read_history() {
    let store = new_lake(&mem_url("nohist"));
    commit_table(&store, 1, 1, "t1");
    commit_table(&store, 2, 2, "t2");
    // t1's version ends: ducklake_table's history holds a record (an image that knows which
    // history ranges hold none reads nothing of those)
    end_table(&store, 0, (1, 1, "t1"), 2);
    // a record under history/ that fails to decode: reading it is an error
    let planted = keys::history(M, "ducklake_table", &[Int(99)], &Int(5), &Int(1));
    store.put_raw(&planted, b"not a row").unwrap();
    let mut t = store.begin();
    let head = t.rows(M, "ducklake_table", false).unwrap();
    assert_eq!(head.rows, vec![table_row(2, 2, None, "t2")]);
    let e = t.rows(M, "ducklake_table", true).unwrap_err();
    assert!(matches!(e, Error::Corrupt(_)), "{e}");
}

// ---- inlined tables ------------------------------------------------------------------------------

fn chunk_keys(store: &Arc<Store>) -> (Vec<Vec<Cell>>, Vec<Vec<Cell>>) {
    let cp = keys::inline_chunk_prefix(M, INL);
    let lp = keys::inline_locator_prefix(M, INL);
    let chunks = raw(store, &cp)
        .into_iter()
        .map(|(k, _)| keys::decode_key(&k[cp.len()..]).unwrap())
        .collect();
    let locs = raw(store, &lp)
        .into_iter()
        .map(|(k, _)| keys::decode_key(&k[lp.len()..]).unwrap())
        .collect();
    (chunks, locs)
}

#[test]
fn inline_chunks_insert_update_delete_drop() {
    let store = new_lake(&mem_url("inline"));
    // create + first insert in one commit
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    t.stage_insert(
        M,
        INL,
        vec![
            inl(0, 1, None, "a"),
            inl(1, 1, None, "b"),
            inl(2, 1, None, "c"),
        ],
    )
    .unwrap();
    assert_eq!(t.rows(M, INL, true).unwrap().rows.len(), 3);
    t.commit().unwrap();
    assert_eq!(
        chunk_keys(&store),
        (vec![vec![Int(1)]], vec![vec![Int(0), Int(1)]])
    );

    // second insert: a second chunk, located by its lowest row id
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(2)])
        .unwrap();
    t.stage_insert(M, INL, vec![inl(3, 2, None, "d"), inl(4, 2, None, "e")])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(
        chunk_keys(&store),
        (
            vec![vec![Int(1)], vec![Int(2)]],
            vec![vec![Int(0), Int(1)], vec![Int(3), Int(2)]]
        )
    );
    assert_eq!(rows_of(&store, INL, false).len(), 5);

    // update (end a row of chunk 1) and delete both rows of chunk 2
    let mut t = store.begin();
    let m = t.rows(M, INL, false).unwrap();
    assert!(
        Arc::ptr_eq(&m, &t.rows(M, INL, true).unwrap()),
        "inlined tables have one variant"
    );
    let idx = |rid: i64| m.rows.iter().position(|r| r[0] == Int(rid)).unwrap();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(3)])
        .unwrap();
    t.stage_update(M, INL, vec![(rowid(m.id, idx(1)), inl(1, 1, Some(3), "b"))])
        .unwrap();
    t.stage_delete(M, INL, vec![rowid(m.id, idx(3)), rowid(m.id, idx(4))])
        .unwrap();
    let seen = t.rows(M, INL, false).unwrap();
    assert_eq!(
        seen.rows,
        vec![
            inl(0, 1, None, "a"),
            inl(1, 1, Some(3), "b"),
            inl(2, 1, None, "c")
        ]
    );
    t.commit().unwrap();
    assert_eq!(
        chunk_keys(&store),
        (vec![vec![Int(1)]], vec![vec![Int(0), Int(1)]])
    );
    assert_eq!(
        rows_of(&store, INL, false),
        vec![
            inl(0, 1, None, "a"),
            inl(1, 1, Some(3), "b"),
            inl(2, 1, None, "c")
        ]
    );

    // deleting the lowest row moves the chunk's locator
    let mut t = store.begin();
    let m = t.rows(M, INL, false).unwrap();
    t.stage_delete(M, INL, vec![rowid(m.id, 0)]).unwrap();
    t.commit().unwrap();
    assert_eq!(
        chunk_keys(&store),
        (vec![vec![Int(1)]], vec![vec![Int(1), Int(1)]])
    );

    // a stale row (already deleted) is a conflict
    let mut t = store.begin();
    t.stage_delete(M, INL, vec![]).unwrap();
    t.ops.push(Op::Delete {
        schema: M.into(),
        table: INL.into(),
        old: inl(0, 1, None, "a"),
    });
    let e = t.commit().unwrap_err();
    assert!(e.is_conflict(), "{e}");

    // DROP TABLE removes every key of the table and its definition
    let mut t = store.begin();
    t.drop_table(M, INL).unwrap();
    assert!(t.rows(M, INL, false).is_err());
    t.commit().unwrap();
    assert!(raw(&store, &keys::inline_table_prefix(M, INL)).is_empty());
    assert!(raw(&store, &keys::sys_table(M, INL)).is_empty());
    assert!(!store
        .begin()
        .tables(M)
        .unwrap()
        .iter()
        .any(|d| d.name == INL));
}

#[test]
fn inline_table_dropped_and_recreated_in_one_transaction_starts_empty() {
    let store = new_lake(&mem_url("recreate"));
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    t.stage_insert(M, INL, vec![inl(0, 0, None, "old")])
        .unwrap();
    t.commit().unwrap();
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    t.drop_table(M, INL).unwrap();
    t.create_table(inline_def()).unwrap();
    assert!(t.rows(M, INL, false).unwrap().rows.is_empty());
    t.stage_insert(M, INL, vec![inl(5, 0, None, "new")])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(rows_of(&store, INL, false), vec![inl(5, 0, None, "new")]);
    assert_eq!(
        chunk_keys(&store),
        (vec![vec![Int(1)]], vec![vec![Int(5), Int(1)]])
    );
}

#[test]
fn only_ducklake_tables_and_empty_schemas() {
    let store = Store::open(&mem_url("ddl"), false).unwrap();
    let mut t = store.begin();
    t.create_schema("meta", false).unwrap();
    t.create_schema("meta", true).unwrap();
    assert!(t.create_schema("meta", false).is_err());
    t.create_table(fixed_table_def("meta", "ducklake_snapshot").unwrap())
        .unwrap();
    // a second lake in another schema of the same store holds its own copy
    t.create_table(fixed_table_def(M, "ducklake_snapshot").unwrap())
        .unwrap();
    let e = t
        .create_table(TableDef {
            schema: M.into(),
            name: "users".into(),
            columns: vec![],
        })
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot create users"), "{e}");
    // a table that exists: IF NOT EXISTS keeps it, CREATE names the lake the store holds, and
    // CREATE OR REPLACE is refused; none of them stages anything
    let snap = || fixed_table_def("meta", "ducklake_snapshot").unwrap();
    assert!(!t
        .create_table_on_conflict(snap(), OnConflict::Ignore)
        .unwrap());
    let e = t.create_table(snap()).unwrap_err().to_string();
    assert!(e.contains("already holds a DuckLake catalog"), "{e}");
    let e = t
        .create_table_on_conflict(snap(), OnConflict::Replace)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("CREATE OR REPLACE TABLE meta.ducklake_snapshot"),
        "{e}"
    );
    assert!(t
        .drop_schema("meta", false)
        .unwrap_err()
        .to_string()
        .contains("holds tables"));
    assert!(t.drop_schema(M, false).is_err());
    t.commit().unwrap();
    let mut t = store.begin();
    assert_eq!(
        t.schemas().unwrap(),
        vec!["main".to_string(), "meta".to_string()]
    );
    assert_eq!(t.tables("meta").unwrap().len(), 1);
    t.drop_table("meta", "ducklake_snapshot").unwrap();
    t.drop_schema("meta", false).unwrap();
    t.commit().unwrap();
    assert_eq!(store.begin().schemas().unwrap(), vec!["main".to_string()]);
}

// ---- bulk deletes, options, rowids named twice, a reader's pinned state -------------------------

#[test]
fn inline_bulk_deletes_across_chunks_and_tables_without_row_id() {
    let store = new_lake(&mem_url("bulk"));
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    t.commit().unwrap();
    // ten commits, ten chunks of ten rows
    for c in 0..10i64 {
        let mut t = store.begin();
        t.stage_insert(
            M,
            INL,
            (0..10).map(|i| inl(c * 10 + i, 0, None, "r")).collect(),
        )
        .unwrap();
        t.commit().unwrap();
    }
    assert_eq!(chunk_keys(&store).0.len(), 10);
    // in one transaction: insert a row, update it, and delete every even row (a flush-like sweep)
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    t.stage_insert(M, INL, vec![inl(100, 0, None, "new")])
        .unwrap();
    let m = t.rows(M, INL, false).unwrap();
    let new_idx = m.rows.len() - 1;
    t.stage_update(
        M,
        INL,
        vec![(rowid(m.id, new_idx), inl(100, 0, None, "newer"))],
    )
    .unwrap();
    let evens: Vec<i64> = m
        .rows
        .iter()
        .enumerate()
        .filter(|(_, r)| r[0].as_int().unwrap() % 2 == 0 && r[0] != Int(100))
        .map(|(i, _)| rowid(m.id, i))
        .collect();
    assert_eq!(evens.len(), 50);
    t.stage_delete(M, INL, evens).unwrap();
    t.commit().unwrap();
    let rows = rows_of(&store, INL, false);
    assert_eq!(rows.len(), 51);
    assert!(rows
        .iter()
        .filter(|r| r[0] != Int(100))
        .all(|r| r[0].as_int().unwrap() % 2 == 1));
    assert_eq!(rows.last().unwrap(), &inl(100, 0, None, "newer"));
    let (chunks, locs) = chunk_keys(&store);
    // RFC 0007: each partially deleted chunk becomes its contiguous surviving runs; here every
    // chunk of ten keeps five single-row runs (50 chunks), plus the new chunk
    assert_eq!(chunks.len(), 51);
    // the first run keeps the chunk's sequence ...
    assert_eq!(locs[0], vec![Int(1), Int(1)]);
    assert_eq!(locs[5], vec![Int(11), Int(2)]);
    // ... later runs take sequences above the ten existing ones, in order
    assert_eq!(locs[1], vec![Int(3), Int(11)]);
    assert_eq!(locs[2], vec![Int(5), Int(12)]);
    // and the new rows' chunk comes after them all
    assert_eq!(locs[50], vec![Int(100), Int(51)]);

    // ducklake_inlined_delete_<t>: no row_id column; locators carry NULL
    let del_def = TableDef {
        schema: M.into(),
        name: "ducklake_inlined_delete_1".into(),
        columns: ["file_id", "row_id", "begin_snapshot"]
            .iter()
            .map(|n| ColumnDef {
                name: n.to_string(),
                type_name: "BIGINT".into(),
                type_blob: vec![],
            })
            .collect(),
    };
    let mut t = store.begin();
    t.create_table(del_def).unwrap();
    t.stage_insert(
        M,
        "ducklake_inlined_delete_1",
        vec![vec![Int(7), Int(3), Int(0)], vec![Int(7), Int(4), Int(0)]],
    )
    .unwrap();
    t.commit().unwrap();
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_inlined_delete_1", false).unwrap();
    t.stage_delete(M, "ducklake_inlined_delete_1", vec![rowid(m.id, 1)])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(
        rows_of(&store, "ducklake_inlined_delete_1", false),
        vec![vec![Int(7), Int(3), Int(0)]]
    );
    let lp = keys::inline_locator_prefix(M, "ducklake_inlined_delete_1");
    let locs: Vec<_> = raw(&store, &lp)
        .into_iter()
        .map(|(k, _)| keys::decode_key(&k[lp.len()..]).unwrap())
        .collect();
    assert_eq!(locs, vec![vec![Null, Int(1)]]);
}

#[test]
fn global_and_scoped_options_coexist_in_ducklake_metadata() {
    let store = new_lake(&mem_url("options"));
    let opt = |k: &str, v: &str, scope: Cell, id: Cell| {
        row(
            "ducklake_metadata",
            &[
                ("key", Text(k.into())),
                ("value", Text(v.into())),
                ("scope", scope),
                ("scope_id", id),
            ],
        )
    };
    let mut t = store.begin();
    t.stage_insert(
        M,
        "ducklake_metadata",
        vec![
            opt("target_file_size", "1MB", Null, Null),
            opt("target_file_size", "2MB", Text("table".into()), Int(1)),
            opt("target_file_size", "3MB", Text("table".into()), Int(2)),
        ],
    )
    .unwrap();
    t.commit().unwrap();
    // an options-only commit: no snapshot, head snapshot unchanged
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(0),
            batch_count: 2
        }
    );
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_metadata", false).unwrap();
    assert_eq!(m.rows.len(), 4);
    let i = m
        .rows
        .iter()
        .position(|r| r == &opt("target_file_size", "1MB", Null, Null))
        .unwrap();
    t.stage_update(
        M,
        "ducklake_metadata",
        vec![(rowid(m.id, i), opt("target_file_size", "5MB", Null, Null))],
    )
    .unwrap();
    t.commit().unwrap();
    let rows = rows_of(&store, "ducklake_metadata", false);
    assert!(rows.contains(&opt("target_file_size", "5MB", Null, Null)));
    assert!(rows.contains(&opt(
        "target_file_size",
        "2MB",
        Text("table".into()),
        Int(1)
    )));
    assert_eq!(rows.len(), 4);
}

#[test]
fn a_rowid_named_twice_is_changed_once() {
    let store = new_lake(&mem_url("twice"));
    commit_table(&store, 1, 1, "t1");
    commit_table(&store, 2, 2, "t2");
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_table", false).unwrap();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(3)])
        .unwrap();
    // an UPDATE ... FROM join that matched row 0 twice, across two sink chunks
    let ended = table_row(1, 1, Some(3), "t1");
    t.stage_update(
        M,
        "ducklake_table",
        vec![
            (rowid(m.id, 0), ended.clone()),
            (rowid(m.id, 0), ended.clone()),
        ],
    )
    .unwrap();
    t.stage_update(M, "ducklake_table", vec![(rowid(m.id, 0), ended.clone())])
        .unwrap();
    t.stage_delete(M, "ducklake_table", vec![rowid(m.id, 1), rowid(m.id, 1)])
        .unwrap();
    assert_eq!(t.staged().len(), 3);
    t.commit().unwrap();
    assert!(rows_of(&store, "ducklake_table", false).is_empty());
    assert_eq!(rows_of(&store, "ducklake_table", true), vec![ended]);
}

#[test]
fn a_read_only_transaction_reads_its_own_state_when_the_lake_moves() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let writer = new_lake(&url);
    let reader = Store::open(&url, true).unwrap();
    let mut t = reader.begin();
    assert!(t.rows(M, "ducklake_table", false).unwrap().rows.is_empty());
    commit_table(&writer, 1, 1, "t1");
    // the reader follows the writer's WAL on its poll interval; once it has moved, the old
    // transaction still reads the image it pinned (RFC 0009), never a mix of two states
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        if reader.head().unwrap().batch_count == 2 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "reader never saw the commit"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let snapshots = t.rows(M, "ducklake_snapshot", true).unwrap();
    assert_eq!(
        col(&snapshots.rows, "ducklake_snapshot", "snapshot_id"),
        vec![Int(0)]
    );
    assert!(t.rows(M, "ducklake_table", true).unwrap().rows.is_empty());
    // a new transaction sees the new state
    assert_eq!(
        rows_of(&reader, "ducklake_table", false),
        vec![table_row(1, 1, None, "t1")]
    );
}

// ---- row order, conflicts, lakes apart, hand edits, chunks, damaged records ---------------------

/// Rows come back in the order they were first written, across commits and whatever their
/// keys or begin snapshots, and an update keeps the row's place: what a DuckDB-file catalog's
/// scan without ORDER BY returns (DuckLake's compaction writes a merged file that begins at an
/// older snapshot after newer files; its suite reads them back unordered).
#[test]
fn rows_are_served_in_the_order_they_were_first_written() {
    let store = new_lake(&mem_url("order"));
    commit_table(&store, 1, 5, "late_key");
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(2)])
        .unwrap();
    // key 9 then key 3, both beginning at the older snapshot 1
    t.stage_insert(
        M,
        "ducklake_table",
        vec![
            table_row(9, 1, None, "nine"),
            table_row(3, 1, None, "three"),
        ],
    )
    .unwrap();
    t.commit().unwrap();
    let names = |store: &Arc<Store>| column_of(store, "ducklake_table", false, "table_name");
    let expect = vec![
        Text("late_key".into()),
        Text("nine".into()),
        Text("three".into()),
    ];
    assert_eq!(names(&store), expect);
    // an in-place update of the first row does not move it to the end
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(3)])
        .unwrap();
    let m = t.rows(M, "ducklake_table", false).unwrap();
    let mut new = m.rows[0].clone();
    new[def("ducklake_table").column_index("path").unwrap()] = Text("elsewhere/".into());
    t.stage_update(M, "ducklake_table", vec![(rowid(m.id, 0), new)])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(names(&store), expect);
}

/// DuckDB's storage fails a delete of a row another open transaction already deleted, and an
/// update of a row another one already updated, at once; moraine does the same for the
/// transactions of one process, and the row is free again once that transaction ends. As in
/// DuckDB, an update of a row another transaction deleted is left to commit to decide.
#[test]
fn a_row_changed_by_another_open_transaction_is_a_conflict_at_once() {
    let store = new_lake(&mem_url("rowlock"));
    commit_table(&store, 1, 1, "t1");
    let mut a = store.begin();
    let mut b = store.begin();
    let ma = a.rows(M, "ducklake_table", false).unwrap();
    let mb = b.rows(M, "ducklake_table", false).unwrap();
    a.stage_delete(M, "ducklake_table", vec![rowid(ma.id, 0)])
        .unwrap();
    let e = b
        .stage_delete(M, "ducklake_table", vec![rowid(mb.id, 0)])
        .unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert!(e.to_string().contains("Conflict on tuple deletion"), "{e}");
    assert!(!b.has_writes(), "a refused statement stages nothing");
    let mut new = mb.rows[0].clone();
    new[def("ducklake_table").column_index("path").unwrap()] = Text("x/".into());
    b.stage_update(M, "ducklake_table", vec![(rowid(mb.id, 0), new.clone())])
        .unwrap();
    let mut c = store.begin();
    let mc = c.rows(M, "ducklake_table", false).unwrap();
    let e = c
        .stage_update(M, "ducklake_table", vec![(rowid(mc.id, 0), new.clone())])
        .unwrap_err();
    assert!(e.to_string().contains("Conflict on tuple update"), "{e}");
    a.rollback();
    // a's rows are free again: c may delete
    c.stage_delete(M, "ducklake_table", vec![rowid(mc.id, 0)])
        .unwrap();
    drop(b);
    let mut d = store.begin();
    let md = d.rows(M, "ducklake_table", false).unwrap();
    d.stage_update(M, "ducklake_table", vec![(rowid(md.id, 0), new)])
        .unwrap();
}

/// One store may hold several lakes, one per schema of the metadata catalog (DuckLake's
/// METADATA_SCHEMA): each has its own rows, snapshots and head snapshot, and its keys carry
/// its schema, so neither sees, pins or expires the other's.
#[test]
fn lakes_in_two_schemas_of_one_store_are_independent() {
    let store = new_lake(&mem_url("twolakes"));
    const S2: &str = "metadata_s2";
    let mut t = store.begin();
    t.create_schema(S2, false).unwrap();
    for name in LAKE_TABLES {
        t.create_table(fixed_table_def(S2, name).unwrap()).unwrap();
    }
    t.commit().unwrap();
    // the second lake starts at its own snapshot 0 while the first one moves on
    commit_table(&store, 1, 1, "in_main");
    let mut t = store.begin();
    t.stage_insert(S2, "ducklake_snapshot", vec![snap(0)])
        .unwrap();
    t.stage_insert(S2, "ducklake_table", vec![table_row(1, 0, None, "in_s2")])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(store.head().unwrap().snapshot_id, Some(1));
    let mut t = store.begin();
    assert_eq!(t.head_snapshot(S2).unwrap(), Some(0));
    assert_eq!(t.head_snapshot(M).unwrap(), Some(1));
    let names = |t: &mut Transaction, lake: &str| {
        col(
            &t.rows(lake, "ducklake_table", true).unwrap().rows,
            "ducklake_table",
            "table_name",
        )
    };
    assert_eq!(names(&mut t, M), vec![Text("in_main".into())]);
    assert_eq!(names(&mut t, S2), vec![Text("in_s2".into())]);
    let snaps = t.rows(S2, "ducklake_snapshot", true).unwrap();
    assert_eq!(snaps.rows.len(), 1);
    // each lake's head snapshot is its own: snapshot 0 is the head of S2, not of main
    t.stage_delete(S2, "ducklake_snapshot", vec![rowid(snaps.id, 0)])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert!(e.to_string().contains("head snapshot"), "{e}");
    let mut t = store.begin();
    let main_snaps = t.rows(M, "ducklake_snapshot", true).unwrap();
    let zero = main_snaps.rows.iter().position(|r| r[0] == Int(0)).unwrap();
    t.stage_delete(M, "ducklake_snapshot", vec![rowid(main_snaps.id, zero)])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(raw(&store, &keys::snapshot_prefix(S2)).len(), 1);
    assert_eq!(rows_of(&store, "ducklake_snapshot", true).len(), 1);
    assert_eq!(
        raw(&store, &keys::current_prefix(S2, "ducklake_table")).len(),
        1
    );
    assert_eq!(raw(&store, &keys::lake_head(S2)).len(), 1);
}

/// RFC 0007's floor rule: a lake that lost the schema-version row its oldest data file was
/// written under serves a derived row flooring the table at that file, with the oldest version
/// still known. The row is never written; deleting it is a no-op, updating it is refused, and
/// it goes when its inputs go (dead-table cleanup deletes the table's rows and files).
#[test]
fn a_lost_schema_version_row_is_floored_at_the_oldest_data_file() {
    let store = new_lake(&mem_url("floor"));
    let mut t = store.begin();
    t.create_table(def("ducklake_schema_versions")).unwrap();
    t.create_table(def("ducklake_data_file")).unwrap();
    t.commit().unwrap();
    let file = |id: i64, begin: i64| {
        row(
            "ducklake_data_file",
            &[
                ("data_file_id", Int(id)),
                ("table_id", Int(1)),
                ("begin_snapshot", Int(begin)),
                ("path", Text(format!("f{id}.parquet"))),
            ],
        )
    };
    let sv = |begin: i64, version: i64| vec![Int(begin), Int(version), Int(1)];
    // table 1's files begin at snapshots 1 and 4; only the version row of snapshot 3 survived
    let mut t = store.begin();
    for s in 1..=4 {
        t.stage_insert(M, "ducklake_snapshot", vec![snap(s)])
            .unwrap();
    }
    t.stage_insert(M, "ducklake_data_file", vec![file(10, 1), file(11, 4)])
        .unwrap();
    t.stage_insert(M, "ducklake_schema_versions", vec![sv(3, 2)])
        .unwrap();
    t.commit().unwrap();
    let stored_keys = everything(&store);

    let mut t = store.begin();
    let m = t.rows(M, "ducklake_schema_versions", true).unwrap();
    // the floor carries the schema version of snapshot 1, which the oldest file began at
    assert_eq!(m.rows, vec![sv(3, 2), sv(1, 1)]);
    assert_eq!(m.stored, 1);
    // the floor row is not stored, and deleting it changes nothing
    t.stage_delete(M, "ducklake_schema_versions", vec![rowid(m.id, 1)])
        .unwrap();
    assert!(!t.has_writes());
    let e = t
        .stage_update(
            M,
            "ducklake_schema_versions",
            vec![(rowid(m.id, 1), sv(0, 2))],
        )
        .unwrap_err();
    assert!(e.to_string().contains("schema-version floor"), "{e}");
    t.commit().unwrap();
    assert_eq!(everything(&store), stored_keys);

    // the floor follows the transaction's view: an older staged file lowers it (snapshot 0's
    // version), and once that file's snapshot is expired it carries the oldest known version
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(5)])
        .unwrap();
    t.stage_insert(M, "ducklake_data_file", vec![file(9, 0)])
        .unwrap();
    assert_eq!(
        t.rows(M, "ducklake_schema_versions", true).unwrap().rows,
        vec![sv(3, 2), sv(0, 0)]
    );
    let snaps = t.rows(M, "ducklake_snapshot", true).unwrap();
    let zero = snaps.rows.iter().position(|r| r[0] == Int(0)).unwrap();
    t.stage_delete(M, "ducklake_snapshot", vec![rowid(snaps.id, zero)])
        .unwrap();
    assert_eq!(
        t.rows(M, "ducklake_schema_versions", true).unwrap().rows,
        vec![sv(3, 2), sv(0, 2)]
    );
    t.rollback();

    // dead-table cleanup: the stored row and the files go, and so does the floor
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_schema_versions", true).unwrap();
    t.stage_delete(
        M,
        "ducklake_schema_versions",
        vec![rowid(m.id, 0), rowid(m.id, 1)],
    )
    .unwrap();
    let f = t.rows(M, "ducklake_data_file", true).unwrap();
    t.stage_delete(
        M,
        "ducklake_data_file",
        vec![rowid(f.id, 0), rowid(f.id, 1)],
    )
    .unwrap();
    assert!(t
        .rows(M, "ducklake_schema_versions", true)
        .unwrap()
        .rows
        .is_empty());
    t.commit().unwrap();
    assert!(rows_of(&store, "ducklake_schema_versions", true).is_empty());
}

/// DuckLake's own catalogs accept a hand edit of the catalog without a snapshot (its suite
/// inserts a tag that begins at the next snapshot and clears mapping ids this way); so does
/// moraine (RFC 0007, "Hand edits"). The head snapshot stays, the batch count advances, and the
/// row is served as written. No edit may end a version after head, though.
#[test]
fn a_hand_edit_naming_only_committed_snapshots_commits_without_a_snapshot() {
    let store = new_lake(&mem_url("handedit"));
    commit_table(&store, 1, 1, "t1");
    let head = store.head().unwrap();
    let mut t = store.begin();
    // begins at snapshot 2, which the next DuckLake commit will mint
    t.stage_insert(M, "ducklake_table", vec![table_row(2, 2, None, "t2")])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: head.snapshot_id,
            batch_count: head.batch_count + 1
        }
    );
    let table = def("ducklake_table");
    let names = column_of(&store, "ducklake_table", false, "table_name");
    assert_eq!(names, vec![Text("t1".into()), Text("t2".into())]);
    // an update that keeps the version's snapshots is a hand edit too
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_table", false).unwrap();
    let mut new = m.rows[1].clone();
    new[table.column_index("path").unwrap()] = Text("moved/".into());
    t.stage_update(M, "ducklake_table", vec![(rowid(m.id, 1), new)])
        .unwrap();
    t.commit().unwrap();
    let paths = column_of(&store, "ducklake_table", false, "path");
    assert!(paths.contains(&Text("moved/".into())), "{paths:?}");
    // but no edit may end a version after head: a scan at head would miss it (it skips history)
    let before = everything(&store);
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_table", false).unwrap();
    let mut ended = m.rows[0].clone();
    ended[table.column_index("end_snapshot").unwrap()] = Int(9);
    t.stage_update(M, "ducklake_table", vec![(rowid(m.id, 0), ended)])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert!(matches!(e, Error::Constraint(_)), "{e}");
    assert!(e.to_string().contains("ends at snapshot 9"), "{e}");
    assert_eq!(everything(&store), before);
}

/// A row an update recreates after the same transaction deleted its twin is a new row: deleting
/// it again is not skipped as a repeated selection.
#[test]
fn a_row_recreated_by_an_update_can_be_deleted_again() {
    let store = new_lake(&mem_url("recreate"));
    commit_table(&store, 1, 1, "a");
    commit_table(&store, 2, 2, "b");
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(3)])
        .unwrap();
    let m = t.rows(M, "ducklake_table", false).unwrap();
    let a = m.rows[0].clone();
    t.stage_delete(M, "ducklake_table", vec![rowid(m.id, 0)])
        .unwrap();
    // b becomes exactly what a was, then goes too
    t.stage_update(M, "ducklake_table", vec![(rowid(m.id, 1), a.clone())])
        .unwrap();
    let m2 = t.rows(M, "ducklake_table", false).unwrap();
    assert_eq!(m2.rows, vec![a]);
    t.stage_delete(M, "ducklake_table", vec![rowid(m2.id, 0)])
        .unwrap();
    assert!(t.rows(M, "ducklake_table", false).unwrap().rows.is_empty());
    t.commit().unwrap();
    assert!(rows_of(&store, "ducklake_table", false).is_empty());
}

/// Dropping a lake's snapshot table forgets its head snapshot, in the default lake and in
/// another one, so a lake created again starts without a stale head.
#[test]
fn dropping_the_snapshot_table_forgets_the_head() {
    let store = new_lake(&mem_url("drophead"));
    const S2: &str = "lake2";
    let mut t = store.begin();
    t.create_schema(S2, false).unwrap();
    t.create_table(fixed_table_def(S2, "ducklake_snapshot").unwrap())
        .unwrap();
    t.stage_insert(S2, "ducklake_snapshot", vec![snap(4)])
        .unwrap();
    t.commit().unwrap();
    let mut t = store.begin();
    assert_eq!(t.head_snapshot(S2).unwrap(), Some(4));
    assert_eq!(t.head_snapshot(M).unwrap(), Some(0));
    t.drop_table(S2, "ducklake_snapshot").unwrap();
    t.drop_table(M, "ducklake_snapshot").unwrap();
    t.commit().unwrap();
    let mut t = store.begin();
    assert_eq!(t.head_snapshot(S2).unwrap(), None);
    assert_eq!(t.head_snapshot(M).unwrap(), None);
    assert!(raw(&store, &keys::lake_head(S2)).is_empty());
}

#[test]
fn many_small_inserts_join_the_last_chunk_once_a_table_has_many() {
    let store = new_lake(&mem_url("append-chunks"));
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    t.commit().unwrap();
    let n = 150;
    for i in 0..n {
        let mut t = store.begin();
        t.stage_insert(M, "ducklake_snapshot", vec![snap(i + 1)])
            .unwrap();
        t.stage_insert(M, INL, vec![inl(i, i + 1, None, &format!("v{i}"))])
            .unwrap();
        t.commit().unwrap();
    }
    let chunks = raw(&store, &keys::inline_chunk_prefix(M, INL)).len();
    assert_eq!(chunks, 64, "64 one-row chunks, then the last one grows");
    let locators = raw(&store, &keys::inline_locator_prefix(M, INL)).len();
    assert_eq!(locators, chunks, "one locator per chunk");
    // served in insertion order, every row once
    let ids: Vec<Cell> = (0..n).map(Int).collect();
    let row_ids = |store: &Arc<Store>| -> Vec<Cell> {
        rows_of(store, INL, false)
            .iter()
            .map(|r| r[0].clone())
            .collect()
    };
    assert_eq!(row_ids(&store), ids);
    // and a later delete in the grown chunk rewrites it as its runs
    let mut t = store.begin();
    let m = t.rows(M, INL, false).unwrap();
    let i = m.rows.iter().position(|r| r[0] == Int(100)).unwrap();
    t.stage_delete(M, INL, vec![rowid(m.id, i)]).unwrap();
    t.commit().unwrap();
    let left: Vec<Cell> = (0..n).filter(|i| *i != 100).map(Int).collect();
    assert_eq!(row_ids(&store), left);
}

/// Once a table has many chunks, new rows join its last chunk only while that chunk stays
/// under 1 MiB: a commit appending to it rewrites it whole.
#[test]
fn rows_stop_joining_the_last_chunk_once_it_holds_a_mebibyte() {
    let store = new_lake(&mem_url("append-bytes"));
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    t.commit().unwrap();
    let insert = |i: i64, value: String| {
        let mut t = store.begin();
        t.stage_insert(M, "ducklake_snapshot", vec![snap(i + 1)])
            .unwrap();
        t.stage_insert(M, INL, vec![inl(i, i + 1, None, &value)])
            .unwrap();
        t.commit().unwrap();
    };
    for i in 0..64 {
        insert(i, format!("v{i}"));
    }
    let chunks = || raw(&store, &keys::inline_chunk_prefix(M, INL)).len();
    assert_eq!(chunks(), 64);
    // a 400 KiB row joins the last chunk, and a second one too (800 KiB in all)
    insert(64, "x".repeat(400 << 10));
    insert(65, "y".repeat(400 << 10));
    assert_eq!(chunks(), 64, "both joined the last chunk");
    // a third would take it past 1 MiB: it starts a chunk of its own
    insert(66, "z".repeat(400 << 10));
    assert_eq!(chunks(), 65, "the third row started a new chunk");
    let ids: Vec<Cell> = rows_of(&store, INL, false)
        .iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(ids, (0..67).map(Int).collect::<Vec<_>>());
}

/// A stored record that does not decode (issue 11): reading its table is an error naming the
/// record's key, and every other table of the store reads as before; a fresh attach too.
#[test]
fn a_corrupt_record_is_an_error_naming_its_key_and_the_rest_reads() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().display().to_string();
    let store = new_lake(&url);
    commit_table(&store, 1, 1, "t1");
    let stats = before_corruption(&store);
    // a live ducklake_table record overwritten with bytes that are no row
    let key = keys::current(M, "ducklake_table", &[Int(1)], Some(&Int(1)));
    assert!(raw(&store, &keys::current_prefix(M, "ducklake_table"))
        .iter()
        .any(|(k, _)| *k == key));
    store.put_raw(&key, &[0x01, 0xff, 0xff, 0xff]).unwrap();
    // and an inlined table's chunk overwritten with an Arrow stream cut short
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(2)])
        .unwrap();
    t.stage_insert(M, INL, vec![inl(0, 2, None, "a")]).unwrap();
    t.commit().unwrap();
    let chunk = keys::inline_chunk(M, INL, 1);
    let good = raw(&store, &keys::inline_chunk_prefix(M, INL));
    assert_eq!(good.len(), 1);
    assert_eq!(good[0].0, chunk);
    store
        .put_raw(&chunk, &good[0].1[..good[0].1.len() / 2])
        .unwrap();
    let check = |store: &Arc<Store>| {
        let mut t = store.begin();
        let e = t.rows(M, "ducklake_table", false).unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{e:?}");
        let shown = e.to_string();
        assert!(
            shown.contains("(record current/ducklake_table/1/1)"),
            "the error names the record's key: {shown}"
        );
        let e = store.begin().rows(M, INL, false).unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{e:?}");
        let shown = e.to_string();
        assert!(
            shown.contains(&format!("(record {})", keys::show(&chunk))),
            "the error names the chunk's key: {shown}"
        );
        // every other table reads
        let mut t = store.begin();
        assert_eq!(t.head_snapshot(M).unwrap(), Some(2));
        assert_eq!(rows_of(store, "ducklake_table_stats", false), stats);
        assert_eq!(
            column_of(store, "ducklake_snapshot", true, "snapshot_id"),
            vec![Int(0), Int(1), Int(2)]
        );
    };
    // the writer's image and its checkpoint at close still hold the good row: the corrupt
    // record is met by an attach that reads the records (no checkpoint)
    store.close().unwrap();
    drop(store);
    std::fs::remove_dir_all(dir.path().join("moraine").join("image")).unwrap();
    check(&Store::open(&url, false).unwrap());
}

fn before_corruption(store: &Arc<Store>) -> Vec<Row> {
    rows_of(store, "ducklake_table_stats", false)
}
