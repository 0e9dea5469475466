//! Core tests for snapshot expiry, inline drains and version pruning (RFC 0007), on real
//! SlateDB over process-local in-memory object stores (`memory://`). Every test commits through
//! `Transaction` and checks both what a new transaction serves and the raw keyspace.

use super::*;
use crate::cell::Cell::{Int, Text};
use crate::chunk::decode_chunk;
use crate::testing::lakes::{column_of, everything, first_cells, raw, rows_of};
use crate::testing::{self, col, def, inline_def, mem_url, row, snap, table_row, INL, M};
use crate::txn::{rowid, Materialized, Transaction};

const LAKE_TABLES: &[&str] = &[
    "ducklake_metadata",
    "ducklake_snapshot",
    "ducklake_snapshot_changes",
    "ducklake_table",
];

type Kv = Vec<(Vec<u8>, Vec<u8>)>;

// ---- helpers -----------------------------------------------------------------------------------

fn ids(rows: &[Row], table: &str) -> Vec<i64> {
    let mut v: Vec<i64> = col(rows, table, "snapshot_id")
        .iter()
        .map(|c| c.as_int().unwrap())
        .collect();
    v.sort();
    v
}

fn changes(id: i64) -> Row {
    row(
        "ducklake_snapshot_changes",
        &[
            ("snapshot_id", Int(id)),
            ("changes_made", Text(format!("change {id}"))),
        ],
    )
}

/// Inlined row `row_id`, begun at `begin`, live.
fn inl(row_id: i64, begin: i64) -> Row {
    testing::inl(row_id, begin, None, &format!("v{row_id}"))
}

/// A lake the way DuckLake creates one: its tables, the inlined table, snapshot 0.
fn new_lake(tag: &str) -> Arc<Store> {
    let store = Store::open(&mem_url(tag), false).unwrap();
    let mut t = store.begin();
    for name in LAKE_TABLES {
        t.create_table(def(name)).unwrap();
    }
    t.create_table(inline_def()).unwrap();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(0)])
        .unwrap();
    t.stage_insert(M, "ducklake_snapshot_changes", vec![changes(0)])
        .unwrap();
    t.commit().unwrap();
    store
}

/// Commit snapshot `id` (both halves) with whatever else `f` stages.
fn commit_snapshot(store: &Arc<Store>, id: i64, f: impl FnOnce(&mut Transaction)) {
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(id)])
        .unwrap();
    t.stage_insert(M, "ducklake_snapshot_changes", vec![changes(id)])
        .unwrap();
    f(&mut t);
    t.commit().unwrap();
}

/// Commit one inlined chunk per entry, each in its own snapshot (the rows' begin snapshot).
fn commit_chunks(store: &Arc<Store>, chunks: &[Vec<Row>]) {
    for rows in chunks {
        let id = rows[0][1].as_int().unwrap();
        let rows = rows.clone();
        let mut t = store.begin();
        let have = ids(
            &t.rows(M, "ducklake_snapshot", true).unwrap().rows,
            "ducklake_snapshot",
        );
        if !have.contains(&id) {
            t.stage_insert(M, "ducklake_snapshot", vec![snap(id)])
                .unwrap();
            t.stage_insert(M, "ducklake_snapshot_changes", vec![changes(id)])
                .unwrap();
        }
        t.stage_insert(M, INL, rows).unwrap();
        t.commit().unwrap();
    }
}

fn raw_keys(store: &Arc<Store>, prefix: &[u8]) -> Vec<Vec<u8>> {
    raw(store, prefix).into_iter().map(|(k, _)| k).collect()
}

/// Inlined rows served at head, ordered by row id.
fn inline_rows(store: &Arc<Store>) -> Vec<Row> {
    let mut rows = rows_of(store, INL, false);
    rows.sort_by_key(|r| r[0].as_int());
    rows
}

/// The inlined table's chunks: (seq, decoded rows) in sequence order, and its locators as
/// (lowest row id, seq) in key order.
#[allow(clippy::type_complexity)]
fn chunks(store: &Arc<Store>) -> (Vec<(i64, Vec<Row>)>, Vec<(i64, i64)>) {
    let cp = keys::inline_chunk_prefix(M, INL);
    let lp = keys::inline_locator_prefix(M, INL);
    let bodies = raw(store, &cp)
        .into_iter()
        .map(
            |(k, v)| match keys::decode_key(&k[cp.len()..]).unwrap().as_slice() {
                [Int(seq)] => (*seq, decode_chunk(&v).unwrap()),
                other => panic!("chunk key suffix {other:?}"),
            },
        )
        .collect();
    let locs = raw(store, &lp)
        .into_iter()
        .map(
            |(k, _)| match keys::decode_key(&k[lp.len()..]).unwrap().as_slice() {
                [Int(min), Int(seq)] => (*min, *seq),
                other => panic!("locator key suffix {other:?}"),
            },
        )
        .collect();
    (bodies, locs)
}

/// Keys removed from `before`, and keys added or changed in `after`.
fn diff(before: &Kv, after: &Kv) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let b: BTreeMap<_, _> = before.iter().cloned().collect();
    let a: BTreeMap<_, _> = after.iter().cloned().collect();
    let removed = b.keys().filter(|k| !a.contains_key(*k)).cloned().collect();
    let written = a
        .iter()
        .filter(|(k, v)| b.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    (removed, written)
}

/// The index of the first row of `m` satisfying `f`.
fn find(m: &Materialized, f: impl Fn(&Row) -> bool) -> usize {
    m.rows
        .iter()
        .position(f)
        .expect("the materialization holds the row")
}

/// The rowid of inlined row `row_id` begun at `begin` in materialization `m`.
fn inl_rowid(m: &Materialized, row_id: i64, begin: i64) -> i64 {
    rowid(m.id, find(m, |r| r[0] == Int(row_id) && r[1] == Int(begin)))
}

// ---- inlined versions ------------------------------------------------------------------------

#[test]
fn inline_delete_of_a_missing_version_fails_the_transaction_and_writes_nothing() {
    let store = new_lake("missing");
    commit_chunks(
        &store,
        &[
            vec![inl(0, 1), inl(1, 1), inl(2, 1)],
            vec![inl(3, 2), inl(4, 2)],
        ],
    );

    // Raced: this transaction resolves version (1, 1); another removes it and commits first.
    let mut t = store.begin();
    let m = t.rows(M, INL, false).unwrap();
    let mut other = store.begin();
    let om = other.rows(M, INL, false).unwrap();
    other
        .stage_delete(M, INL, vec![inl_rowid(&om, 1, 1)])
        .unwrap();
    other.commit().unwrap();
    let before = everything(&store);
    t.stage_delete(M, INL, vec![inl_rowid(&m, 3, 2), inl_rowid(&m, 1, 1)])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert!(e.to_string().contains("conflict"), "{e}");
    assert_eq!(everything(&store), before, "a failed commit writes nothing");
    assert_eq!(
        inline_rows(&store),
        vec![inl(0, 1), inl(2, 1), inl(3, 2), inl(4, 2)]
    );

    // From one read point: versions that are not in any committed chunk, staged next to a valid
    // delete. Translation itself must refuse each (no racing commit to lose against).
    let missing = [
        inl(1, 1),  // the version the other transaction removed
        inl(2, 9),  // a row id that exists, at a begin snapshot it never had
        inl(4, 1),  // a row id of a chunk the valid delete already loaded, wrong snapshot
        inl(99, 1), // beyond every chunk
    ];
    for ghost in missing {
        let mut t = store.begin();
        let m = t.rows(M, INL, false).unwrap();
        t.stage_delete(M, INL, vec![inl_rowid(&m, 3, 2)]).unwrap();
        t.stage_unchecked_for_test(Op::Delete {
            schema: M.into(),
            table: INL.into(),
            old: ghost.clone(),
        });
        let e = t.commit().unwrap_err();
        assert!(e.is_conflict(), "{ghost:?}: {e}");
        assert!(e.to_string().contains(INL), "names the table: {e}");
        assert_eq!(everything(&store), before, "{ghost:?}: nothing written");
    }
    assert_eq!(store.head().unwrap().snapshot_id, Some(2));
}

/// Two chunks, (r0 r1 r2) and (r3 r4). One transaction scans them (`m1`), inserts r5, re-scans
/// (`m2`, a new materialization), and lets `select` stage deletes naming versions (1, 1) and
/// (3, 2) more than once; each must be deleted exactly once.
fn repeated_selection(select: impl FnOnce(&mut Transaction, &Materialized, &Materialized)) {
    let store = new_lake("repeat");
    commit_chunks(
        &store,
        &[
            vec![inl(0, 1), inl(1, 1), inl(2, 1)],
            vec![inl(3, 2), inl(4, 2)],
        ],
    );
    let head = store.head().unwrap();

    let mut t = store.begin();
    let m1 = t.rows(M, INL, false).unwrap();
    // an insert is a catalog change: it comes with its snapshot
    t.stage_insert(M, "ducklake_snapshot", vec![snap(3)])
        .unwrap();
    t.stage_insert(M, INL, vec![inl(5, 2)]).unwrap();
    let m2 = t.rows(M, INL, false).unwrap();
    assert_ne!(m1.id, m2.id);
    select(&mut t, &m1, &m2);
    let deletes = t
        .staged()
        .iter()
        .filter(|op| matches!(op, Op::Delete { .. }))
        .count();
    let mut seen = t.rows(M, INL, false).unwrap().rows.to_vec();
    seen.sort_by_key(|r| r[0].as_int());
    assert_eq!(seen, vec![inl(0, 1), inl(2, 1), inl(4, 2), inl(5, 2)]);
    t.commit()
        .unwrap_or_else(|e| panic!("commit with {deletes} staged deletes: {e}"));

    assert_eq!(
        inline_rows(&store),
        vec![inl(0, 1), inl(2, 1), inl(4, 2), inl(5, 2)]
    );
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(3),
            batch_count: head.batch_count + 1
        }
    );
    // chunk 1 (r0 r1 r2) -> r0 keeps seq 1, r2 takes seq 3; chunk 2 (r3 r4) -> r4 keeps seq 2;
    // the inserted row's chunk comes after the rewritten runs
    let (bodies, locs) = chunks(&store);
    assert_eq!(
        bodies,
        vec![
            (1, vec![inl(0, 1)]),
            (2, vec![inl(4, 2)]),
            (3, vec![inl(2, 1)]),
            (4, vec![inl(5, 2)]),
        ]
    );
    assert_eq!(locs, vec![(0, 1), (2, 3), (4, 2), (5, 4)]);
}

#[test]
fn inline_one_rowid_selected_twice_is_deleted_once() {
    repeated_selection(|t, _, m2| {
        // one statement's scan names (3, 2) twice; a second call names both versions again
        let (v1, v3) = (inl_rowid(m2, 1, 1), inl_rowid(m2, 3, 2));
        t.stage_delete(M, INL, vec![v1, v3, v3]).unwrap();
        t.stage_delete(M, INL, vec![v3, v1]).unwrap();
        assert_eq!(t.staged().len(), 4, "a snapshot, one insert, two deletes");
    });
}

#[test]
fn inline_repeated_selection_of_one_version_is_deleted_once() {
    repeated_selection(|t, m1, m2| {
        // version (1, 1) selected through both scans, in two statements; (3, 2) twice in one
        t.stage_delete(M, INL, vec![inl_rowid(m2, 1, 1)]).unwrap();
        let v3 = inl_rowid(m1, 3, 2);
        t.stage_delete(M, INL, vec![inl_rowid(m1, 1, 1), v3, v3])
            .unwrap();
        t.stage_delete(M, INL, vec![v3]).unwrap();
    });
}

#[test]
fn inline_partial_delete_rewrites_contiguous_runs_first_keeps_sequence() {
    let store = new_lake("runs");
    commit_chunks(
        &store,
        &[
            (0..6).map(|i| inl(i, 1)).collect(),
            vec![inl(6, 2), inl(7, 2)],
            vec![inl(8, 3)],
        ],
    );
    let (bodies, _) = chunks(&store);
    assert_eq!(
        bodies
            .iter()
            .map(|(s, r)| (*s, r.len()))
            .collect::<Vec<_>>(),
        vec![(1, 6), (2, 2), (3, 1)]
    );
    let untouched = raw(&store, &keys::inline_chunk(M, INL, 3));
    let before = everything(&store);

    let mut t = store.begin();
    let m = t.rows(M, INL, false).unwrap();
    t.stage_delete(
        M,
        INL,
        [(1, 1), (4, 1), (6, 2), (7, 2)]
            .iter()
            .map(|&(r, b)| inl_rowid(&m, r, b))
            .collect(),
    )
    .unwrap();
    t.commit().unwrap();

    assert_eq!(
        inline_rows(&store),
        vec![inl(0, 1), inl(2, 1), inl(3, 1), inl(5, 1), inl(8, 3)]
    );
    let (bodies, locs) = chunks(&store);
    // (r0) keeps seq 1; (r2 r3) and (r5) take 4 and 5, above every existing seq (3); the wholly
    // selected chunk 2 is gone; chunk 3 is untouched
    assert_eq!(
        bodies,
        vec![
            (1, vec![inl(0, 1)]),
            (3, vec![inl(8, 3)]),
            (4, vec![inl(2, 1), inl(3, 1)]),
            (5, vec![inl(5, 1)]),
        ]
    );
    assert_eq!(locs, vec![(0, 1), (2, 4), (5, 5), (8, 3)]);
    assert_eq!(raw(&store, &keys::inline_chunk(M, INL, 3)), untouched);
    let (removed, written) = diff(&before, &everything(&store));
    assert!(removed.contains(&keys::inline_chunk(M, INL, 2)));
    assert!(removed.contains(&keys::inline_locator(M, INL, &Int(6), 2)));
    assert!(
        !written.contains(&keys::inline_chunk(M, INL, 3))
            && !written.contains(&keys::inline_locator(M, INL, &Int(8), 3)),
        "an unselected chunk is left as it is"
    );
}

#[test]
fn inline_selection_deletes_combine_with_a_prefix_drain_in_one_transaction() {
    let store = new_lake("drain");
    commit_chunks(
        &store,
        &[
            vec![inl(0, 1), inl(1, 1), inl(2, 1)],
            vec![inl(3, 2), inl(4, 2)],
            vec![inl(5, 3), inl(6, 3), inl(7, 3)],
            vec![inl(8, 4), inl(9, 4)],
        ],
    );
    let head = store.head().unwrap();
    assert_eq!(head.snapshot_id, Some(4));
    let before = everything(&store);

    let mut t = store.begin();
    // DELETE FROM inlined WHERE begin_snapshot <= 2 (a flush drain)
    let m1 = t.rows(M, INL, false).unwrap();
    let drain: Vec<i64> = (0..m1.rows.len())
        .filter(|&i| m1.rows[i][1].as_int().unwrap() <= 2)
        .map(|i| rowid(m1.id, i))
        .collect();
    assert_eq!(drain.len(), 5);
    t.stage_delete(M, INL, drain).unwrap();
    // then exact selections above the prefix, through the statement's own scan
    let m2 = t.rows(M, INL, false).unwrap();
    assert_eq!(
        m2.rows.len(),
        5,
        "the drain is visible to the next statement"
    );
    t.stage_delete(M, INL, vec![inl_rowid(&m2, 6, 3), inl_rowid(&m2, 9, 4)])
        .unwrap();
    t.commit().unwrap();

    assert_eq!(inline_rows(&store), vec![inl(5, 3), inl(7, 3), inl(8, 4)]);
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(4),
            batch_count: head.batch_count + 1
        },
        "one maintenance commit"
    );
    let (bodies, locs) = chunks(&store);
    assert_eq!(
        bodies,
        vec![
            (3, vec![inl(5, 3)]),
            (4, vec![inl(8, 4)]),
            (5, vec![inl(7, 3)]),
        ]
    );
    assert_eq!(locs, vec![(5, 3), (7, 5), (8, 4)]);
    // nothing outside the inlined table but sys/head changed
    let inline = keys::inline_table_prefix(M, INL);
    let (removed, written) = diff(&before, &everything(&store));
    assert!(
        removed.iter().all(|k| k.starts_with(&inline)),
        "{removed:?}"
    );
    assert!(
        written
            .iter()
            .all(|k| k.starts_with(&inline) || *k == keys::sys_head()),
        "{written:?}"
    );
}

// ---- snapshot expiry -------------------------------------------------------------------------

#[test]
fn expiry_cascade_reads_its_own_snapshot_deletes() {
    let store = new_lake("cascade");
    for id in 1..=3 {
        commit_snapshot(&store, id, |t| {
            t.stage_insert(
                M,
                "ducklake_table",
                vec![table_row(id, id, None, &format!("t{id}"))],
            )
            .unwrap();
        });
    }
    // snapshot 4 drops t2: its version (2, begun 2, ended 4) is seen by snapshots 2 and 3 only
    commit_snapshot(&store, 4, |t| {
        let m = t.rows(M, "ducklake_table", false).unwrap();
        let i = find(&m, |r| r[0] == Int(2));
        t.stage_update(
            M,
            "ducklake_table",
            vec![(rowid(m.id, i), table_row(2, 2, Some(4), "t2"))],
        )
        .unwrap();
    });
    let head = store.head().unwrap();
    assert_eq!(head.snapshot_id, Some(4));
    let all = vec![0, 1, 2, 3, 4];

    // ducklake_expire_snapshots(versions => [2, 3])
    let mut t = store.begin();
    let s0 = t.rows(M, "ducklake_snapshot", false).unwrap();
    let c0 = t.rows(M, "ducklake_snapshot_changes", false).unwrap();
    assert_eq!(ids(&s0.rows, "ducklake_snapshot"), all);
    let expired = [2, 3];
    let pick = |m: &Materialized| -> Vec<i64> {
        (0..m.rows.len())
            .filter(|&i| expired.contains(&m.rows[i][0].as_int().unwrap()))
            .map(|i| rowid(m.id, i))
            .collect()
    };
    let s_sel = pick(&s0);
    for &r in &s_sel {
        let (m, i) = t.resolve(r).unwrap();
        assert!(Arc::ptr_eq(&m, &s0));
        assert!(expired.contains(&m.rows[i][0].as_int().unwrap()));
    }
    t.stage_delete(M, "ducklake_snapshot", s_sel.clone())
        .unwrap();
    t.stage_delete(M, "ducklake_snapshot_changes", pick(&c0))
        .unwrap();

    // a concurrent transaction still sees every committed snapshot
    let mut other = store.begin();
    assert_eq!(
        ids(
            &other.rows(M, "ducklake_snapshot", false).unwrap().rows,
            "ducklake_snapshot"
        ),
        all
    );

    // step 1 is visible to the cascade's next statements
    let s1 = t.rows(M, "ducklake_snapshot", false).unwrap();
    assert_ne!(s1.id, s0.id);
    let surviving = ids(&s1.rows, "ducklake_snapshot");
    assert_eq!(surviving, vec![0, 1, 4]);
    assert_eq!(
        ids(
            &t.rows(M, "ducklake_snapshot_changes", false).unwrap().rows,
            "ducklake_snapshot_changes"
        ),
        vec![0, 1, 4]
    );
    // the old scan's rowids still name the rows that scan emitted
    let (m, i) = t.resolve(s_sel[0]).unwrap();
    assert!(Arc::ptr_eq(&m, &s0));
    assert_eq!(m.rows[i], snap(2));
    // and every rowid of the new scan resolves to exactly the row it emitted
    for (i, r) in s1.rows.iter().enumerate() {
        let (m, j) = t.resolve(rowid(s1.id, i)).unwrap();
        assert!(Arc::ptr_eq(&m, &s1));
        assert_eq!((j, &m.rows[j]), (i, r));
    }

    // step 2: versions no surviving snapshot can see (NOT EXISTS over the transaction's view)
    let dead_in = |snapshots: &[i64], m: &Materialized| -> Vec<usize> {
        let (b, e) = (
            def("ducklake_table")
                .column_index("begin_snapshot")
                .unwrap(),
            def("ducklake_table").column_index("end_snapshot").unwrap(),
        );
        (0..m.rows.len())
            .filter(|&i| {
                let (begin, end) = (m.rows[i][b].as_int().unwrap(), m.rows[i][e].as_int());
                end.is_some_and(|end| !snapshots.iter().any(|&s| s >= begin && s < end))
            })
            .collect()
    };
    let tables = t.rows(M, "ducklake_table", true).unwrap();
    let dead = dead_in(&surviving, &tables);
    assert_eq!(dead.len(), 1);
    let dead_rowid = rowid(tables.id, dead[0]);
    let (m, i) = t.resolve(dead_rowid).unwrap();
    assert_eq!(m.rows[i], table_row(2, 2, Some(4), "t2"));
    // the committed view would find nothing dead: snapshots 2 and 3 are alive there
    let other_snaps = ids(
        &other.rows(M, "ducklake_snapshot", false).unwrap().rows,
        "ducklake_snapshot",
    );
    let other_tables = other.rows(M, "ducklake_table", true).unwrap();
    assert!(dead_in(&other_snaps, &other_tables).is_empty());
    t.stage_delete(M, "ducklake_table", vec![dead_rowid])
        .unwrap();
    assert_eq!(
        t.rows(M, "ducklake_table", true).unwrap().rows,
        vec![table_row(1, 1, None, "t1"), table_row(3, 3, None, "t3")],
        "the pruned version is gone from the cascade's view"
    );
    t.commit().unwrap();

    // the other transaction's read point does not move
    assert_eq!(
        ids(
            &other.rows(M, "ducklake_snapshot", false).unwrap().rows,
            "ducklake_snapshot"
        ),
        all
    );
    assert!(other
        .rows(M, "ducklake_table", true)
        .unwrap()
        .rows
        .contains(&table_row(2, 2, Some(4), "t2")));
    other.rollback();

    // committed: a new transaction sees the snapshots gone, head unchanged
    assert_eq!(
        ids(
            &rows_of(&store, "ducklake_snapshot", false),
            "ducklake_snapshot"
        ),
        vec![0, 1, 4]
    );
    assert_eq!(
        ids(
            &rows_of(&store, "ducklake_snapshot_changes", false),
            "ducklake_snapshot_changes"
        ),
        vec![0, 1, 4]
    );
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(4),
            batch_count: head.batch_count + 1
        }
    );
    assert_eq!(
        raw_keys(&store, &keys::snapshot_prefix(M)),
        vec![
            keys::snapshot(M, 0),
            keys::snapshot(M, 1),
            keys::snapshot(M, 4)
        ]
    );
    assert!(raw_keys(&store, &keys::history_prefix(M, "ducklake_table")).is_empty());
    assert_eq!(
        raw_keys(&store, &keys::current_prefix(M, "ducklake_table")).len(),
        2
    );
}

// ---- versioned rows --------------------------------------------------------------------------

#[test]
fn deleting_a_versioned_row_prunes_exactly_that_version() {
    let store = new_lake("prune");
    let v1 = table_row(1, 1, Some(2), "a");
    let v2 = table_row(1, 2, Some(3), "b");
    let v3 = table_row(1, 3, None, "c");
    let other = table_row(2, 2, None, "x");
    commit_snapshot(&store, 1, |t| {
        t.stage_insert(M, "ducklake_table", vec![table_row(1, 1, None, "a")])
            .unwrap();
    });
    // each rename ends the live version and begins the next
    for (id, ended, next) in [(2, &v1, table_row(1, 2, None, "b")), (3, &v2, v3.clone())] {
        commit_snapshot(&store, id, |t| {
            let m = t.rows(M, "ducklake_table", false).unwrap();
            let i = find(&m, |r| r[0] == Int(1));
            t.stage_update(M, "ducklake_table", vec![(rowid(m.id, i), ended.clone())])
                .unwrap();
            t.stage_insert(M, "ducklake_table", vec![next]).unwrap();
            if id == 2 {
                t.stage_insert(M, "ducklake_table", vec![other.clone()])
                    .unwrap();
            }
        });
    }
    let h = |end: i64, begin: i64| {
        keys::history(M, "ducklake_table", &[Int(1)], &Int(end), &Int(begin))
    };
    let c = |id: i64, begin: i64| keys::current(M, "ducklake_table", &[Int(id)], Some(&Int(begin)));
    assert_eq!(
        raw_keys(&store, &keys::history_prefix(M, "ducklake_table")),
        vec![h(2, 1), h(3, 2)]
    );
    assert_eq!(
        raw_keys(&store, &keys::current_prefix(M, "ducklake_table")),
        vec![c(1, 3), c(2, 2)]
    );
    let head = store.head().unwrap();

    // prune the oldest history version (a maintenance commit: no snapshot)
    let before = everything(&store);
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_table", true).unwrap();
    let i = find(&m, |r| *r == v1);
    t.stage_delete(M, "ducklake_table", vec![rowid(m.id, i)])
        .unwrap();
    t.commit().unwrap();
    let (removed, written) = diff(&before, &everything(&store));
    assert_eq!(removed, vec![h(2, 1)], "exactly that history key");
    assert_eq!(
        written,
        vec![keys::sys_head()],
        "nothing moves or is rewritten"
    );
    assert_eq!(
        rows_of(&store, "ducklake_table", true),
        vec![v2.clone(), other.clone(), v3.clone()]
    );
    assert_eq!(
        rows_of(&store, "ducklake_table", false),
        vec![other.clone(), v3.clone()]
    );

    // the same version again, from a stale selection: gone, so the commit conflicts
    let before = everything(&store);
    let mut t = store.begin();
    t.stage_unchecked_for_test(Op::Delete {
        schema: M.into(),
        table: "ducklake_table".into(),
        old: v1.clone(),
    });
    let e = t.commit().unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert_eq!(everything(&store), before);

    // prune the current version (end_snapshot NULL), through the head view
    let mut t = store.begin();
    let m = t.rows(M, "ducklake_table", false).unwrap();
    let i = find(&m, |r| *r == v3);
    t.stage_delete(M, "ducklake_table", vec![rowid(m.id, i)])
        .unwrap();
    t.commit().unwrap();
    let (removed, written) = diff(&before, &everything(&store));
    assert_eq!(removed, vec![c(1, 3)], "exactly that current key");
    assert_eq!(written, vec![keys::sys_head()]);
    assert_eq!(
        raw_keys(&store, &keys::history_prefix(M, "ducklake_table")),
        vec![h(3, 2)]
    );
    assert_eq!(
        rows_of(&store, "ducklake_table", false),
        vec![other.clone()]
    );
    assert_eq!(rows_of(&store, "ducklake_table", true), vec![v2, other]);
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: head.snapshot_id,
            batch_count: head.batch_count + 2
        }
    );
}

// ---- maintenance, hand edits and the mixed set ------------------------------------------------

/// Maintenance (here: a snapshot delete, an inlined-row delete) and a catalog change (an insert
/// or update) in one commit without a snapshot insert is a constraint error and writes nothing.
/// Either alone commits without a snapshot and keeps the head snapshot.
#[test]
fn a_mixed_set_without_a_snapshot_is_a_constraint_error() {
    let store = new_lake("mixed");
    commit_snapshot(&store, 1, |t| {
        t.stage_insert(M, "ducklake_table", vec![table_row(1, 1, None, "a")])
            .unwrap();
    });
    commit_chunks(&store, &[vec![inl(0, 2), inl(1, 2)]]);
    let before = everything(&store);
    let head = store.head().unwrap();

    let refused = |stage: &dyn Fn(&mut Transaction), what: &str| {
        let mut t = store.begin();
        stage(&mut t);
        let e = t.commit().unwrap_err();
        assert!(matches!(e, Error::Constraint(_)), "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains(what) && msg.contains("must insert a ducklake_snapshot row"),
            "{msg}"
        );
        assert_eq!(
            everything(&store),
            before,
            "a refused commit writes nothing"
        );
    };
    let delete_snapshot_1 = |t: &mut Transaction| {
        let m = t.rows(M, "ducklake_snapshot", true).unwrap();
        let i = find(&m, |r| r[0] == Int(1));
        t.stage_delete(M, "ducklake_snapshot", vec![rowid(m.id, i)])
            .unwrap();
    };
    let delete_inlined_row_0 = |t: &mut Transaction| {
        let m = t.rows(M, INL, false).unwrap();
        t.stage_delete(M, INL, vec![inl_rowid(&m, 0, 2)]).unwrap();
    };
    // an expiry carrying a new table version
    refused(
        &|t| {
            delete_snapshot_1(t);
            t.stage_insert(M, "ducklake_table", vec![table_row(2, 2, None, "b")])
                .unwrap();
        },
        "inserts into ducklake_table and also deletes from ducklake_snapshot",
    );
    // a drain carrying an update of a live version
    refused(
        &|t| {
            delete_inlined_row_0(t);
            let m = t.rows(M, "ducklake_table", false).unwrap();
            t.stage_update(
                M,
                "ducklake_table",
                vec![(rowid(m.id, 0), table_row(1, 1, None, "renamed"))],
            )
            .unwrap();
        },
        "updates ducklake_table and also deletes from ducklake_inlined_data_1_0",
    );

    // maintenance alone: no snapshot record, head snapshot kept, batch count advanced
    let mut t = store.begin();
    delete_snapshot_1(&mut t);
    delete_inlined_row_0(&mut t);
    t.commit().unwrap();
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: head.snapshot_id,
            batch_count: head.batch_count + 1
        }
    );
    assert_eq!(
        ids(
            &rows_of(&store, "ducklake_snapshot", true),
            "ducklake_snapshot"
        ),
        vec![0, 2],
        "snapshot 1 is gone and no snapshot was minted"
    );
    // a hand edit alone (DuckLake's catalogs accept it; its suite relies on it)
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_table", vec![table_row(2, 3, None, "b")])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(store.head().unwrap().snapshot_id, head.snapshot_id);
}

// ---- embedded rows ---------------------------------------------------------------------------

const EMBEDDING: &[&str] = &[
    "ducklake_data_file",
    "ducklake_file_partition_value",
    "ducklake_column_mapping",
    "ducklake_name_mapping",
];

fn data_file(id: i64) -> Row {
    row(
        "ducklake_data_file",
        &[
            ("data_file_id", Int(id)),
            ("table_id", Int(1)),
            ("begin_snapshot", Int(1)),
            ("path", Text(format!("f{id}.parquet"))),
        ],
    )
}

fn partition_value(file: i64, index: i64, value: &str) -> Row {
    row(
        "ducklake_file_partition_value",
        &[
            ("data_file_id", Int(file)),
            ("table_id", Int(1)),
            ("partition_key_index", Int(index)),
            ("partition_value", Text(value.into())),
        ],
    )
}

fn column_mapping(id: i64) -> Row {
    row(
        "ducklake_column_mapping",
        &[
            ("mapping_id", Int(id)),
            ("table_id", Int(1)),
            ("type", Text("map_by_name".into())),
        ],
    )
}

fn name_mapping(mapping: i64, column: i64, name: &str) -> Row {
    row(
        "ducklake_name_mapping",
        &[
            ("mapping_id", Int(mapping)),
            ("column_id", Int(column)),
            ("source_name", Text(name.into())),
        ],
    )
}

/// Files 5 and 6 with partition values, mappings 7 and 8 with name rows, all at snapshot 1.
fn lake_with_embedded_rows(tag: &str) -> Arc<Store> {
    let store = new_lake(tag);
    let mut t = store.begin();
    for name in EMBEDDING {
        t.create_table(def(name)).unwrap();
    }
    t.commit().unwrap();
    commit_snapshot(&store, 1, |t| {
        t.stage_insert(M, "ducklake_data_file", vec![data_file(5), data_file(6)])
            .unwrap();
        t.stage_insert(
            M,
            "ducklake_file_partition_value",
            vec![
                partition_value(5, 0, "a"),
                partition_value(5, 1, "b"),
                partition_value(6, 0, "c"),
            ],
        )
        .unwrap();
        t.stage_insert(
            M,
            "ducklake_column_mapping",
            vec![column_mapping(7), column_mapping(8)],
        )
        .unwrap();
        t.stage_insert(
            M,
            "ducklake_name_mapping",
            vec![
                name_mapping(7, 0, "x"),
                name_mapping(7, 1, "y"),
                name_mapping(8, 0, "z"),
            ],
        )
        .unwrap();
    });
    store
}

fn delete_where(t: &mut Transaction, table: &str, f: impl Fn(&Row) -> bool) {
    let m = t.rows(M, table, true).unwrap();
    let rowids: Vec<i64> = (0..m.rows.len())
        .filter(|&i| f(&m.rows[i]))
        .map(|i| rowid(m.id, i))
        .collect();
    t.stage_delete(M, table, rowids).unwrap();
}

/// DuckLake's expiry deletes a data file's row, then `DELETE FROM ducklake_file_partition_value
/// WHERE data_file_id IN (...)`; step 5 deletes a column mapping and step 8 sweeps name rows
/// whose mapping is gone. The embedded rows ride their parent: the transaction stops serving
/// them once the parent is deleted (so the later deletes find nothing to do), and the parent's
/// delete removes their keys in the same write.
#[test]
fn embedded_rows_ride_their_parents_deletion() {
    let store = lake_with_embedded_rows("embedded");
    let pv = |id: i64| keys::current(M, "ducklake_file_partition_value", &[Int(id)], None);
    let nm = |id: i64| keys::current(M, "ducklake_name_mapping", &[Int(id)], None);
    assert_eq!(raw_keys(&store, &pv(5)).len(), 2);
    assert_eq!(raw_keys(&store, &nm(7)).len(), 2);
    let before = everything(&store);
    let head = store.head().unwrap();

    let mut t = store.begin();
    delete_where(&mut t, "ducklake_data_file", |r| r[0] == Int(5));
    let values = t.rows(M, "ducklake_file_partition_value", true).unwrap();
    assert_eq!(values.rows, vec![partition_value(6, 0, "c")]);
    delete_where(&mut t, "ducklake_file_partition_value", |r| r[0] == Int(5));
    delete_where(&mut t, "ducklake_column_mapping", |r| r[0] == Int(7));
    // the step 8 sweep: name rows whose mapping is gone
    let live = first_cells(&mut t, "ducklake_column_mapping");
    assert_eq!(live, vec![Int(8)]);
    delete_where(&mut t, "ducklake_name_mapping", |r| !live.contains(&r[0]));
    assert!(
        t.staged().iter().all(|op| match op {
            Op::Delete { table, .. } =>
                table == "ducklake_data_file" || table == "ducklake_column_mapping",
            _ => false,
        }),
        "the embedded deletes found nothing to stage: {:?}",
        t.staged()
    );
    assert_eq!(
        t.rows(M, "ducklake_name_mapping", true).unwrap().rows,
        vec![name_mapping(8, 0, "z")]
    );
    // outside the transaction the committed rows are still served
    assert_eq!(
        rows_of(&store, "ducklake_file_partition_value", true).len(),
        3
    );
    t.commit().unwrap();

    let (removed, written) = diff(&before, &everything(&store));
    let expected: Vec<Vec<u8>> = before
        .iter()
        .map(|(k, _)| k.clone())
        .filter(|k| {
            k.starts_with(&pv(5))
                || k.starts_with(&nm(7))
                || k.starts_with(&keys::current(M, "ducklake_data_file", &[Int(5)], None))
                || k.starts_with(&keys::current(
                    M,
                    "ducklake_column_mapping",
                    &[Int(7)],
                    None,
                ))
        })
        .collect();
    assert_eq!(
        expected.len(),
        6,
        "file 5, its 2 values, mapping 7, its 2 name rows"
    );
    assert_eq!(removed, expected);
    assert_eq!(written, vec![keys::sys_head()]);
    assert_eq!(store.head().unwrap().snapshot_id, head.snapshot_id);
    assert_eq!(
        rows_of(&store, "ducklake_file_partition_value", true),
        vec![partition_value(6, 0, "c")]
    );
    assert_eq!(
        rows_of(&store, "ducklake_name_mapping", true),
        vec![name_mapping(8, 0, "z")]
    );

    // embedded rows first, then their parent, in one transaction: validated, and gone
    let mut t = store.begin();
    delete_where(&mut t, "ducklake_file_partition_value", |r| r[0] == Int(6));
    delete_where(&mut t, "ducklake_data_file", |r| r[0] == Int(6));
    t.commit().unwrap();
    assert!(raw_keys(&store, &pv(6)).is_empty());
    assert!(rows_of(&store, "ducklake_data_file", true).is_empty());
}

/// An embedded row goes only with its parent: deleting one whose parent stays is a constraint
/// error that writes nothing.
#[test]
fn an_embedded_row_cannot_be_deleted_while_its_parent_stays() {
    let store = lake_with_embedded_rows("embedded-alone");
    let before = everything(&store);
    for (table, id, parent) in [
        ("ducklake_file_partition_value", 6, "ducklake_data_file 6"),
        ("ducklake_name_mapping", 8, "ducklake_column_mapping 8"),
    ] {
        let mut t = store.begin();
        delete_where(&mut t, table, |r| r[0] == Int(id));
        let e = t.commit().unwrap_err();
        assert!(matches!(e, Error::Constraint(_)), "{e}");
        assert!(e.to_string().contains(parent), "{e}");
        assert_eq!(everything(&store), before);
    }
    // a mapping deleted in one transaction takes its name rows; a sweep in a later one is a
    // no-op
    let mut t = store.begin();
    delete_where(&mut t, "ducklake_column_mapping", |r| r[0] == Int(8));
    t.commit().unwrap();
    let mut t = store.begin();
    let live = first_cells(&mut t, "ducklake_column_mapping");
    delete_where(&mut t, "ducklake_name_mapping", |r| !live.contains(&r[0]));
    assert!(!t.has_writes(), "{:?}", t.staged());
    assert_eq!(
        column_of(&store, "ducklake_name_mapping", true, "mapping_id"),
        vec![Int(7), Int(7)]
    );
}

/// Many parents in one commit (an expiry of a busy table) each take their own rows, and only
/// theirs.
#[test]
fn many_parents_take_their_embedded_rows_in_one_commit() {
    let store = lake_with_embedded_rows("embedded-many");
    commit_snapshot(&store, 2, |t| {
        let files: Vec<Row> = (100..200).map(data_file).collect();
        t.stage_insert(M, "ducklake_data_file", files).unwrap();
        let values: Vec<Row> = (100..200).map(|f| partition_value(f, 0, "v")).collect();
        t.stage_insert(M, "ducklake_file_partition_value", values)
            .unwrap();
    });
    let mut t = store.begin();
    delete_where(&mut t, "ducklake_data_file", |r| {
        r[0].as_int().is_some_and(|id| (100..180).contains(&id))
    });
    t.commit().unwrap();
    let left: Vec<i64> = column_of(
        &store,
        "ducklake_file_partition_value",
        true,
        "data_file_id",
    )
    .iter()
    .map(|c| c.as_int().unwrap())
    .collect();
    let mut expected = vec![5, 5, 6];
    expected.extend(180..200);
    assert_eq!(left, expected);
    assert_eq!(
        raw_keys(
            &store,
            &keys::current_prefix(M, "ducklake_file_partition_value")
        )
        .len(),
        23
    );
}

/// An embedded row whose parent was already gone (an orphan a hand edit left) goes with the
/// delete that names it, at once: the same commit can write the row again.
#[test]
fn an_orphaned_embedded_row_goes_with_its_own_delete() {
    let store = lake_with_embedded_rows("embedded-orphan");
    let orphan = partition_value(9, 0, "o");
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_file_partition_value", vec![orphan.clone()])
        .unwrap();
    t.commit().unwrap();
    // deleted and written again in one commit
    commit_snapshot(&store, 2, |t| {
        delete_where(t, "ducklake_file_partition_value", |r| r[0] == Int(9));
        t.stage_insert(M, "ducklake_file_partition_value", vec![orphan.clone()])
            .unwrap();
    });
    let orphans = |store: &Arc<Store>| {
        rows_of(store, "ducklake_file_partition_value", true)
            .into_iter()
            .filter(|r| r[0] == Int(9))
            .count()
    };
    assert_eq!(orphans(&store), 1);
    // deleted alone: a maintenance commit
    let mut t = store.begin();
    delete_where(&mut t, "ducklake_file_partition_value", |r| r[0] == Int(9));
    t.commit().unwrap();
    assert_eq!(orphans(&store), 0);
    assert_eq!(
        rows_of(&store, "ducklake_file_partition_value", true).len(),
        3
    );
}

/// A parent table dropped after the transaction deleted a parent hides nothing: the embedded
/// table is still read (its rows are served as stored).
#[test]
fn embedded_rows_are_read_after_their_parent_table_is_dropped() {
    let store = lake_with_embedded_rows("embedded-dropped-parent");
    let mut t = store.begin();
    delete_where(&mut t, "ducklake_column_mapping", |r| r[0] == Int(7));
    assert_eq!(first_cells(&mut t, "ducklake_name_mapping"), vec![Int(8)]);
    t.drop_table(M, "ducklake_column_mapping").unwrap();
    assert_eq!(
        first_cells(&mut t, "ducklake_name_mapping"),
        vec![Int(7), Int(7), Int(8)]
    );
}
