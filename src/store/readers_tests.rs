//! A reader follows the lake through its commit objects (RFC 0009, "Readers"): an idle attach
//! makes no request, a pin reads the next commit object once per poll interval, and SlateDB's
//! state is read afresh only when the reader must: far behind, past a retired commit, or a read
//! that found an object of its state collected.

use super::*;
use crate::cell::Cell::Text;
use crate::testing::faulty::*;
use crate::testing::lakes::*;
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

fn reader_state_read_at(store: &Store) -> std::time::Instant {
    match &*store.backend() {
        Backend::Reader(r) => r.read_at(),
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
