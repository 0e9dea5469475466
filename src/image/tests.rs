//! Image tests. Units: the spaces keys lie in, history ranges, values computed once, and rows
//! served from records kept encoded. On real SlateDB, the committed image (RFC 0009): advanced
//! by this process's commits, it is the image a fresh read of the store gives; a transaction
//! reads the image it pinned and nothing later.

use super::history::HistoryHeld;
use super::spaces::{history_range_end, is_history_prefix, place_of, place_space, Place};
use super::Image;
use crate::catalog::Kind;
use crate::cell::Cell::{Int, Text};
use crate::cell::{decode_row, Cell, Row};
use crate::error::Error;
use crate::keys;
use crate::kinds;
use crate::rowset::RowSet;
use crate::runtime::block_on;
use crate::store::Store;
use crate::testing::lakes::*;
use crate::testing::*;
use crate::txn::{rowid, Transaction};
use bytes::Bytes;
use std::sync::Arc;

#[test]
fn a_row_set_kept_encoded_reads_as_its_rows_and_decodes_only_what_is_read() {
    use crate::cell::encode_row_at;
    let kind = Kind::Versioned {
        key: vec![0],
        begin: 1,
        end: 2,
    };
    // first-write sequences out of key order, ties broken by begin, then by key; a record
    // without a sequence sorts first
    let stored: Vec<(Row, Option<(u64, u64)>)> = (0..40i64)
        .map(|i| {
            let row = vec![
                Cell::Int(i),
                Cell::Int(100 - i % 5),
                if i % 7 == 0 {
                    Cell::Null
                } else {
                    Cell::Int(i % 4)
                },
                Cell::Text(format!("file-{i} é")),
            ];
            let seq = (i != 13).then_some(((i % 6) as u64, (i % 2) as u64));
            (row, seq)
        })
        .collect();
    let records: Vec<Bytes> = stored
        .iter()
        .map(|(row, seq)| match seq {
            Some(seq) => Bytes::from(encode_row_at(row, *seq)),
            None => Bytes::from(crate::cell::encode_row(row)),
        })
        .collect();
    let eager = RowSet::new(kinds::fixed::serve(stored, &kind, true));
    let lazy = RowSet::encoded(
        kinds::fixed::serve_encoded(records.iter().map(|r| (&b"k"[..], r)), &kind).unwrap(),
    );
    assert_eq!(lazy.len(), eager.len());
    assert_eq!(lazy.get(3), eager.get(3));
    assert_eq!(lazy.positions(2, &[1, 3]), eager.positions(2, &[1, 3]));
    assert_eq!(
        lazy.positions_between(0, 5, 17),
        eager.positions_between(0, 5, 17)
    );
    // the count, one row and the indexes decoded nothing else
    assert_eq!(lazy.decoded_for_test(), (false, 1));
    assert_eq!(*lazy, *eager);
    assert_eq!(lazy.get(39), eager.get(39));
    // a column with text cells has no index in either: no integer is equal to a text cell
    assert_eq!(lazy.positions(3, &[1]), Vec::<u32>::new());
    assert_eq!(eager.positions(3, &[1]), Vec::<u32>::new());
    // a damaged record is refused when the set is built, not served as a short row later
    let mut bad = records.clone();
    bad[5] = bad[5].slice(..bad[5].len() - 1);
    assert!(kinds::fixed::serve_encoded(bad.iter().map(|r| (&b"k"[..], r)), &kind).is_err());
}

#[test]
fn a_value_asked_for_at_once_is_computed_once_and_a_failure_is_not_kept() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // (the image serves a table's live rows through a once_cell OnceCell, for exactly this)
    let once = Arc::new(once_cell::sync::OnceCell::new());
    let computed = Arc::new(AtomicUsize::new(0));
    let askers: Vec<_> = (0..4)
        .map(|_| {
            let (once, computed) = (once.clone(), computed.clone());
            std::thread::spawn(move || {
                *once
                    .get_or_try_init(|| {
                        computed.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        Ok::<_, Error>(7)
                    })
                    .unwrap()
            })
        })
        .collect();
    for a in askers {
        assert_eq!(a.join().unwrap(), 7);
    }
    assert_eq!(computed.load(Ordering::SeqCst), 1);
    let failing = once_cell::sync::OnceCell::new();
    assert!(failing
        .get_or_try_init(|| Err(Error::Corrupt("damaged".into())))
        .is_err());
    assert_eq!(*failing.get_or_try_init(|| Ok::<_, Error>(3)).unwrap(), 3);
}

#[test]
fn history_held_answers_for_the_tables_found_and_scans_what_it_did_not_look_through() {
    let key = keys::history("main", "t", &[Cell::Int(1)], &Cell::Int(3), &Cell::Int(1));
    assert_eq!(
        HistoryHeld::table_of(&key).unwrap(),
        keys::history_prefix("main", "t")
    );
    let other = keys::history("o", "t", &[Cell::Int(1)], &Cell::Int(3), &Cell::Int(1));
    assert_eq!(
        HistoryHeld::table_of(&other).unwrap(),
        keys::history_prefix("o", "t")
    );
    let held = HistoryHeld {
        roots: [keys::history_root("main")].into(),
        tables: [keys::history_prefix("main", "t")].into(),
    };
    // a table found, one entity of it, and the whole root may hold records
    assert!(held.may_hold(&keys::history_prefix("main", "t")));
    assert!(held.may_hold(&keys::history_entity_prefix("main", "t", &[Cell::Int(1)])));
    assert!(held.may_hold(&keys::history_root("main")));
    // a table not found holds none, even one whose name extends the found one's
    assert!(!held.may_hold(&keys::history_prefix("main", "u")));
    assert!(!held.may_hold(&keys::history_prefix("main", "tt")));
    assert!(!held.may_hold(&keys::history_prefix("main", "")));
    // a lake whose root was not looked through is read
    assert!(held.may_hold(&keys::history_prefix("o", "u")));
}

/// The history ranges an image knows hold records include those of the ended versions it keeps
/// from the lake's tail: in what it writes into a checkpoint, and once it drops the tail (the
/// state holds them then). A reader of that checkpoint reads those ranges from the state.
#[test]
fn the_history_ranges_held_include_those_of_the_tail() {
    let held = crate::checkpoint::HeldRanges {
        roots: vec![keys::history_root("main")],
        tables: vec![keys::history_prefix("main", "t")],
    };
    let head = |batch| crate::head::Head {
        snapshot_id: Some(batch as i64),
        batch_count: batch,
    };
    let image = Image::from_sections(head(1), Vec::new(), 1, None).with_history_held(Some(held));
    let mut writes = crate::checkpoint::Writes::new();
    let ended = keys::history("main", "u", &[Cell::Int(1)], &Cell::Int(2), &Cell::Int(1));
    writes.insert(ended, Some(b"v".to_vec()));
    let unfolded = image.advance_unfolded(&writes, head(2)).unwrap();
    let want = vec![
        keys::history_prefix("main", "t"),
        keys::history_prefix("main", "u"),
    ];
    for image in [&unfolded, &unfolded.without_tail().unwrap()] {
        let ranges = block_on(image.held_ranges()).unwrap().unwrap();
        assert_eq!(ranges.roots, vec![keys::history_root("main")]);
        assert_eq!(ranges.tables, want);
    }
}

#[test]
fn spaces_are_key_prefixes() {
    let keys_in = [
        keys::sys_head(),
        keys::sys_table("main", "ducklake_snapshot"),
        keys::lake_head("other"),
        keys::snapshot("main", 3),
        keys::snapshot("other", 3),
        keys::current(
            "main",
            "ducklake_table",
            &[Cell::Int(1)],
            Some(&Cell::Int(2)),
        ),
        keys::current("other", "ducklake_table", &[Cell::Int(1)], None),
        keys::inline_chunk("main", "ducklake_inlined_data_1_1", 4),
        keys::inline_locator("main", "ducklake_inlined_data_1_1", &Cell::Int(0), 4),
    ];
    for k in keys_in {
        let Place::Space(s) = place_of(&k).unwrap() else {
            panic!("not a space")
        };
        assert!(k.starts_with(&s), "{k:?} / {s:?}");
    }
    let h = keys::history("other", "t", &[Cell::Int(1)], &Cell::Int(3), &Cell::Int(1));
    let Place::History(live) = place_of(&h).unwrap() else {
        panic!("not history")
    };
    assert_eq!(
        live,
        place_space(&keys::current_prefix("other", "t")).unwrap()
    );
    assert!(is_history_prefix(&keys::history_prefix("main", "t")).unwrap());
    assert!(!is_history_prefix(&keys::current_prefix("main", "t")).unwrap());
    assert!(is_history_prefix(&[]).is_err());
    // the end of a history range sorts after every key in it and before the next keyspace
    let end = history_range_end(&h).unwrap();
    assert!(end.as_slice() > h.as_slice());
    assert!(end.as_slice() < keys::snapshot("other", 0).as_slice());
    let main_h = keys::history("main", "t", &[Cell::Int(9)], &Cell::Int(3), &Cell::Int(1));
    let main_end = history_range_end(&main_h).unwrap();
    assert!(main_end.as_slice() > main_h.as_slice());
    assert!(main_end.as_slice() < keys::inline_chunk("main", "x", 0).as_slice());
    // two tables' spaces never nest
    let a = place_space(&keys::current_prefix("main", "t")).unwrap();
    let b = place_space(&keys::current_prefix("main", "t2")).unwrap();
    assert!(!a.starts_with(&b) && !b.starts_with(&a));
}

#[test]
fn a_snapshot_half_is_served_as_the_row_record_it_holds() {
    use crate::catalog::{SnapshotHalf, SnapshotRecord};
    let full = SnapshotRecord {
        snapshot: Some(vec![Cell::Int(7), Cell::Text("t".into())]),
        changes: Some(vec![Cell::Int(7), Cell::Text("created_table:x".into())]),
    };
    let only = SnapshotRecord {
        snapshot: Some(vec![Cell::Int(8)]),
        changes: None,
    };
    for record in [full, only] {
        let bytes = Bytes::from(record.encode());
        for half in [SnapshotHalf::Snapshot, SnapshotHalf::Changes] {
            let served = SnapshotRecord::half_record(&bytes, half)
                .unwrap()
                .map(|r| decode_row(&r).unwrap());
            assert_eq!(&served, record.half(half));
        }
        // a damaged record is refused whichever half is asked for, as decoding it is
        let cut = bytes.slice(..bytes.len() - 1);
        assert!(SnapshotRecord::decode(&cut).is_err());
        for half in [SnapshotHalf::Snapshot, SnapshotHalf::Changes] {
            assert!(SnapshotRecord::half_record(&cut, half).is_err());
        }
    }
}

// ---- the committed image on real SlateDB --------------------------------------------------------

/// A small deterministic generator (xorshift64*), so a failing seed can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

fn fresh_image(store: &Arc<Store>) -> Image {
    block_on(crate::store::image_from_records(store, None, None)).unwrap()
}

/// The rowids of the rows of `table` that `keep` picks, as a transaction sees them.
fn pick(t: &mut Transaction, table: &str, keep: impl Fn(&Row) -> bool) -> Vec<(i64, Row)> {
    let m = t.rows(M, table, true).unwrap();
    m.rows
        .iter()
        .enumerate()
        .filter(|(_, r)| keep(r))
        .map(|(i, r)| (rowid(m.id, i), r.clone()))
        .collect()
}

/// One random commit: a snapshot with catalog changes (new tables, renames, statistics,
/// inlined rows and their ends), or a maintenance commit (expired versions and snapshots,
/// scheduled files).
fn random_commit(store: &Arc<Store>, rng: &mut Rng, next_snapshot: &mut i64, next_id: &mut i64) {
    let mut t = store.begin();
    let head = t.head_snapshot(M).unwrap().unwrap();
    if rng.chance(25) {
        // maintenance: drop ended table versions, a snapshot below head, schedule or unschedule
        let ended = pick(&mut t, "ducklake_table", |r| !r[3].is_null());
        let gone: Vec<i64> = ended
            .iter()
            .filter(|_| rng.chance(50))
            .map(|(id, _)| *id)
            .collect();
        if !gone.is_empty() {
            t.stage_delete(M, "ducklake_table", gone).unwrap();
        }
        let old = pick(&mut t, "ducklake_snapshot", |r| r[0].as_int() < Some(head));
        if !old.is_empty() && rng.chance(50) {
            let (id, _) = old[rng.below(old.len())];
            t.stage_delete(M, "ducklake_snapshot", vec![id]).unwrap();
        }
        if rng.chance(50) {
            let scheduled = pick(&mut t, "ducklake_files_scheduled_for_deletion", |_| true);
            if let Some((id, _)) = scheduled.first() {
                t.stage_delete(M, "ducklake_files_scheduled_for_deletion", vec![*id])
                    .unwrap();
            }
        } else {
            *next_id += 1;
            t.stage_insert(
                M,
                "ducklake_files_scheduled_for_deletion",
                vec![gc_row(*next_id)],
            )
            .unwrap();
        }
        t.commit().unwrap();
        return;
    }
    let s = *next_snapshot;
    *next_snapshot += 1;
    t.stage_insert(M, "ducklake_snapshot", vec![snap(s)])
        .unwrap();
    t.stage_insert(M, "ducklake_snapshot_changes", vec![changes(s, "random")])
        .unwrap();
    for _ in 0..rng.below(3) {
        *next_id += 1;
        let name = format!("t{next_id}");
        t.stage_insert(
            M,
            "ducklake_table",
            vec![table_row(*next_id, s, None, &name)],
        )
        .unwrap();
        t.stage_insert(M, "ducklake_table_stats", vec![stats_row(*next_id, 0)])
            .unwrap();
    }
    let live = pick(&mut t, "ducklake_table", |r| {
        r[3].is_null() && r[2].as_int() < Some(s)
    });
    if !live.is_empty() && rng.chance(40) {
        // rename: end the live version and begin the next
        let (id, old) = live[rng.below(live.len())].clone();
        let mut ended = old.clone();
        ended[3] = Int(s);
        t.stage_update(M, "ducklake_table", vec![(id, ended)])
            .unwrap();
        let table_id = old[0].as_int().unwrap();
        t.stage_insert(
            M,
            "ducklake_table",
            vec![table_row(table_id, s, None, &format!("r{s}"))],
        )
        .unwrap();
    }
    let stats = pick(&mut t, "ducklake_table_stats", |_| true);
    if !stats.is_empty() && rng.chance(50) {
        let (id, mut r) = stats[rng.below(stats.len())].clone();
        r[1] = Int(rng.below(1000) as i64);
        t.stage_update(M, "ducklake_table_stats", vec![(id, r)])
            .unwrap();
    }
    if rng.chance(50) {
        let rows: Vec<Row> = (0..1 + rng.below(3))
            .map(|_| {
                *next_id += 1;
                inl(*next_id, s, None, "x")
            })
            .collect();
        t.stage_insert(M, INL, rows).unwrap();
    }
    let inlined = pick(&mut t, INL, |r| r[2].is_null() && r[1].as_int() < Some(s));
    if !inlined.is_empty() && rng.chance(40) {
        let (id, mut r) = inlined[rng.below(inlined.len())].clone();
        r[2] = Int(s);
        t.stage_update(M, INL, vec![(id, r)]).unwrap();
    }
    t.commit().unwrap();
}

/// The first commit of the random-commit tests: the inlined table and snapshot 1.
fn seed_inline_table(store: &Arc<Store>) {
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(1)])
        .unwrap();
    t.stage_insert(M, "ducklake_snapshot_changes", vec![changes(1, "inl")])
        .unwrap();
    t.commit().unwrap();
}

#[test]
fn an_image_advanced_by_commits_is_the_image_read_afresh() {
    for seed in 1..=12u64 {
        let store = new_lake(&mem_url("image-prop"));
        seed_inline_table(&store);
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let (mut next_snapshot, mut next_id) = (2, 100);
        for step in 0..40 {
            random_commit(&store, &mut rng, &mut next_snapshot, &mut next_id);
            let advanced = store.current_image().expect("a commit installs its image");
            let fresh = fresh_image(&store);
            assert!(
                advanced.same_records(&fresh),
                "seed {seed} step {step}: the advanced image differs from a fresh read\n\
                 advanced {advanced:?}\nfresh {fresh:?}"
            );
            // and what a transaction reads from each is the same, history included
            for table in ["ducklake_table", "ducklake_snapshot", INL] {
                let on_advanced = rows_of(&store, table, true);
                store.install_image_for_test(Arc::new(fresh_image(&store)));
                assert_eq!(
                    on_advanced,
                    rows_of(&store, table, true),
                    "seed {seed} step {step}: {table}"
                );
            }
        }
    }
}

/// An image read from a checkpoint and the commit log after it is the image read from the
/// records, at every head; a reader brought up to date by the log is too.
#[test]
fn an_image_from_a_checkpoint_and_the_log_is_the_image_read_afresh() {
    for seed in 1..=4u64 {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("lake").to_str().unwrap().to_string();
        let store = new_lake(&url);
        seed_inline_table(&store);
        store.write_checkpoint_for_test();
        let reader = Store::open(&url, true).unwrap();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let (mut next_snapshot, mut next_id) = (2, 100);
        for step in 0..25 {
            random_commit(&store, &mut rng, &mut next_snapshot, &mut next_id);
            if rng.chance(20) {
                store.write_checkpoint_for_test();
            }
            let head = store.head().unwrap();
            let fresh = fresh_image(&store).all_records();
            let loaded = block_on(crate::store::load_image(&store, None, head)).unwrap();
            assert_eq!(loaded.head(), head, "seed {seed} step {step}");
            assert!(
                loaded.checkpoint_batch().is_some(),
                "seed {seed} step {step}"
            );
            assert!(
                loaded.all_records() == fresh,
                "seed {seed} step {step}: the checkpoint and log image differs"
            );
            // the reader: a new transaction's image, once it has seen this head
            within_5s(&format!("the reader seeing {head:?}"), || {
                let pinned = reader.pin_image().unwrap();
                let seen = pinned.head() == head;
                assert!(
                    !seen || pinned.all_records() == fresh,
                    "seed {seed} step {step}: the reader's image differs"
                );
                seen
            });
        }
    }
}

/// A lake in a local directory with a checkpoint after its first table and a commit after it.
fn checkpointed_lake() -> (tempfile::TempDir, String, Arc<Store>) {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let store = new_lake(&url);
    commit_table(&store, 1, 1, "t1");
    store.write_checkpoint_for_test();
    commit_table(&store, 2, 2, "t2");
    store.settle_checkpoint_for_test();
    (dir, url, store)
}

/// A damaged checkpoint object is never used: the image is read from the records instead, and
/// the next checkpoint replaces it.
#[test]
fn a_damaged_checkpoint_is_refused_and_the_records_are_read() {
    let (_dir, url, store) = checkpointed_lake();
    let pointer = raw(&store, &keys::image_checkpoint());
    let (_, path) = crate::checkpoint::decode_pointer(&pointer[0].1).unwrap();
    let os = store.object_store_for_test();
    let object_path = object_store::path::Path::from(path.as_str());
    let mut bytes = block_on(async {
        use object_store::ObjectStoreExt;
        os.get(&object_path).await.unwrap().bytes().await.unwrap()
    })
    .to_vec();
    let last = bytes.len() / 2;
    bytes[last] ^= 0xff;
    block_on(async {
        use object_store::ObjectStoreExt;
        os.put(&object_path, bytes.into()).await.unwrap()
    });
    let head = store.head().unwrap();
    let loaded = block_on(crate::store::load_image(&store, None, head)).unwrap();
    assert!(loaded.checkpoint_batch().is_none());
    assert!(loaded.all_records() == fresh_image(&store).all_records());
    drop(store);
    // a new process reads the records too, and its next checkpoint replaces the damaged one
    let store = Store::open(&url, false).unwrap();
    assert_eq!(
        column_of(&store, "ducklake_table", false, "table_name").len(),
        2
    );
    commit_table(&store, 3, 3, "t3");
    store.write_checkpoint_for_test();
    let head = store.head().unwrap();
    let loaded = block_on(crate::store::load_image(&store, None, head)).unwrap();
    assert!(loaded.checkpoint_batch().is_some());
    assert!(loaded.all_records() == fresh_image(&store).all_records());
}

#[test]
fn a_pinned_transaction_does_not_see_a_later_commit() {
    let store = new_lake(&mem_url("pinned"));
    commit_table(&store, 1, 1, "t1");
    let mut early = store.begin();
    // pinned by its first read, of another table
    assert_eq!(early.head_snapshot(M).unwrap(), Some(1));
    commit_table(&store, 2, 2, "t2");
    let names = |t: &mut Transaction| {
        col(
            &t.rows(M, "ducklake_table", false).unwrap().rows,
            "ducklake_table",
            "table_name",
        )
    };
    assert_eq!(names(&mut early), vec![Text("t1".into())]);
    assert_eq!(early.head().unwrap().snapshot_id, Some(1));
    let mut late = store.begin();
    assert_eq!(names(&mut late), vec![Text("t1".into()), Text("t2".into())]);
    // the early transaction still cannot commit a snapshot over the later one
    early
        .stage_insert(M, "ducklake_snapshot", vec![snap(2)])
        .unwrap();
    let e = early.commit().unwrap_err();
    assert!(e.is_conflict() && e.to_string().contains("conflict"), "{e}");
}

#[test]
fn a_transaction_unchanged_in_a_table_reads_the_images_rows_themselves() {
    let store = new_lake(&mem_url("shared-rows"));
    commit_table(&store, 1, 1, "t1");
    let mut a = store.begin();
    let mut b = store.begin();
    let ma = a.rows(M, "ducklake_table", false).unwrap();
    let mb = b.rows(M, "ducklake_table", false).unwrap();
    assert_ne!(ma.id, 0);
    assert!(
        Arc::ptr_eq(&ma.rows.0, &mb.rows.0),
        "one decoded row set, shared"
    );
    // a staged change makes the transaction its own copy; the other keeps the image's
    a.stage_insert(M, "ducklake_table", vec![table_row(9, 1, None, "t9")])
        .unwrap();
    let ma2 = a.rows(M, "ducklake_table", false).unwrap();
    assert!(!Arc::ptr_eq(&ma2.rows.0, &mb.rows.0));
    assert_eq!(ma2.rows.len(), 2);
    assert_eq!(b.rows(M, "ducklake_table", false).unwrap().rows.len(), 1);
}

/// A writer on a local directory with table t1 at snapshot 1, a reader of it in the same
/// process (its own SlateDB reader, as in another process), and a reader transaction pinned
/// at snapshot 1.
fn writer_and_pinned_reader() -> (tempfile::TempDir, Arc<Store>, Arc<Store>, Transaction) {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").display().to_string();
    let writer = new_lake(&url);
    commit_table(&writer, 1, 1, "t1");
    let reader = Store::open(&url, true).unwrap();
    let mut pinned = reader.begin();
    assert_eq!(pinned.head_snapshot(M).unwrap(), Some(1));
    (dir, writer, reader, pinned)
}

#[test]
fn a_reader_follows_the_writer_one_whole_commit_at_a_time() {
    let (_dir, writer, reader, mut pinned) = writer_and_pinned_reader();
    for s in 2..=6 {
        commit_table(&writer, s, s, &format!("t{s}"));
    }
    // a transaction pinned before the commits reads its own view to the end, without error
    for _ in 0..3 {
        let rows = pinned.rows(M, "ducklake_table", false).unwrap();
        assert_eq!(rows.rows.len(), 1);
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    assert_eq!(
        pinned
            .rows(M, "ducklake_snapshot", false)
            .unwrap()
            .rows
            .len(),
        2
    );
    // a new transaction sees the writer's commits within the reader's poll interval
    within_5s("the reader seeing head 6", || {
        let mut t = reader.begin();
        let head = t.head_snapshot(M).unwrap();
        let tables = t.rows(M, "ducklake_table", false).unwrap().rows.len() as i64;
        // whatever head it pinned, the rows are exactly that head's
        assert_eq!(Some(tables), head, "a torn view");
        head == Some(6)
    });
}

/// Polls `done` until it holds, failing the test after five seconds.
fn within_5s(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn a_commit_checks_the_stores_own_head_not_only_the_image() {
    let store = new_lake(&mem_url("lost-install"));
    commit_table(&store, 1, 1, "t1");
    let stale = store.current_image().unwrap();
    let mut stale_txn = store.begin();
    assert_eq!(stale_txn.head_snapshot(M).unwrap(), Some(1));
    commit_table(&store, 2, 2, "t2");
    // as if the second commit landed but never installed its image (a panic between the two)
    store.lose_install_for_test(stale);
    // a commit from the old state is refused: the store's head says another commit landed
    stale_txn
        .stage_insert(M, "ducklake_snapshot", vec![snap(2)])
        .unwrap();
    let e = stale_txn.commit().unwrap_err();
    // (refused on the store's head before anything is created, not by the create)
    assert!(e.is_conflict() && e.to_string().contains("advanced"), "{e}");
    // and a new transaction rereads the store instead of trusting the stale image
    let mut t = store.begin();
    assert_eq!(t.head_snapshot(M).unwrap(), Some(2));
}

/// However a writer came to hold an image behind the store's head, the conflict its next commit
/// meets drops that image, so DuckLake's retry reads the head instead of conflicting forever.
#[test]
fn a_conflict_drops_an_image_behind_the_stores_head() {
    let store = new_lake(&mem_url("stale-behind-head"));
    commit_table(&store, 1, 1, "t1");
    let stale = store.current_image().unwrap();
    commit_table(&store, 2, 2, "t2");
    // installed without the unsure mark: pins trust it
    store.install_image_for_test(stale);
    let mut t = store.begin();
    assert_eq!(t.head_snapshot(M).unwrap(), Some(1));
    t.stage_insert(M, "ducklake_snapshot", vec![snap(2)])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert!(e.is_conflict(), "{e}");
    // the retry's transaction reads the store's head
    let mut retry = store.begin();
    assert_eq!(retry.head_snapshot(M).unwrap(), Some(2));
}

/// A hand edit: end table t1's version (table 1, begun at snapshot 1) at snapshot 1, the head,
/// minting none: it writes t1's history record.
fn end_t1_at_its_snapshot(writer: &Arc<Store>) {
    let mut t = writer.begin();
    let m = t.rows(M, "ducklake_table", false).unwrap();
    t.stage_update(
        M,
        "ducklake_table",
        vec![(rowid(m.id, 0), table_row(1, 1, Some(1), "t1"))],
    )
    .unwrap();
    t.commit().unwrap();
}

#[test]
fn a_reader_never_serves_a_version_twice_when_the_writer_ends_it_after_the_pin() {
    let (_dir, writer, reader, mut pinned) = writer_and_pinned_reader();
    end_t1_at_its_snapshot(&writer);
    // wait until the reader process state has the edit
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while reader.head().unwrap().batch_count < writer.head().unwrap().batch_count {
        assert!(
            std::time::Instant::now() < deadline,
            "the reader never moved"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // the pinned transaction's history read finds the ended version in the reader's latest
    // state; it must not add it beside the live version its image holds
    let rows = pinned.rows(M, "ducklake_table", true).unwrap();
    assert_eq!(rows.rows, vec![table_row(1, 1, None, "t1")]);
    // a new transaction sees the edit
    assert_eq!(
        rows_of(&reader, "ducklake_table", true),
        vec![table_row(1, 1, Some(1), "t1")]
    );
}

/// An attach starts from the newest checkpoint object, read ahead, without SlateDB; when that
/// object is not a checkpoint of this build (here, not a checkpoint at all) it opens SlateDB
/// and uses the object read ahead only when it is the one `image/checkpoint` names: an object
/// newer than the pointer is not.
#[test]
fn a_checkpoint_read_ahead_is_used_only_if_the_pointer_names_it() {
    let (_dir, url, store) = checkpointed_lake();
    let os = store.object_store_for_test();
    drop(store);
    // the pointed-at checkpoint, the newest, is read ahead and started from: the attach does
    // not read it again (gone by then, it would fall back to the records)
    let store = Store::open(&url, false).unwrap();
    let image = store.pin_image().unwrap();
    let batch = image.checkpoint_batch().expect("started from a checkpoint");
    let object = object_store::path::Path::from(crate::checkpoint::object_path(batch));
    let kept = block_on(async {
        use object_store::ObjectStoreExt;
        let bytes = os.get(&object).await.unwrap().bytes().await.unwrap();
        os.delete(&object).await.unwrap();
        bytes
    });
    assert!(!store.is_folder(), "no writer before a commit");
    let pointer = raw(&store, &keys::image_checkpoint());
    let (pointed, _) = crate::checkpoint::decode_pointer(&pointer[0].1).unwrap();
    assert_eq!(pointed, batch);
    assert_eq!(image.head(), store.head().unwrap());
    drop((image, store));
    // the same checkpoint rewritten as naming another store format is not started from: the
    // attach opens SlateDB, and its load uses the object read ahead, which the pointer names
    // (it does not read it again: gone by then, it would fall back to the records)
    let old = crate::checkpoint::decode_checkpoint(kept.clone(), object.as_ref()).unwrap();
    let rewritten = crate::checkpoint::encode_checkpoint(
        old.head,
        "moraine-store-0",
        None,
        old.sections.into_iter().collect(),
        crate::compression::DEFAULT,
    );
    block_on(async {
        use object_store::ObjectStoreExt;
        os.put(&object, rewritten.into()).await.unwrap()
    });
    let store = Store::open(&url, false).unwrap();
    assert_eq!(
        store.prefetched_path_for_test().as_deref(),
        Some(object.as_ref())
    );
    block_on(async {
        use object_store::ObjectStoreExt;
        os.delete(&object).await.unwrap()
    });
    let image = store.pin_image().unwrap();
    assert_eq!(image.checkpoint_batch(), Some(batch));
    assert_eq!(image.head(), store.head().unwrap());
    drop((image, store));
    block_on(async {
        use object_store::ObjectStoreExt;
        os.put(&object, kept.into()).await.unwrap()
    });
    // a newer object the pointer does not name is read ahead, and refused
    let stray = object_store::path::Path::from(crate::checkpoint::object_path(batch + 1000));
    block_on(async {
        use object_store::ObjectStoreExt;
        os.put(&stray, b"not a checkpoint".to_vec().into())
            .await
            .unwrap()
    });
    let store = Store::open(&url, false).unwrap();
    assert_eq!(
        store.prefetched_path_for_test().as_deref(),
        Some(stray.as_ref())
    );
    let image = store.pin_image().unwrap();
    assert_eq!(image.checkpoint_batch(), Some(batch));
    assert!(image.all_records() == fresh_image(&store).all_records());
    assert_eq!(
        column_of(&store, "ducklake_table", false, "table_name").len(),
        2
    );
}

/// A table whose every version has ended has no live record in the image: its rows with
/// history are read from the store once per image and shared by the transactions on it, and
/// the image after a commit that ends another version reads them afresh.
#[test]
fn a_table_with_only_ended_versions_reads_its_history_once_per_image() {
    let store = new_lake(&mem_url("history-only"));
    commit_table(&store, 1, 1, "t1");
    commit_table(&store, 2, 2, "t2");
    // hand edits end t1's and t2's versions at the head snapshot
    end_table(&store, 0, (1, 1, "t1"), 2);
    end_table(&store, 0, (2, 2, "t2"), 2);
    // no live ducklake_table record is left: the space is gone, the history is in the store
    let mut a = store.begin();
    let mut b = store.begin();
    let ra = a.rows(M, "ducklake_table", true).unwrap();
    let rb = b.rows(M, "ducklake_table", true).unwrap();
    assert_eq!(ra.rows.len(), 2);
    assert!(
        Arc::ptr_eq(&ra.rows.0, &rb.rows.0),
        "one history read, shared"
    );
    assert!(a.rows(M, "ducklake_table", false).unwrap().rows.is_empty());
    drop((a, b));
    // the next image holds a third ended version, read afresh
    commit_table(&store, 3, 3, "t3");
    end_table(&store, 0, (3, 3, "t3"), 3);
    let mut c = store.begin();
    let rc = c.rows(M, "ducklake_table", true).unwrap();
    assert_eq!(
        col(&rc.rows, "ducklake_table", "table_id"),
        vec![Int(1), Int(2), Int(3)]
    );
}

/// An attach serves the live rows of the tables DuckLake plans every query with on a
/// background thread: the rows a cold read of the same checkpoint serves, and the very rows a
/// transaction then reads; the per-file tables it reads only to prune are left for their
/// first use.
#[test]
fn an_attach_serves_the_planning_tables_in_the_background_as_a_cold_read_would() {
    let (_dir, url, store) = checkpointed_lake();
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    t.create_table(def("ducklake_file_column_stats")).unwrap();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(3)])
        .unwrap();
    t.stage_insert(M, INL, vec![inl(0, 3, None, "x")]).unwrap();
    // tables DuckLake reads only to prune by a filter, or for maintenance: not warmed
    let file_stats = [
        ("data_file_id", Int(1)),
        ("table_id", Int(1)),
        ("column_id", Int(1)),
    ];
    t.stage_insert(
        M,
        "ducklake_file_column_stats",
        vec![row("ducklake_file_column_stats", &file_stats)],
    )
    .unwrap();
    t.stage_insert(M, "ducklake_files_scheduled_for_deletion", vec![gc_row(1)])
        .unwrap();
    t.commit().unwrap();
    store.write_checkpoint_for_test();
    drop(store);
    let store = Store::open(&url, false).unwrap();
    let image = store.pin_image().unwrap();
    let planned = ["ducklake_snapshot", "ducklake_table", INL];
    within_5s("the warm-up", || {
        let served = image.served_live_for_test();
        planned.iter().all(|t| served.contains_key(*t))
    });
    // a second warm-up waits for the first one's work in progress and serves what it left
    image.warm();
    let served = image.served_live_for_test();
    assert!(!served.contains_key("ducklake_file_column_stats"));
    for name in served.keys() {
        assert!(
            crate::tables::read_to_plan(name) || crate::catalog::is_inlined_table_name(name),
            "{name} was served"
        );
    }
    let head = store.head().unwrap();
    let cold = block_on(crate::store::load_image(&store, None, head)).unwrap();
    assert!(cold.checkpoint_batch().is_some());
    assert!(cold.served_live_for_test().is_empty());
    let catalog = cold.catalog().unwrap();
    for name in planned {
        let def = &catalog.tables[&(M.to_string(), name.to_string())];
        let kind = crate::catalog::kind_of(def).unwrap();
        let rows = block_on(cold.rows(&store.backend(), def, &kind, false)).unwrap();
        assert!(!rows.is_empty(), "{name}");
        assert_eq!(**rows, **served[name], "{name}");
        let m = store.begin().rows(M, name, false).unwrap();
        assert!(Arc::ptr_eq(&m.rows.0, &served[name]), "{name}: read again");
    }
}

/// A checkpoint section holds its decoded space only while an image does: once a commit has
/// replaced the space and the images before it are gone, the decoded copy is freed, though the
/// images after the commit still share the section.
#[test]
fn a_decoded_section_lives_only_as_long_as_an_image_holds_it() {
    let (_dir, url, store) = checkpointed_lake();
    store.write_checkpoint_for_test();
    drop(store);
    let store = Store::open(&url, false).unwrap();
    let prefix = crate::image::place_space_for_test(&keys::current_prefix(M, "ducklake_table"));
    let before = store.pin_image().unwrap();
    assert_eq!(rows_of(&store, "ducklake_table", false).len(), 2);
    assert!(before.section_decoded_for_test(&prefix));
    commit_table(&store, 3, 3, "t3");
    let after = store.current_image().unwrap();
    assert_eq!(after.checkpoint_batch(), before.checkpoint_batch());
    assert!(
        before.section_decoded_for_test(&prefix),
        "held by the image before"
    );
    drop(before);
    // (the attach's warm-up may hold the first image a moment longer)
    within_5s("the replaced space to be freed", || {
        !after.section_decoded_for_test(&prefix)
    });
    assert_eq!(rows_of(&store, "ducklake_table", false).len(), 3);
}

/// A history read through the snapshot of a folder whose writer was fenced (or closed) reads
/// the reader's state instead, and waits until that state holds every commit of the image:
/// before, it would miss the ended versions of commits the reader has not seen yet.
#[test]
fn a_history_read_through_a_closed_snapshot_waits_for_the_state_to_hold_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").display().to_string();
    let writer = new_lake(&url);
    commit_table(&writer, 1, 1, "t1");
    // a reader that looks for new commits every 3 s: it stays behind the next commit a while
    let reader = Store::open_with(&url, true, &[("reader_poll_ms".into(), "3000".into())]).unwrap();
    assert_eq!(table_names(&reader).len(), 1);
    end_t1_at_its_snapshot(&writer);
    let image = writer.current_image().unwrap();
    assert!(
        image.snapshot_seq().is_some(),
        "read through the writer's snapshot"
    );
    // the writer goes away: its snapshot cannot be read any more
    writer.close().unwrap();
    let key = keys::history(M, "ducklake_table", &[Int(1)], &Int(1), &Int(1));
    let got = block_on(image.get(&reader.backend(), &key)).unwrap();
    assert!(
        got.is_some(),
        "the ended version, once the reader's state holds the edit"
    );
}
