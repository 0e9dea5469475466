//! A reader follows the lake through its commit objects (RFC 0009, "Readers"): an idle attach
//! makes no request, a pin reads the next commit object once per poll interval, and SlateDB's
//! state is read afresh only when the reader must: far behind, past a retired commit, or a read
//! that found an object of its state collected.

use super::*;
use crate::cell::Cell::Text;
use crate::testing::faulty::*;
use crate::testing::lakes::*;
use crate::testing::M;
use object_store::memory::InMemory;

fn names(list: &[&str]) -> Vec<Cell> {
    list.iter().map(|n| Text(n.to_string())).collect()
}

/// A lake with table `kept` (its writer on its own fault-free view of `mem`) and a reader of it
/// on another view, which records the reader's requests.
fn lake_and_reader(mem: &Arc<InMemory>) -> (Arc<Store>, Arc<FaultyStore>, Arc<Store>) {
    let (_, writer) = faulty_lake(mem);
    let seen = FaultyStore::new(mem.clone());
    let reader = Store::open_on(seen.clone(), true, "faulty://reader").unwrap();
    assert_eq!(table_names(&reader), names(&["kept"]));
    opened(&seen);
    (writer, seen, reader)
}

/// Waits until the reader on `seen` has made no request for a while: SlateDB's reader polls
/// the manifest once right after it opens (its ticker's first tick), and never again for an
/// hour.
fn opened(seen: &FaultyStore) {
    seen.record_requests();
    let mut quiet = 0;
    while quiet < 3 {
        std::thread::sleep(Duration::from_millis(150));
        quiet = if seen.recorded().is_empty() {
            quiet + 1
        } else {
            0
        };
    }
}

/// When the reader's SlateDB state was read; `None` before it opened SlateDB.
fn reader_state_read_at(store: &Store) -> Option<std::time::Instant> {
    match &*store.backend() {
        Backend::Reader(r) => r.read_at(),
        Backend::Writer(..) => panic!("a reader"),
    }
}

/// Opens the reader's SlateDB state now, reading no record.
fn open_state(store: &Store) {
    match &*store.backend() {
        Backend::Reader(r) => drop(block_on(r.held()).unwrap()),
        Backend::Writer(..) => panic!("a reader"),
    }
}

#[test]
fn an_idle_reader_makes_no_request_and_a_pin_reads_one_object_per_poll() {
    let mem = Arc::new(InMemory::new());
    let (writer, seen, reader) = lake_and_reader(&mem);
    seen.record_requests();
    std::thread::sleep(5 * DEFAULT_READER_POLL);
    assert_eq!(
        seen.recorded(),
        Vec::<String>::new(),
        "an idle attach reads nothing"
    );

    // transactions one after another for five poll intervals: one read of the next commit
    // object per interval (it does not exist)
    let started = std::time::Instant::now();
    while started.elapsed() < 5 * DEFAULT_READER_POLL {
        assert_eq!(table_names(&reader), names(&["kept"]));
        std::thread::sleep(Duration::from_millis(10));
    }
    let polls = seen.recorded();
    let next = format!(
        "get {}",
        checkpoint::log_object_path(reader.head().unwrap().batch_count + 1)
    );
    assert!(
        (4..=6).contains(&polls.len()) && polls.iter().all(|r| *r == next),
        "one read of {next} per poll interval: {polls:?}"
    );

    // a commit: the next due pin reads its object and the one after, and nothing else
    commit_table(&writer, 2, 2, "new");
    std::thread::sleep(DEFAULT_READER_POLL);
    assert_eq!(table_names(&reader), names(&["kept", "new"]));
    let read = seen.recorded();
    assert_eq!(read.len(), 2, "the commit's object and the next: {read:?}");
    assert!(
        read.iter().all(|r| r.starts_with("get moraine/log/")),
        "{read:?}"
    );
}

#[test]
fn a_reader_far_past_its_state_reads_the_state_afresh_once() {
    let mem = Arc::new(InMemory::new());
    let (writer, seen, reader) = lake_and_reader(&mem);
    let opened = reader_state_read_at(&reader);
    let folded = block_on(reader.read_head()).unwrap();
    let mut want = vec!["kept".to_string()];
    let commits = role::TAKE_OVER_AFTER as i64 + 6;
    seen.record_requests();
    for i in 0..commits {
        let name = format!("t{i}");
        commit_table(&writer, 2 + i, 2 + i, &name);
        want.push(name);
    }
    std::thread::sleep(DEFAULT_READER_POLL);
    let want: Vec<_> = want.iter().map(|n| Text(n.clone())).collect();
    assert_eq!(table_names(&reader), want);
    assert_eq!(reader.head().unwrap(), writer.head().unwrap());
    // it followed the commit objects, and read its state afresh (in the background) once it
    // was far behind
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while reader_state_read_at(&reader) <= opened {
        assert!(
            std::time::Instant::now() < deadline,
            "the state was never read afresh"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let now = block_on(reader.read_head()).unwrap();
    assert!(
        now.batch_count > folded.batch_count,
        "{now:?} after {folded:?}"
    );
    let requests = seen.recorded();
    let manifests = requests.iter().filter(|r| r.contains("manifest/")).count();
    assert!(manifests > 0 && manifests < 10, "one refresh: {requests:?}");

    // history reads go through the new state
    assert_eq!(
        column_of(&reader, "ducklake_table", true, "table_name"),
        want
    );
}

/// A reclaim compacts everything and collects at once: a reader's state from before it names
/// objects that are gone. Its next read that needs one reads the state afresh and tries again.
#[test]
fn a_read_that_finds_its_state_collected_reads_it_afresh() {
    let mem = Arc::new(InMemory::new());
    let (writer, seen, reader) = lake_and_reader(&mem);
    // enough records that the reader's first reads cached only some of the blocks
    for i in 0..200 {
        commit_table(
            &writer,
            2 + i,
            2 + i,
            &format!("table_with_a_long_name_{i:04}"),
        );
    }
    writer.settle_checkpoint_for_test();
    drop(reader);
    let reader = Store::open_on(seen.clone(), true, "faulty://reader-2").unwrap();
    // (it started from the newest checkpoint: SlateDB's state is opened here, before the
    // reclaim)
    open_state(&reader);
    opened(&seen);
    let opened = reader_state_read_at(&reader);
    writer.reclaim().unwrap();
    let everything_now = everything(&writer);
    assert_eq!(everything(&reader), everything_now);
    assert!(
        reader_state_read_at(&reader) > opened,
        "the reader met a collected object and read its state afresh"
    );
}

/// Commit snapshot `end`, which ends the version of table `id` (`name`, begun at `begin`), the
/// live table at `at`.
fn commit_table_end(store: &Arc<Store>, end: i64, at: usize, table: (i64, i64, &str)) {
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_snapshot", vec![crate::testing::snap(end)])
        .unwrap();
    stage_table_end(&mut t, at, table, end);
    t.commit().unwrap();
}

/// A lake on `mem` (its writer returned) whose table `kept` ended in snapshot 2, with a
/// checkpoint of that head.
fn checkpointed_lake_with_history(mem: &Arc<InMemory>) -> Arc<Store> {
    let (_, writer) = faulty_lake(mem);
    commit_table_end(&writer, 2, 0, (1, 1, "kept"));
    writer.write_checkpoint_for_test();
    writer
}

/// A `READ_ONLY` attach of a lake whose newest checkpoint names this build's store format
/// starts from it and the commit objects after it (RFC 0009, "An attach that reads what its
/// first query needs"): it reads no SlateDB object until a query reads history, which opens
/// SlateDB then and reads the same rows the writer does. A checkpoint naming another format
/// (or none: an earlier build's) is not started from: the attach opens SlateDB, which checks
/// the store's own marker.
#[test]
fn a_read_only_attach_opens_slatedb_only_when_a_query_reads_history() {
    let mem = Arc::new(InMemory::new());
    let (_, writer) = faulty_lake(&mem);
    // a table that keeps versions, none of them ended
    let mut t = writer.begin();
    t.create_table(crate::testing::def("ducklake_column"))
        .unwrap();
    t.commit().unwrap();
    commit_table_end(&writer, 2, 0, (1, 1, "kept"));
    commit_table(&writer, 3, 3, "in_checkpoint");
    writer.write_checkpoint_for_test();
    // the tail: commits after the checkpoint, one ending a version
    commit_table(&writer, 4, 4, "after");
    commit_table_end(&writer, 5, 0, (3, 3, "in_checkpoint"));
    commit_table(&writer, 6, 6, "last");
    let seen = FaultyStore::new(mem.clone());
    seen.record_requests();
    let reader = Store::open_on(seen.clone(), true, "faulty://lazy").unwrap();
    assert_eq!(table_names(&reader), names(&["after", "last"]));
    assert_eq!(reader.head().unwrap(), writer.head().unwrap());
    for table in ["ducklake_snapshot", "ducklake_snapshot_changes"] {
        assert_eq!(
            rows_of(&reader, table, false),
            rows_of(&writer, table, false)
        );
    }
    let requests = seen.recorded();
    assert!(
        requests
            .iter()
            .all(|r| r.contains(" moraine/image") || r.contains(" moraine/log")),
        "only the checkpoint and the commit objects after it: {requests:?}"
    );
    assert_eq!(reader_state_read_at(&reader), None, "SlateDB not opened");
    // the history of tables that hold no ended version, which the checkpoint says, needs no
    // SlateDB either
    for table in ["ducklake_column", "ducklake_snapshot_changes"] {
        assert_eq!(rows_of(&reader, table, true), rows_of(&writer, table, true));
    }
    assert_eq!(reader_state_read_at(&reader), None, "SlateDB not opened");

    // history: the versions ended before the checkpoint (in SlateDB's state) and in the tail
    let history = rows_of(&writer, "ducklake_table", true);
    assert_eq!(history.len(), 4);
    assert_eq!(rows_of(&reader, "ducklake_table", true), history);
    assert!(reader_state_read_at(&reader).is_some(), "SlateDB opened");
    assert!(
        seen.recorded().iter().any(|r| r.contains("manifest/")),
        "the history read opened SlateDB"
    );
    // and the reader goes on following the lake
    commit_table(&writer, 7, 7, "later");
    std::thread::sleep(DEFAULT_READER_POLL);
    assert_eq!(table_names(&reader), names(&["after", "last", "later"]));
    assert_eq!(
        rows_of(&reader, "ducklake_table", true),
        rows_of(&writer, "ducklake_table", true)
    );
    drop(reader);

    // the newest checkpoint rewritten as naming another store format: SlateDB is opened
    writer.write_checkpoint_for_test();
    let image = writer.current_image().unwrap();
    let object = checkpoint::encode_checkpoint(
        image.head(),
        "moraine-store-0",
        None,
        image.checkpoint_sections(),
        crate::compression::DEFAULT,
    );
    let path = object_store::path::Path::from(checkpoint::object_path(image.head().batch_count));
    block_on(async {
        use object_store::ObjectStoreExt;
        mem.put(&path, object.into()).await.unwrap()
    });
    seen.record_requests();
    let reader = Store::open_on(seen.clone(), true, "faulty://other-format").unwrap();
    assert!(reader_state_read_at(&reader).is_some(), "SlateDB opened");
    assert!(seen.recorded().iter().any(|r| r.contains("manifest/")));
    assert_eq!(table_names(&reader), names(&["after", "last", "later"]));
}

/// A transaction whose read gave up on the store (its time limit passed) fails its later
/// reads of the store at once, making no request: DuckDB plans a query with several reads of a
/// table (its cardinality, its statistics), which would each wait out the limit again. A new
/// transaction reads again.
#[test]
fn a_transaction_whose_read_gave_up_on_the_store_fails_its_next_reads_at_once() {
    let mem = Arc::new(InMemory::new());
    let _writer = checkpointed_lake_with_history(&mem);
    let seen = FaultyStore::new(mem.clone());
    let limit = Duration::from_millis(300);
    let reader = Store::open_on_limited(seen.clone(), true, "faulty://slow", limit).unwrap();
    let mut t = reader.begin();
    assert!(t.rows(M, "ducklake_table", false).unwrap().rows.is_empty());
    seen.delay_reads(3000);
    let e = t.rows(M, "ducklake_table", true).unwrap_err();
    assert!(matches!(e, Error::Unreachable { .. }), "{e}");
    seen.record_requests();
    let again = t.rows(M, "ducklake_table", true).unwrap_err();
    assert_eq!(again.to_string(), e.to_string());
    assert_eq!(seen.recorded(), Vec::<String>::new(), "no request");
    drop(t);
    seen.delay_reads(0);
    assert_eq!(rows_of(&reader, "ducklake_table", true).len(), 1);
}

/// A `READ_ONLY` attach of a lake whose newest checkpoint is at its head lists the checkpoints,
/// reads that one and lists the commit objects after it (none), the two together; its first
/// transactions read nothing more.
#[test]
fn a_read_only_attach_of_a_lake_at_its_checkpoint_makes_three_requests() {
    let mem = Arc::new(InMemory::new());
    let (_, writer) = faulty_lake(&mem);
    writer.write_checkpoint_for_test();
    let seen = FaultyStore::new(mem.clone());
    seen.record_requests();
    let reader = Store::open_on(seen.clone(), true, "faulty://at-head").unwrap();
    assert_eq!(table_names(&reader), names(&["kept"]));
    assert_eq!(reader.head().unwrap(), writer.head().unwrap());
    let mut requests = seen.recorded();
    requests.sort();
    let path = checkpoint::object_path(writer.head().unwrap().batch_count);
    assert_eq!(requests.len(), 3, "{requests:?}");
    assert!(
        requests[0] == format!("get {path}")
            && requests[1].starts_with("list")
            && requests[1].contains("moraine/image")
            && requests[2].contains("moraine/log"),
        "{requests:?}"
    );
}

/// A `READ_ONLY` attach that started from a checkpoint naming this build's store format checks
/// the store's own marker when it opens SlateDB, and refuses another (a later build upgraded
/// the lake after that checkpoint) rather than reading a layout it may not know.
#[test]
fn a_read_only_attach_checks_the_store_format_when_it_opens_slatedb() {
    let mem = Arc::new(InMemory::new());
    let writer = checkpointed_lake_with_history(&mem);
    let reader = Store::open_on(mem.clone(), true, "memory://format").unwrap();
    assert!(table_names(&reader).is_empty());
    assert_eq!(reader_state_read_at(&reader), None, "SlateDB not opened");
    writer
        .put_raw(&keys::sys_format(), b"moraine-store-9")
        .unwrap();
    let e = reader
        .begin()
        .rows(M, "ducklake_table", true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("moraine-store-9") && e.contains("attach it again"),
        "{e}"
    );
}

/// A `READ_ONLY` attach starts from the newest checkpoint object even when `image/checkpoint`
/// does not name it yet (its writer died between writing the one and the other): the object
/// holds a committed image, and its writer made the folds it holds durable first, so the rows
/// and the history read through SlateDB's state afterwards are the writer's.
#[test]
fn a_read_only_attach_starts_from_a_checkpoint_its_pointer_does_not_name_yet() {
    let mem = Arc::new(InMemory::new());
    let (_, writer) = faulty_lake(&mem);
    writer.write_checkpoint_for_test();
    commit_table_end(&writer, 2, 0, (1, 1, "kept"));
    commit_table(&writer, 3, 3, "t3");
    let batch = write_checkpoint_object_only(&writer, &mem);
    let pointer = raw(&writer, &keys::image_checkpoint());
    assert!(checkpoint::decode_pointer(&pointer[0].1).unwrap().0 < batch);

    let reader = Store::open_on(mem.clone(), true, "memory://unnamed").unwrap();
    assert_eq!(
        reader.current_image().unwrap().checkpoint_batch(),
        Some(batch)
    );
    assert_eq!(table_names(&reader), names(&["t3"]));
    assert_eq!(reader_state_read_at(&reader), None, "SlateDB not opened");
    assert_eq!(
        rows_of(&reader, "ducklake_table", true),
        rows_of(&writer, "ducklake_table", true)
    );
    assert!(reader_state_read_at(&reader).is_some(), "SlateDB opened");
}

/// A checkpoint's history ranges are found afresh through its writer's snapshot: a range an
/// expiry emptied since is not named, so a reader of the checkpoint does not open SlateDB for
/// it.
#[test]
fn a_checkpoint_names_the_history_ranges_that_hold_records_at_its_head() {
    let mem = Arc::new(InMemory::new());
    let (_, writer) = faulty_lake(&mem);
    commit_table_end(&writer, 2, 0, (1, 1, "kept"));
    let table = keys::history_prefix(M, "ducklake_table");
    let named = |writer: &Arc<Store>| {
        writer.write_checkpoint_for_test();
        let batch = writer.head().unwrap().batch_count;
        let path = checkpoint::object_path(batch);
        let bytes = block_on(writer.read_object(&path)).unwrap();
        let cp = checkpoint::decode_checkpoint(bytes, &path).unwrap();
        cp.history_held.unwrap().tables.contains(&table)
    };
    assert!(named(&writer), "the ended version's range");
    // an expiry deletes the ended version
    let mut t = writer.begin();
    let m = t.rows(M, "ducklake_table", true).unwrap();
    assert_eq!(m.rows.len(), 1);
    t.stage_delete(M, "ducklake_table", vec![crate::txn::rowid(m.id, 0)])
        .unwrap();
    t.commit().unwrap();
    assert!(rows_of(&writer, "ducklake_table", true).is_empty());
    assert!(!named(&writer), "emptied since");
}
