//! Several writers of one lake (RFC 0004 v3): each commit is decided by its commit object, the
//! loser of a race gets DuckLake's retryable conflict, a fenced folder goes on without the role,
//! and an attach takes the role when nobody folds.

use super::*;
use crate::cell::Cell::{Int, Text};
use crate::testing::lakes::*;
use crate::testing::*;

/// A second writer on the same directory, as another process would open it, holding the
/// folder role (taken at once, as its first commit would).
fn second_writer(dir: &std::path::Path) -> Arc<Store> {
    let fs = object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap();
    let store = Store::open_on(Arc::new(fs), false, "local://second").unwrap();
    store.take_folder_role().unwrap();
    store
}

/// Waits until `store`, whose folder role another attach took, reads `tables` and goes on
/// without the role (each pin reads the tail; folding it is what tells a fenced folder).
fn goes_on_without_the_role(store: &Arc<Store>, tables: &[&str]) {
    let want: Vec<_> = tables.iter().map(|t| Text(t.to_string())).collect();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while table_names(store) != want || store.is_folder() {
        assert!(
            std::time::Instant::now() < deadline,
            "never went on without the role"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A new lake in a new directory: the directory, its URL and the lake's first writer.
fn lake_in_a_new_dir() -> (tempfile::TempDir, String, Arc<Store>) {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().display().to_string();
    let a = new_lake(&url);
    (dir, url, a)
}

/// A lake in a new directory (and its URL) with `a`, its first writer, going on without the
/// folder role that `b`, a second writer, took and committed table `by_b` with.
fn a_plain_writer_beside_a_folder() -> (tempfile::TempDir, String, Arc<Store>, Arc<Store>) {
    let (dir, url, a) = lake_in_a_new_dir();
    let b = second_writer(dir.path());
    commit_table(&b, 1, 1, "by_b");
    // `a` learns it was fenced, and goes on without the role
    goes_on_without_the_role(&a, &["by_b"]);
    (dir, url, a, b)
}

/// Snapshot `id` creating table `table_id` in `t`, staged, not committed.
fn stage_table(t: &mut crate::txn::Transaction, id: i64, table_id: i64, name: &str) {
    t.stage_insert(M, "ducklake_snapshot", vec![snap(id)])
        .unwrap();
    t.stage_insert(
        M,
        "ducklake_snapshot_changes",
        vec![changes(id, "created_table")],
    )
    .unwrap();
    t.stage_insert(
        M,
        "ducklake_table",
        vec![table_row(table_id, id, None, name)],
    )
    .unwrap();
}

#[test]
fn two_writers_commit_in_turn_and_the_loser_of_a_race_gets_a_conflict() {
    let (dir, url, a) = lake_in_a_new_dir();
    let b = second_writer(dir.path());
    assert!(b.is_folder());
    // each commits in turn, seeing the other's commits
    // (a pin reads the tail once per poll interval: a writer may begin a poll interval behind,
    // and its commit then conflicts and is retried, as the race below shows)
    commit_table(&a, 1, 1, "a1");
    std::thread::sleep(DEFAULT_READER_POLL);
    commit_table(&b, 2, 2, "b1");
    std::thread::sleep(DEFAULT_READER_POLL);
    commit_table(&a, 3, 3, "a2");
    std::thread::sleep(DEFAULT_READER_POLL);
    commit_table(&b, 4, 4, "b2");
    // a race: both transactions read the same head; the store lets one commit it
    std::thread::sleep(DEFAULT_READER_POLL);
    let mut ta = a.begin();
    let mut tb = b.begin();
    assert_eq!(ta.head_snapshot(M).unwrap(), Some(4));
    assert_eq!(tb.head_snapshot(M).unwrap(), Some(4));
    stage_table(&mut ta, 5, 5, "a_won");
    stage_table(&mut tb, 5, 6, "b_lost");
    ta.commit().unwrap();
    let e = tb.commit().unwrap_err();
    assert!(e.is_conflict(), "{e}");
    assert!(e.duckdb_message().contains("conflict"), "{e}");
    // DuckLake's retry: a new transaction on the new head
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut t = b.begin();
        let head = t.head_snapshot(M).unwrap().unwrap();
        stage_table(&mut t, head + 1, 6, "b_retried");
        match t.commit() {
            Ok(()) => break,
            Err(e) if e.is_conflict() && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(50))
            }
            Err(e) => panic!("{e}"),
        }
    }
    let all: Vec<_> = ["a1", "b1", "a2", "b2", "a_won", "b_retried"]
        .into_iter()
        .map(|n| Text(n.into()))
        .collect();
    assert_eq!(table_names(&b), all);
    std::thread::sleep(DEFAULT_READER_POLL);
    assert_eq!(table_names(&a), all);
    a.close().unwrap();
    b.close().unwrap();
    drop((a, b));
    let again = Store::open(&url, true).unwrap();
    assert_eq!(table_names(&again), all);
}

/// A plain writer committing beside a folder that folds (at its own pins, once per poll
/// interval) reads its SlateDB state afresh each time its image is far past it, and never
/// takes the role: a state that lags because it was read long ago is not a folder that
/// stopped.
#[test]
fn a_plain_writer_never_takes_the_role_from_a_folder_that_folds() {
    let (dir, _url, a, b) = a_plain_writer_beside_a_folder();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let folding = {
        let (b, stop) = (b.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let _ = table_names(&b);
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        })
    };
    for i in 0..3 * role::TAKE_OVER_AFTER as i64 {
        commit_table(&a, 2 + i, 2 + i, &format!("t{i}"));
        assert!(
            !a.is_folder(),
            "took the role from a folder that folds, at commit {i}"
        );
        // the folder keeps up: its durable state (what a reader opened now reads) is never
        // more than 16 commits behind
        if i % 8 == 7 {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            let head = a.head().unwrap().batch_count;
            let fs = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
            let durable = Store::open_on(Arc::new(fs), true, "local://durable").unwrap();
            while block_on(durable.read_head()).unwrap().batch_count + 16 < head {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the folder stopped folding"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
                let fresh = block_on(async {
                    match &*durable.backend() {
                        Backend::Reader(r) => r.refresh(r.read_at()).await,
                        Backend::Writer(..) => unreachable!("a reader"),
                    }
                });
                fresh.unwrap();
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    folding.join().unwrap();
    assert!(b.is_folder());
}

#[test]
fn a_writer_takes_the_folder_role_when_nobody_folds() {
    let (_dir, url, a, b) = a_plain_writer_beside_a_folder();
    // the folder detaches: nobody folds what `a` commits, until its tail is long
    b.close().unwrap();
    drop(b);
    let folded = |s: &Arc<Store>| block_on(s.read_head()).unwrap().batch_count;
    let start = folded(&a);
    for i in 0..role::TAKE_OVER_AFTER as i64 + 2 {
        commit_table(&a, 2 + i, 2 + i, &format!("t{i}"));
    }
    // once its state, read afresh in the background, shows nobody folds
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !a.is_folder() {
        assert!(std::time::Instant::now() < deadline, "took the role");
        let _ = table_names(&a);
        std::thread::sleep(DEFAULT_READER_POLL);
    }
    let head = a.head().unwrap();
    assert!(head.batch_count > start + role::TAKE_OVER_AFTER);
    assert_eq!(folded(&a), head.batch_count, "and folded the tail");
    a.close().unwrap();
    drop(a);
    let again = Store::open(&url, true).unwrap();
    assert_eq!(
        table_names(&again).len(),
        role::TAKE_OVER_AFTER as usize + 3
    );
}

#[test]
fn a_reclaim_on_a_plain_writer_takes_the_folder_role() {
    let (_dir, _url, a, _b) = a_plain_writer_beside_a_folder();
    let reclaimed = a.reclaim().unwrap();
    assert!(a.is_folder());
    assert_eq!(reclaimed.head_batch, a.head().unwrap().batch_count);
    assert_eq!(table_names(&a), vec![Text("by_b".into())]);
}

/// An attach that takes the folder role after its open upgrades the store's marker as a
/// writer's open does (RFC 0013): it writes the current formats from then on.
#[test]
fn a_plain_writer_that_takes_the_folder_role_upgrades_the_format() {
    let (_dir, _url, a, b) = a_plain_writer_beside_a_folder();
    b.put_raw(&keys::sys_format(), b"moraine-store-3").unwrap();
    a.reclaim().unwrap();
    assert!(a.is_folder());
    assert_eq!(
        raw(&a, &keys::sys_format())[0].1,
        crate::store::STORE_FORMAT.as_bytes()
    );
}

/// A commit object is deleted only a minute after it was written, so a commit on a view of the
/// tail older than half that confirms it first, by the object after it and a listing: a later
/// commit refuses it (DuckLake retries on a view read now), so the attach never creates the name
/// of a commit that was folded and deleted.
#[test]
fn a_view_the_tail_has_not_confirmed_lately_commits_nothing() {
    let (dir, _url, a) = lake_in_a_new_dir();
    commit_table(&a, 1, 1, "t1");
    // a long statement: its view is confirmed at commit, and it lands
    a.age_tail_confirmation_for_test(log::DELETE_AFTER);
    commit_table(&a, 2, 2, "t2");

    // a plain writer whose view is at batch B while the folder commits B+1..=B+3, and B+1 and
    // B+2 are deleted (as a checkpoint would a minute later)
    let b = second_writer(dir.path());
    goes_on_without_the_role(&a, &["t1", "t2"]);
    let view = a.head().unwrap().batch_count;
    for i in 3..=5 {
        commit_table(&b, i, i, &format!("t{i}"));
    }
    for batch in view + 1..=view + 2 {
        std::fs::remove_file(dir.path().join(checkpoint::log_object_path(batch))).unwrap();
    }
    a.age_tail_confirmation_for_test(log::DELETE_AFTER);
    // its reads go on, but it creates no commit on the view the tail cannot confirm
    let _ = table_names(&a);
    match commit_table_result(&a, 6, 6, "on_a_stale_view") {
        Err(e) => {
            assert!(
                e.is_conflict() && e.to_string().contains("since this transaction began"),
                "{e}"
            );
            // DuckLake's retries: each reads the tail (the listing keeps the view
            // unconfirmed) until the reader of the folded state has caught up; then the commit
            // lands after the folder's
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                std::thread::sleep(DEFAULT_READER_POLL);
                match commit_table_result(&a, 6, 6, "on_a_stale_view") {
                    Ok(()) => break,
                    Err(e) if e.is_conflict() && std::time::Instant::now() < deadline => {}
                    Err(e) => panic!("{e}"),
                }
            }
        }
        // On a loaded machine the reader of the folded state (SlateDB's WAL, written out
        // within a second) can catch up before this statement pins: its view is then not
        // stale, and it lands. What must hold either way is checked below: no commit took a
        // deleted commit's name, and every commit is there once.
        Ok(()) => {}
    }
    assert!(
        !dir.path()
            .join(checkpoint::log_object_path(view + 1))
            .exists(),
        "no commit took a deleted commit's name"
    );
    std::thread::sleep(DEFAULT_READER_POLL);
    let want: Vec<_> = ["t1", "t2", "t3", "t4", "t5", "on_a_stale_view"]
        .into_iter()
        .map(|n| Text(n.into()))
        .collect();
    assert_eq!(table_names(&b), want);
}

/// DuckLake does not retry its expiry and cleanup commits, which insert no snapshot: one that
/// loses its race goes over the commits made since it began when they wrote none of its keys
/// (as on Postgres, where it changes rows nobody else touched), on a plain writer and on the
/// folder alike; one that touched a key they wrote is still a conflict.
#[test]
fn a_commit_inserting_no_snapshot_goes_over_commits_that_touched_other_rows() {
    let (_dir, url, a, b) = a_plain_writer_beside_a_folder();
    let gc_files = |s: &Arc<Store>| {
        column_of(
            s,
            "ducklake_files_scheduled_for_deletion",
            false,
            "data_file_id",
        )
    };
    std::thread::sleep(DEFAULT_READER_POLL);
    // each of the two loses a race to a commit of the other, then goes over it
    for (n, (loser, winner)) in [(&a, &b), (&b, &a)].into_iter().enumerate() {
        let n = n as i64;
        std::thread::sleep(DEFAULT_READER_POLL);
        let mut maintenance = loser.begin();
        let mut insert = winner.begin();
        let head = maintenance.head_snapshot(M).unwrap().unwrap();
        assert_eq!(insert.head_snapshot(M).unwrap(), Some(head));
        maintenance
            .stage_insert(
                M,
                "ducklake_files_scheduled_for_deletion",
                vec![gc_row(10 + n)],
            )
            .unwrap();
        stage_table(&mut insert, head + 1, head + 1, &format!("won{n}"));
        insert.commit().unwrap();
        maintenance.commit().unwrap();
        assert_eq!(
            loser.head().unwrap().snapshot_id,
            Some(head + 1),
            "the head keeps the winner's snapshot"
        );
        // the loser's image holds the commit it went over, with no poll between
        assert!(
            table_names(loser).contains(&Text(format!("won{n}"))),
            "{:?}",
            table_names(loser)
        );
    }
    std::thread::sleep(DEFAULT_READER_POLL);
    assert_eq!(gc_files(&a), vec![Int(10), Int(11)]);
    assert_eq!(
        table_names(&b),
        ["by_b", "won0", "won1"].map(|n| Text(n.into())).to_vec()
    );
    // two commits of the same row: the loser conflicts, and nothing of it lands
    std::thread::sleep(DEFAULT_READER_POLL);
    let mut first = a.begin();
    let mut second = b.begin();
    let _ = (
        first.head_snapshot(M).unwrap(),
        second.head_snapshot(M).unwrap(),
    );
    for t in [&mut first, &mut second] {
        t.stage_insert(M, "ducklake_files_scheduled_for_deletion", vec![gc_row(20)])
            .unwrap();
    }
    second
        .stage_insert(M, "ducklake_files_scheduled_for_deletion", vec![gc_row(21)])
        .unwrap();
    first.commit().unwrap();
    let e = second.commit().unwrap_err();
    assert!(e.is_conflict(), "{e}");
    std::thread::sleep(DEFAULT_READER_POLL);
    assert_eq!(gc_files(&b), vec![Int(10), Int(11), Int(20)]);
    a.close().unwrap();
    b.close().unwrap();
    drop((a, b));
    let again = Store::open(&url, true).unwrap();
    assert_eq!(gc_files(&again), vec![Int(10), Int(11), Int(20)]);
    assert_eq!(table_names(&again).len(), 3);
}

/// While other writers are about, a read-write attach begins each transaction on the lake's
/// head (it reads the tail at every pin, as DuckLake reads a server's head), so that DuckLake's
/// first try at a commit is not spent on a view already passed; alone, it reads the tail once
/// per poll interval.
#[test]
fn a_writer_that_met_another_begins_each_transaction_on_the_head() {
    let (_dir, _url, a, b) = a_plain_writer_beside_a_folder();
    commit_table(&b, 2, 2, "b2");
    std::thread::sleep(DEFAULT_READER_POLL);
    assert_eq!(
        table_names(&a).len(),
        2,
        "a read the tail and met b's commit"
    );
    for i in 3..6 {
        commit_table(&b, i, i, &format!("b{i}"));
        // at once: no poll interval between b's commit and a's next transaction
        assert_eq!(
            table_names(&a).len() as i64,
            i,
            "a's next transaction is on the head"
        );
    }
}

/// A transaction of a folder whose role another attach took meanwhile reads its pinned view to
/// the end, history included: a read that meets the fence goes on through a reader of the lake.
#[test]
fn a_fenced_folder_s_open_transaction_reads_its_history_to_the_end() {
    let (dir, _url, a) = lake_in_a_new_dir();
    commit_table(&a, 1, 1, "t1");
    // an ended version: the history read below has a record to read through the fenced writer
    commit_table(&a, 2, 2, "t0");
    end_table(&a, 1, (2, 2, "t0"), 2);
    let mut t = a.begin();
    assert_eq!(t.head_snapshot(M).unwrap(), Some(2));
    let b = second_writer(dir.path());
    commit_table(&b, 3, 3, "t2");
    // `a`'s writer learns of the fence at its next manifest poll, and closes
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while a.close_reason().is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "a never learned of the fence"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        a.is_folder(),
        "not demoted yet: nothing of `a` has run since"
    );
    let rows = t.rows(M, "ducklake_table", true).unwrap();
    assert_eq!(
        col(&rows.rows, "ducklake_table", "table_name"),
        vec![Text("t1".into()), Text("t0".into())]
    );
    assert!(!a.is_folder(), "went on without the role");
}

/// RFC 0004, "Folds written out together": a folder committing alone writes one commit object
/// per commit and reads none between its commits (its own create is its read of the tail), and
/// SlateDB's WAL goes out once a second or every 16 folds, not once per commit.
#[test]
fn a_folder_committing_alone_reads_no_tail_and_writes_its_wal_out_in_batches() {
    let mem = Arc::new(object_store::memory::InMemory::new());
    let (faulty, store) = crate::testing::faulty::faulty_lake(&mem);
    faulty.record_requests();
    for i in 0..10 {
        // (commits 60 ms apart: a WAL flushed every 50 ms would write one object each)
        std::thread::sleep(std::time::Duration::from_millis(60));
        commit_table(&store, 2 + i, 2 + i, &format!("t{i}"));
    }
    let recorded = faulty.recorded();
    let count = |op: &str, under: &str| {
        recorded
            .iter()
            .filter(|r| r.starts_with(&format!("{op} ")) && r.contains(under))
            .count()
    };
    assert_eq!(count("put", "moraine/log/"), 10, "{recorded:?}");
    assert_eq!(count("get", "moraine/log/"), 0, "{recorded:?}");
    assert!(count("put", "wal/") <= 2, "{recorded:?}");
    assert_eq!(table_names(&store).len(), 11);
}

/// A lake in memory whose folder just wrote a checkpoint of its head (table `kept`): the lake
/// a read-write attach starts from without SlateDB.
fn folder_at_a_checkpoint(mem: &Arc<object_store::memory::InMemory>) -> Arc<Store> {
    let (_, folder) = crate::testing::faulty::faulty_lake(mem);
    folder.write_checkpoint_for_test();
    folder
}

/// A read-write attach of a lake with a checkpoint starts from it as a `READ_ONLY` one does
/// (RFC 0009): the same three requests, no SlateDB, no fence of the folder. Its first commit
/// takes the folder role (opening SlateDB's writer, fencing the holder, which goes on without
/// it) and lands; the two read each other's commits.
#[test]
fn a_read_write_attach_opens_slatedb_s_writer_only_at_its_first_commit() {
    use crate::testing::faulty::FaultyStore;
    let mem = Arc::new(object_store::memory::InMemory::new());
    let folder = folder_at_a_checkpoint(&mem);
    let seen = FaultyStore::new(mem.clone());
    seen.record_requests();
    let writer = Store::open_on(seen.clone(), false, "faulty://deferred").unwrap();
    assert_eq!(table_names(&writer), vec![Text("kept".into())]);
    assert_eq!(writer.head().unwrap(), folder.head().unwrap());
    let requests = seen.recorded();
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(
        requests.iter().all(|r| r.contains("moraine/")),
        "nothing of SlateDB: {requests:?}"
    );
    assert!(!writer.is_folder() && folder.is_folder());
    assert_eq!(writer.status().unwrap().writer_epoch, None);

    let checkpoints = || {
        block_on(async {
            use futures::TryStreamExt;
            let dir = object_store::path::Path::from(checkpoint::OBJECT_DIR);
            let listed = mem.list(Some(&dir)).try_collect::<Vec<_>>().await.unwrap();
            let mut names: Vec<String> =
                listed.into_iter().map(|m| m.location.to_string()).collect();
            names.sort();
            names
        })
    };
    let before = checkpoints();
    commit_table(&writer, 2, 2, "by_the_writer");
    assert!(writer.is_folder(), "its first commit took the role");
    // the checkpoint it started from counts: the next is due 64 commits after it, not now
    writer.settle_checkpoint_for_test();
    assert_eq!(checkpoints(), before, "no checkpoint at the first commit");
    goes_on_without_the_role(&folder, &["kept", "by_the_writer"]);
    commit_table(&folder, 3, 3, "by_the_old_folder");
    let all = vec![
        Text("kept".into()),
        Text("by_the_writer".into()),
        Text("by_the_old_folder".into()),
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while table_names(&writer) != all {
        assert!(std::time::Instant::now() < deadline, "never read it");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }

    // an attach that takes the role before any commit (a reclaim does) reads ended versions
    // through the folder's snapshot from then on, which a reclaim waits for
    writer.write_checkpoint_for_test();
    let third = Store::open_on(mem.clone(), false, "memory://third").unwrap();
    assert_eq!(table_names(&third), all);
    assert_eq!(third.current_image().unwrap().snapshot_seq(), None);
    third.take_folder_role().unwrap();
    let image = third.pin_image().unwrap();
    assert!(image.snapshot_seq().is_some(), "a folder's image");
    assert_eq!(third.oldest_open_snapshot(), image.snapshot_seq());
}

/// A read-write attach whose first commit cannot take the folder role (the store refuses
/// writes) fails that commit with the store's error, not a conflict, and writes nothing; once
/// the store takes writes again its next commit takes the role and lands.
#[test]
fn a_first_commit_that_cannot_take_the_role_writes_nothing() {
    use crate::testing::faulty::FaultyStore;
    let mem = Arc::new(object_store::memory::InMemory::new());
    let folder = folder_at_a_checkpoint(&mem);
    let faulty = FaultyStore::new(mem.clone());
    let writer = Store::open_on_limited(
        faulty.clone(),
        false,
        "faulty://refused",
        std::time::Duration::from_secs(2),
    )
    .unwrap();
    assert_eq!(table_names(&writer), vec![Text("kept".into())]);
    let before = everything(&folder);
    faulty.fail_writes(true, false);
    let e = commit_table_result(&writer, 2, 2, "refused").unwrap_err();
    assert!(!e.is_conflict(), "{e:?}");
    assert!(!writer.is_folder());
    assert!(folder.is_folder(), "the holder was not fenced");
    assert_eq!(everything(&folder), before, "nothing written");
    faulty.fail_writes(false, false);
    commit_table(&writer, 2, 2, "landed");
    assert!(writer.is_folder());
    assert_eq!(
        table_names(&writer),
        vec![Text("kept".into()), Text("landed".into())]
    );
}

/// A read-write attach that started from a checkpoint of this build's format, on a store whose
/// marker another build has since set to a format this one does not write: its first commit
/// opens SlateDB's writer, finds the marker and refuses, naming it, without becoming the folder
/// or writing anything; the next commit refuses the same way.
#[test]
fn a_first_commit_on_a_store_of_another_format_is_refused_and_writes_nothing() {
    let mem = Arc::new(object_store::memory::InMemory::new());
    let folder = folder_at_a_checkpoint(&mem);
    folder
        .put_raw(&keys::sys_format(), b"moraine-store-9")
        .unwrap();
    let head = folder.head().unwrap();
    let seen = crate::testing::faulty::FaultyStore::new(mem.clone());
    let writer = Store::open_on(seen.clone(), false, "faulty://older-build").unwrap();
    assert_eq!(table_names(&writer), vec![Text("kept".into())]);
    let e = commit_table_result(&writer, 2, 2, "refused").unwrap_err();
    assert!(
        e.to_string().contains("moraine-store-9") && !e.is_conflict(),
        "{e}"
    );
    assert!(!writer.is_folder(), "no folder of a store it cannot write");
    // it opened SlateDB's writer to find out (the holder was fenced, and goes on without the
    // role); the next commit is refused without opening it again
    goes_on_without_the_role(&folder, &["kept"]);
    seen.record_requests();
    let again = commit_table_result(&writer, 2, 2, "refused").unwrap_err();
    assert_eq!(again.to_string(), e.to_string());
    assert!(!writer.is_folder());
    let requests = seen.recorded();
    assert!(
        !requests.iter().any(|r| r.contains("manifest/")),
        "SlateDB opened again: {requests:?}"
    );
    // the head and the marker are as they were (a fresh READ_ONLY attach starts from the
    // checkpoint and refuses the marker when it opens SlateDB)
    assert_eq!(folder.head().unwrap(), head);
    let reader = Store::open_on(mem.clone(), true, "memory://after").unwrap();
    let marker = block_on(reader.backend().get(&keys::sys_format())).unwrap_err();
    assert!(marker.to_string().contains("moraine-store-9"), "{marker}");
}

/// A read-write attach may start from a checkpoint object `image/checkpoint` does not name yet
/// (its folder died between writing the one and the other). Taking the folder role, it counts
/// the checkpoint the pointer names as the newest, which bounds what its next checkpoint
/// deletes: a reader that just read the pointer still finds that object.
#[test]
fn taking_the_role_counts_the_checkpoint_the_pointer_names() {
    let mem = Arc::new(object_store::memory::InMemory::new());
    let folder = folder_at_a_checkpoint(&mem);
    commit_table(&folder, 2, 2, "t2");
    let newest = write_checkpoint_object_only(&folder, &mem);
    let pointer = raw(&folder, &keys::image_checkpoint());
    let (pointed, _) = checkpoint::decode_pointer(&pointer[0].1).unwrap();
    assert!(pointed < newest);
    let writer = Store::open_on(mem.clone(), false, "memory://unnamed").unwrap();
    assert_eq!(
        writer.current_image().unwrap().checkpoint_batch(),
        Some(newest)
    );
    writer.take_folder_role().unwrap();
    assert_eq!(writer.checkpointed_for_test(), pointed);
}
