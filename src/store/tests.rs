//! Store tests on real SlateDB (memory:// stores and local directories): opening and sharing,
//! the writer's compactor, what a close leaves, WAL replay, fencing, format upgrades, the
//! checkpoints' commit log, and a commit's write when the object store fails or the commit is
//! too large. Lakes are built through transactions with the shared helpers.

use super::*;
use crate::catalog::fixed_table_def;
use crate::cell::Cell::{Int, Null, Text};
use crate::testing::faulty::{
    self, commit_snapshot_2, commit_snapshot_2_in_background, faulty_lake, reopen, reopen_folder,
    AFTER_COMMIT_1,
};
use crate::testing::lakes::*;
use crate::testing::*;
use crate::txn::rowid;

#[test]
fn a_fresh_store_has_an_empty_head_and_the_main_schema() {
    let store = Store::open(&mem_url("fresh"), false).unwrap();
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: None,
            batch_count: 0
        }
    );
    let mut t = store.begin();
    assert_eq!(t.schemas().unwrap(), vec!["main".to_string()]);
    assert!(t.tables(M).unwrap().is_empty());
    assert!(!t.has_writes());
    t.commit().unwrap(); // nothing staged: trivially commits, writes nothing
    assert_eq!(store.head().unwrap().batch_count, 0);
}

#[test]
fn memory_stores_are_shared_by_name_across_attaches() {
    let url = mem_url("reattach");
    let store = new_lake(&url);
    let again = Store::open(&url, false).unwrap();
    assert!(Arc::ptr_eq(&store, &again), "an open store is shared");
    drop(store);
    drop(again);
    let reopened = Store::open(&url, false).unwrap();
    assert_eq!(
        reopened.head().unwrap(),
        Head {
            snapshot_id: Some(0),
            batch_count: 1
        }
    );
    assert_eq!(rows_of(&reopened, "ducklake_snapshot", true), vec![snap(0)]);
}

/// A writer runs SlateDB's compactor from its first commit, or a moment after it took the
/// folder role if it has not committed by then; an attach that only reads takes no role and
/// starts none, so it does not resume a compaction it would abandon (`store/compactor.rs`).
/// Closing stops it.
#[test]
fn a_writer_starts_its_compactor_at_its_first_commit_or_a_moment_after_taking_the_role() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let store = Store::open(&url, false).unwrap();
    assert!(!store.compactor_running(), "not at the open");
    init_lake(&store);
    assert!(store.compactor_running(), "from the first commit");
    store.close().unwrap();
    assert!(!store.compactor_running(), "stopped at close");
    drop(store);

    // a read-write attach that only reads opens no writer: no role, no compactor, however long
    let store = Store::open(&url, false).unwrap();
    assert_eq!(rows_of(&store, "ducklake_snapshot", false), vec![snap(0)]);
    std::thread::sleep(crate::store::COMPACTOR_START_AFTER * 2);
    assert!(
        !store.is_folder() && !store.compactor_running(),
        "reading starts nothing"
    );
    store.close().unwrap();
    drop(store);

    let opened = std::time::Instant::now();
    let store = open_folder(&url);
    assert_eq!(rows_of(&store, "ducklake_snapshot", false), vec![snap(0)]);
    let running = store.compactor_running();
    // (only if this machine did all that within the delay)
    if opened.elapsed() < crate::store::COMPACTOR_START_AFTER {
        assert!(!running, "taking the role starts nothing at once");
    }
    // START_AFTER after taking the role it runs (waited for with a generous margin: this
    // asserts that it starts, not how soon)
    let deadline = std::time::Instant::now() + crate::store::COMPACTOR_START_AFTER * 10;
    while !store.compactor_running() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(store.compactor_running(), "a moment after taking the role");
    store.close().unwrap();
    assert!(!store.compactor_running());

    // a read-only store has none
    let reader = Store::open(&url, true).unwrap();
    assert_eq!(rows_of(&reader, "ducklake_snapshot", false), vec![snap(0)]);
    assert!(!reader.compactor_running());
}

/// A close often leaves L0 full (its memtable flush fills it). Attaches that take the folder
/// role and only read after that (an attach that only reads opens no writer at all; these
/// took the role as a reclaim or a take-over does) start no compactor, however full L0 is, nor
/// do their closes that flush nothing: each would resume the same compaction and abandon it.
/// The close that must flush into a full L0 starts it, and its flush waits for it: L0 drains,
/// and the store stays readable throughout.
#[test]
fn folders_that_only_read_start_no_compactor_even_with_l0_full() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let store = Store::open(&url, false).unwrap();
    init_lake(&store);
    store.close().unwrap();
    drop(store);
    let l0_max = slatedb::config::Settings::default().l0_max_ssts;
    // each such close leaves its open's WAL fence; one in REPLAY_BACKLOG_LIMIT flushes a marker
    // into L0, so L0 fills after about l0_max * REPLAY_BACKLOG_LIMIT of them
    let bound = 4 * l0_max as u64 * crate::store::REPLAY_BACKLOG_LIMIT;
    // a compactor that starts takes its epoch in a new compactions object
    let compactions = || -> std::collections::BTreeSet<std::ffi::OsString> {
        std::fs::read_dir(dir.path().join("lake/compactions"))
            .map(|d| d.filter_map(|e| Some(e.ok()?.file_name())).collect())
            .unwrap_or_default()
    };
    let (mut full, mut drained) = (0, false);
    // for each close with L0 full: whether it started a compactor
    let mut started = Vec::new();
    for _ in 0..bound {
        let opened = std::time::Instant::now();
        let store = open_folder(&url);
        let l0 = store
            .status()
            .unwrap()
            .l0_ssts
            .expect("a writer holds a manifest");
        assert_eq!(rows_of(&store, "ducklake_snapshot", false), vec![snap(0)]);
        if opened.elapsed() < crate::store::COMPACTOR_START_AFTER {
            assert!(
                !store.compactor_running(),
                "a folder that reads starts none (L0: {l0})"
            );
        }
        let before = compactions();
        store.close().unwrap();
        drop(store);
        if l0 >= l0_max {
            full += 1;
            started.push(!compactions().is_subset(&before));
        } else if full > 0 {
            drained = true;
            break;
        }
    }
    assert!(
        full > 1,
        "L0 never stayed full in {bound} attaches that only read"
    );
    assert!(drained, "L0 stayed full after {full} attaches");
    // only the close whose flush had to go into the full L0 (the one before it drained)
    // started a compactor: the others flushed nothing
    assert!(
        !started[..started.len() - 1].contains(&true),
        "closes with L0 full that started a compactor: {started:?}"
    );
}

/// A writer that closes leaves its lake tidy for the next open (RFC 0009, "Storage hygiene"):
/// the WAL objects its commits wrote are collected, and a checkpoint of its last commit is
/// there for the next attach, which starts from it.
#[test]
fn a_closed_writer_leaves_a_checkpoint_and_no_wal_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lake");
    let url = path.to_str().unwrap().to_string();
    let files = |sub: &str| std::fs::read_dir(path.join(sub)).map_or(0, |d| d.count());
    let store = new_lake(&url);
    for i in 1..=100 {
        commit_table(&store, i, i, &format!("t{i}"));
    }
    assert!(files("wal") > 1, "the commits wrote WAL objects");
    let head = store.head().unwrap();
    drop(store);
    assert!(
        files("wal") <= 3,
        "{} WAL objects left after close",
        files("wal")
    );
    assert!(
        (1..=2).contains(&files("moraine/image")),
        "{} checkpoint objects",
        files("moraine/image")
    );
    let store = Store::open(&url, false).unwrap();
    let image = store.pin_image().unwrap();
    assert_eq!(image.head(), head);
    assert_eq!(image.checkpoint_batch(), Some(head.batch_count));
    assert_eq!(
        column_of(&store, "ducklake_table", false, "table_name").len(),
        100
    );
}

/// Writers with each `moraine_compression` in turn write one store (RFC 0013): each reads
/// what the others wrote (SlateDB's blocks and checkpoint sections record their codec), its
/// checkpoint compresses the sections it encodes with its own codec and copies the ones no
/// commit changed as they are stored, and an attach from that checkpoint reads what the records
/// say. A codec moraine does not write is refused at the attach, naming the setting.
#[test]
fn writers_with_each_codec_in_turn_read_each_other_s_store() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let open = |codec: &str| {
        Store::open_with(&url, false, &[("compression".into(), codec.into())]).unwrap()
    };
    init_lake(&open("zstd"));
    let mut id = 1;
    for codec in ["zstd", "lz4", "none", "zstd"] {
        let store = open(codec);
        assert_eq!(
            column_of(&store, "ducklake_table", false, "table_name").len() as i64,
            id - 1
        );
        for _ in 0..3 {
            commit_table(&store, id, id, &format!("{codec}_{id}"));
            id += 1;
        }
        store.write_checkpoint_for_test();
        let (batch, path) =
            checkpoint::decode_pointer(&raw(&store, &keys::image_checkpoint())[0].1).unwrap();
        let object = std::fs::read(dir.path().join("lake").join(&path)).unwrap();
        let cp = checkpoint::decode_checkpoint(object.into(), &path).unwrap();
        assert_eq!(cp.head.batch_count, batch);
        let codecs: Vec<Codec> = cp.sections.values().map(|s| s.codec).collect();
        assert!(
            codecs.contains(&Codec::parse(codec).unwrap()),
            "{codec}: {codecs:?}"
        );
        drop(store);
        // the close flushed this writer's memtable: the newest SST is its, in its codec
        assert_eq!(
            newest_sst_codec(&dir.path().join("lake")),
            Codec::parse(codec).unwrap().slatedb(),
            "{codec}"
        );
        let store = Store::open(&url, true).unwrap();
        let image = store.pin_image().unwrap();
        assert_eq!(image.checkpoint_batch(), Some(batch));
        let records = block_on(crate::store::image_from_records(&store, None, None)).unwrap();
        assert_eq!(image.all_records(), records.all_records());
    }
    let e = Store::open_with(&url, false, &[("compression".into(), "brotli".into())])
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("moraine_compression 'brotli'"), "{e}");
}

/// The codec SlateDB recorded in the newest SST of the store in `dir`.
fn newest_sst_codec(dir: &Path) -> Option<slatedb::config::CompressionCodec> {
    let newest = std::fs::read_dir(dir.join("compacted"))
        .unwrap()
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".sst")?
                .parse()
                .ok()
        })
        .max()
        .expect("an SST");
    let fs = object_store::local::LocalFileSystem::new_with_prefix(dir).unwrap();
    let reader = slatedb::SstReader::new("", Arc::new(fs), None, None);
    block_on(reader.open(newest))
        .unwrap()
        .info()
        .compression_codec
}

/// Each writer's open writes an empty WAL object to fence the writer before it, and SlateDB
/// moves its replay point only when it flushes a memtable holding something. Writers that
/// commit nothing (attach, query, detach) therefore left every fence for each later open to
/// read, one more per attach; a close now moves the replay point once the backlog reaches
/// `REPLAY_BACKLOG_LIMIT`, so the WAL an open reads stays bounded however many such writers came.
/// (The empty fence objects themselves stay: SlateDB collects them only in its fence mode, which
/// moraine leaves off, see RFC 0009.)
#[test]
fn writers_that_commit_nothing_leave_a_bounded_wal_to_replay() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lake");
    let url = path.to_str().unwrap().to_string();
    // the WAL objects an open replays (those after the replay point), and how many of them
    // hold records
    let replayed = |after: u64| {
        let mut objects = 0;
        let mut holding = 0;
        for e in std::fs::read_dir(path.join("wal")).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().into_string().unwrap();
            let Some(id) = name
                .strip_suffix(".sst")
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue;
            };
            if id > after {
                objects += 1;
                holding += u64::from(e.metadata().unwrap().len() > 0);
            }
        }
        (objects, holding)
    };
    let store = new_lake(&url);
    commit_table(&store, 1, 1, "t1");
    let head = store.head().unwrap();
    let before = everything(&store);
    drop(store);
    let limit = crate::store::REPLAY_BACKLOG_LIMIT;
    let mut most = 0;
    // a read-write attach that commits nothing opens no writer: no fence, no manifest
    let wal_before = std::fs::read_dir(path.join("wal")).unwrap().count();
    let manifests_before = std::fs::read_dir(path.join("manifest")).unwrap().count();
    let store = Store::open(&url, false).unwrap();
    assert_eq!(store.head().unwrap(), head);
    store.close().unwrap();
    drop(store);
    assert_eq!(
        std::fs::read_dir(path.join("wal")).unwrap().count(),
        wal_before
    );
    assert_eq!(
        std::fs::read_dir(path.join("manifest")).unwrap().count(),
        manifests_before
    );
    // attaches that take the folder role and commit nothing (a reclaim's, a take-over's)
    for _ in 0..3 * limit {
        let store = open_folder(&url);
        let crate::store::Backend::Writer(db, _) = &*store.backend() else {
            panic!("a writer")
        };
        let backlog = crate::store::replay_backlog(db);
        let (objects, holding) = replayed(db.manifest().replay_after_wal_id());
        assert_eq!(backlog, objects);
        // the marker was durable before the flush that moved the replay point past it
        assert_eq!(holding, 0, "an open replayed a WAL object holding records");
        most = most.max(backlog);
        assert_eq!(store.head().unwrap(), head, "the marker changes no data");
        drop(store);
    }
    assert!(most <= limit, "an open replayed {most} WAL objects");
    let store = Store::open(&url, false).unwrap();
    assert_eq!(everything(&store), before, "the same records");
}

/// A local directory keeps SlateDB's manifests for an hour (it has no boundary objects, see
/// `gc_options`), and only a writer's collector, which makes its first pass after ten seconds,
/// collected them: writers that never stay that long left every manifest they wrote, and every
/// open lists them all. A close now collects those older than the hour.
#[test]
fn a_close_collects_the_manifests_older_than_an_hour_on_a_local_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lake");
    let url = path.to_str().unwrap().to_string();
    let manifests = || std::fs::read_dir(path.join("manifest")).unwrap().count();
    let store = new_lake(&url);
    commit_table(&store, 1, 1, "t1");
    drop(store);
    // (attaches that take the folder role: one that only reads opens no writer)
    for _ in 0..5 {
        drop(open_folder(&url));
    }
    let written = manifests();
    assert!(written >= 5, "{written} manifests");
    // the young ones stay
    drop(open_folder(&url));
    assert!(manifests() > written, "young manifests are kept");
    // make them all two hours old
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    for e in std::fs::read_dir(path.join("manifest")).unwrap() {
        let f = std::fs::File::options()
            .write(true)
            .open(e.unwrap().path())
            .unwrap();
        f.set_modified(old).unwrap();
    }
    let store = open_folder(&url);
    let head = store.head().unwrap();
    drop(store);
    // what is left: the manifests this session wrote (SlateDB keeps the latest whatever its age)
    assert!(manifests() <= 4, "{} manifests left", manifests());
    let store = Store::open(&url, false).unwrap();
    assert_eq!(store.head().unwrap(), head);
}

#[test]
fn a_local_directory_store_reopens_with_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lake");
    let url = path.to_str().unwrap().to_string();
    let store = new_lake(&url);
    commit_table(&store, 1, 1, "t1");
    let mut t = store.begin();
    t.create_table(inline_def()).unwrap();
    t.stage_insert(M, INL, vec![inl(0, 1, None, "x")]).unwrap();
    t.commit().unwrap();
    let before = everything(&store);
    drop(store);
    assert!(path.join("manifest").is_dir());

    let store = Store::open(&format!("file://{url}"), false).unwrap();
    assert_eq!(everything(&store), before);
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(1),
            batch_count: 3
        }
    );
    assert_eq!(
        rows_of(&store, "ducklake_table", false),
        vec![table_row(1, 1, None, "t1")]
    );
    assert_eq!(rows_of(&store, INL, false), vec![inl(0, 1, None, "x")]);
}

#[test]
fn opening_something_else_is_not_a_moraine_store() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain.txt");
    std::fs::write(&file, "hello").unwrap();
    for ro in [false, true] {
        let e = Store::open(file.to_str().unwrap(), ro)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("is not a moraine store") && e.contains("plain.txt"),
            "{e}"
        );
    }
    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("data.csv"), "a,b").unwrap();
    let e = Store::open(foreign.to_str().unwrap(), false)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("is not a moraine store") && e.contains("foreign"),
        "{e}"
    );
    assert_eq!(
        std::fs::read_dir(&foreign).unwrap().count(),
        1,
        "nothing was written into it"
    );
    let missing = dir.path().join("missing");
    let e = Store::open(missing.to_str().unwrap(), true)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("is not a moraine store") && e.contains("missing"),
        "{e}"
    );
    let e = Store::open("s3://bucket/lake", false)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("s3://bucket/lake"), "{e}");
}

#[test]
fn a_slatedb_database_without_the_marker_is_not_a_moraine_store() {
    let url = mem_url("foreign-slate");
    let name = url.strip_prefix("memory://").unwrap();
    let os = crate::url::memory_store(name);
    block_on(async {
        let db = slatedb::Db::open("", os).await.unwrap();
        db.put(b"someone", b"else").await.unwrap();
        db.flush().await.unwrap();
        db.close().await.unwrap();
    });
    let e = Store::open(&url, false).err().unwrap().to_string();
    assert!(
        e.contains("is not a moraine store") && e.contains("sys/format"),
        "{e}"
    );
}

#[test]
fn read_only_open_sees_committed_data_and_refuses_commits() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let writer = new_lake(&url);
    commit_table(&writer, 1, 1, "t1");

    let reader = Store::open(&url, true).unwrap();
    assert!(reader.is_read_only());
    assert_eq!(
        reader.head().unwrap(),
        Head {
            snapshot_id: Some(1),
            batch_count: 2
        }
    );
    let mut t = reader.begin();
    assert_eq!(
        t.rows(M, "ducklake_table", false).unwrap().rows,
        vec![table_row(1, 1, None, "t1")]
    );
    assert_eq!(t.rows(M, "ducklake_snapshot", true).unwrap().rows.len(), 2);
    t.stage_insert(M, "ducklake_table_stats", vec![stats_row(1, 1)])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert!(e.to_string().contains("lake is attached read-only"), "{e}");
    // a read-only transaction without writes commits trivially
    let mut t = reader.begin();
    t.rows(M, "ducklake_table", false).unwrap();
    t.commit().unwrap();
    drop(reader);
    drop(writer);
    // after the writer is gone, a reader still opens
    let reader = Store::open(&url, true).unwrap();
    assert_eq!(rows_of(&reader, "ducklake_table", false).len(), 1);
}

#[test]
fn commits_are_durable_and_quick() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let store = new_lake(&url);
    let n = 20;
    let start = std::time::Instant::now();
    for i in 1..=n {
        commit_table(&store, i, i, &format!("t{i}"));
    }
    let per_commit = start.elapsed() / n as u32;
    eprintln!("local-directory commit latency: {per_commit:?} per commit");
    assert!(
        per_commit < std::time::Duration::from_millis(500),
        "{per_commit:?}"
    );
    // durable: a fresh process-level open (after close) sees every commit
    drop(store);
    let store = Store::open(&url, false).unwrap();
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(n),
            batch_count: n as u64 + 1
        }
    );
    assert_eq!(rows_of(&store, "ducklake_table", false).len(), n as usize);
}

/// A writer's transaction pins the image its last commit installed without reading storage,
/// except once per poll interval, when it reads the lake's tail (RFC 0004 v3); a writer fenced
/// by another (which took the folder role) never fails a pin: it goes on without the role,
/// reading and committing.
#[test]
fn a_writer_pins_without_reading_storage_and_goes_on_when_fenced() {
    let mem = Arc::new(object_store::memory::InMemory::new());
    let (_faulty, store) = faulty_lake(&mem);
    let started = std::time::Instant::now();
    let before = store.head_reads.load(Ordering::SeqCst);
    for _ in 0..20 {
        let mut t = store.begin();
        assert_eq!(t.head_snapshot(M).unwrap(), Some(1));
    }
    commit_snapshot_2(&store).unwrap();
    let mut t = store.begin();
    assert_eq!(t.head_snapshot(M).unwrap(), Some(2));
    drop(t);
    // the commit read the head once, for its conflict check; the 21 pins read it only when a
    // poll of the tail was due
    let polls = (started.elapsed().as_millis() / DEFAULT_READER_POLL.as_millis()) as u64 + 1;
    let reads = store.head_reads.load(Ordering::SeqCst) - before;
    assert!(
        reads <= 1 + polls,
        "{reads} reads of the head in {polls} poll intervals"
    );

    let other = reopen_folder(&mem); // fences `store`, as its first commit would
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while store.is_folder() {
        // the fenced writer learns of it at a manifest poll; no pin fails meanwhile
        assert_eq!(store.begin().head_snapshot(M).unwrap(), Some(2));
        assert!(std::time::Instant::now() < deadline, "never saw the fence");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    commit_table(&store, 3, 3, "after_the_fence");
    commit_table(&other, 4, 4, "by_the_folder");
    let all = vec![
        Text("kept".into()),
        Text("lost".into()),
        Text("after_the_fence".into()),
        Text("by_the_folder".into()),
    ];
    assert_eq!(table_names(&other), all);
    std::thread::sleep(DEFAULT_READER_POLL);
    assert_eq!(table_names(&store), all);
}

/// A writer another one fenced may still commit (RFC 0004 v3: the store decides every commit by
/// its commit object, not by SlateDB's writer role): whatever it is told, its commit is stored
/// exactly when it was acknowledged, and the writer that fenced it reads it at its next pin.
#[test]
fn a_fenced_writer_s_commit_is_stored_exactly_when_acknowledged() {
    let mut landed = 0;
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().display().to_string();
        let store = new_lake(&url);
        commit_table(&store, 1, 1, "kept");
        // another writer (as another process would) opens the same directory and takes the
        // folder role (as its first commit would), fencing `store`
        let fs = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
        let other = Store::open_on(Arc::new(fs), false, "local://other").unwrap();
        other.take_folder_role().unwrap();
        let result = commit_snapshot_2(&store);
        let names = table_names(&other);
        match result {
            Ok(()) => {
                landed += 1;
                assert_eq!(names, vec![Text("kept".into()), Text("lost".into())]);
            }
            Err(e) => {
                assert!(matches!(e, Error::Fenced(_)), "{e:?}");
                assert_eq!(names, vec![Text("kept".into())]);
            }
        }
    }
    eprintln!("{landed} of 20 fenced writers' commits landed");
}

/// A store of the previous format (`moraine-store-1`, before lakes were keyed apart) opens when
/// all its lakes are in schema main, where the layouts coincide, and a writer upgrades its
/// marker; one holding a lake in another schema is refused by name, never misread.
#[test]
fn a_previous_format_store_opens_only_when_its_layout_is_this_one() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let mut store = new_lake(&url);
    commit_table(&store, 1, 1, "t1");
    // store-2, the format before the image's own records, is this layout without them, and
    // store-3 this layout uncompressed
    // (a build of an earlier format wrote no checkpoint naming this build's format, which an
    // attach would start from without reading the marker)
    let no_checkpoints = || {
        let dir = std::path::Path::new(&url).join("moraine/image");
        for entry in std::fs::read_dir(dir).into_iter().flatten() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
    };
    for older in [
        &b"moraine-store-1"[..],
        b"moraine-store-2",
        b"moraine-store-3",
    ] {
        store.put_raw(&keys::sys_format(), older).unwrap();
        drop(store);
        no_checkpoints();
        store = Store::open(&url, false).unwrap();
        assert_eq!(
            rows_of(&store, "ducklake_table", false),
            vec![table_row(1, 1, None, "t1")]
        );
        assert_eq!(
            raw(&store, &keys::sys_format())[0].1,
            crate::store::STORE_FORMAT.as_bytes()
        );
    }

    // the same marker on a store with a lake in schema lakemeta is refused
    let mut t = store.begin();
    t.create_schema("lakemeta", false).unwrap();
    t.create_table(fixed_table_def("lakemeta", "ducklake_snapshot").unwrap())
        .unwrap();
    t.commit().unwrap();
    store
        .put_raw(&keys::sys_format(), b"moraine-store-1")
        .unwrap();
    drop(store);
    no_checkpoints();
    let e = Store::open(&url, false).err().expect("refused").to_string();
    assert!(
        e.contains("not a moraine store") && e.contains("schema lakemeta"),
        "{e}"
    );
    let e = Store::open(&url, true).err().expect("refused").to_string();
    assert!(e.contains("schema lakemeta"), "{e}");
}

/// A writer another one fenced goes on without the folder role, and a new ATTACH of the URL in
/// the same process shares it (it used to get a dead handle, or to open a new one).
#[test]
fn a_fenced_writer_goes_on_and_is_shared_with_a_new_attach() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().display().to_string();
    let store = new_lake(&url);
    assert!(Arc::ptr_eq(&store, &Store::open(&url, false).unwrap()));
    // another writer (as another process would) opens the same directory; its first commit
    // takes the folder role, fencing `store`
    let fs = object_store::local::LocalFileSystem::new_with_prefix(dir.path()).unwrap();
    let other = Store::open_on(Arc::new(fs), false, "local://other").unwrap();
    commit_table(&other, 1, 1, "by_other");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // (each pin reads the tail; folding it is what tells the fenced writer)
    while table_names(&store) != vec![Text("by_other".into())] || store.is_folder() {
        assert!(
            std::time::Instant::now() < deadline,
            "never went on without the role: folder {}, status {:?}, tables {:?}",
            store.is_folder(),
            store.status().map(|s| s.state),
            table_names(&store)
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    other.close().unwrap();
    drop(other);
    let again = Store::open(&url, false).unwrap();
    assert!(Arc::ptr_eq(&store, &again));
    commit_snapshot_2(&again).unwrap();
    assert_eq!(
        table_names(&store),
        vec![Text("by_other".into()), Text("lost".into())]
    );
}

/// A READ_ONLY reader still following the manifest from before a reclaim (it polls once an
/// hour here) reads ended versions from the store on demand, through tables the reclaim
/// deleted: it gets them right or fails with a storage error, never other bytes (RFC 0003).
#[test]
fn a_reader_behind_a_reclaim_reads_right_or_fails_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let writer = new_lake(&url);
    for i in 1..=70 {
        commit_table(&writer, i, i, &format!("t{i}"));
    }
    // table 1 renamed at snapshot 71: its first version is history
    let mut t = writer.begin();
    let m = t.rows(M, "ducklake_table", false).unwrap();
    let at = (0..m.rows.len())
        .find(|&i| m.rows[i].contains(&Text("t1".into())))
        .unwrap();
    t.stage_insert(M, "ducklake_snapshot", vec![snap(71)])
        .unwrap();
    t.stage_insert(
        M,
        "ducklake_snapshot_changes",
        vec![changes(71, "altered_table")],
    )
    .unwrap();
    t.stage_update(
        M,
        "ducklake_table",
        vec![(rowid(m.id, at), table_row(1, 1, Some(71), "t1"))],
    )
    .unwrap();
    t.stage_insert(
        M,
        "ducklake_table",
        vec![table_row(1, 71, None, "t1_renamed")],
    )
    .unwrap();
    t.commit().unwrap();
    let mut expected = column_of(&writer, "ducklake_table", true, "table_name");
    expected.sort_by_key(|c| format!("{c:?}"));
    let options = [("reader_poll_ms".to_string(), "3600000".to_string())];
    let reader = Store::open_with(&url, true, &options).unwrap();
    reader.pin_image().unwrap();
    writer.reclaim().unwrap();
    for _ in 0..2 {
        match reader.begin().rows(M, "ducklake_table", true) {
            Ok(m) => {
                let mut names = col(&m.rows, "ducklake_table", "table_name");
                names.sort_by_key(|c| format!("{c:?}"));
                assert_eq!(names, expected);
            }
            // (this is what happens here: the table it reads was collected)
            Err(e) => assert!(matches!(e, Error::Storage(_)), "{e:?}"),
        }
    }
    // a reader on the new manifest reads every version
    drop(reader);
    let fresh = Store::open(&url, true).unwrap();
    let mut names = column_of(&fresh, "ducklake_table", true, "table_name");
    names.sort_by_key(|c| format!("{c:?}"));
    assert_eq!(names, expected);
}

/// A checkpoint deletes the commit log up to the checkpoint it replaces: the log holds the
/// commits since the one before the newest checkpoint, not a day of them, and a reader still
/// reads the lake whole (from the newest checkpoint and the log after it).
#[test]
fn a_checkpoint_trims_the_log_before_the_one_it_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let url = dir.path().join("lake").to_str().unwrap().to_string();
    let store = new_lake(&url);
    for i in 1..=200 {
        commit_table(&store, i, i, &format!("t{i}"));
    }
    store.settle_checkpoint_for_test();
    let log = raw(&store, &keys::image_log_prefix());
    let first = keys::decode_key(&log[0].0).unwrap();
    assert!(
        log.len() < 2 * crate::checkpoint::COMMITS_PER_CHECKPOINT as usize + 2,
        "{} log records",
        log.len()
    );
    let per_checkpoint = crate::checkpoint::COMMITS_PER_CHECKPOINT as i64;
    assert!(
        matches!(first.as_slice(), [_, _, Int(b)] if *b > per_checkpoint),
        "the oldest log record is {first:?}"
    );
    let reader = Store::open(&url, true).unwrap();
    assert_eq!(
        column_of(&reader, "ducklake_table", false, "table_name").len(),
        200
    );
}

// ---- a commit's write: object-store failures, the size limit ------------------------------------

#[test]
fn a_commit_whose_object_store_writes_fail_returns_the_error_and_writes_nothing() {
    let mem = Arc::new(object_store::memory::InMemory::new());
    let (faulty, store) = faulty_lake(&mem);
    let before = everything(&store);
    assert_eq!(store.head().unwrap(), AFTER_COMMIT_1);

    // Every write fails, and not with an error SlateDB retries: the commit returns the error.
    faulty.fail_writes(true, false);
    let rx = commit_snapshot_2_in_background(&store);
    let err = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the commit returns instead of hanging")
        .unwrap_err();
    assert!(faulty.injected() > 0, "the commit reached the object store");
    let msg = err.to_string();
    assert!(matches!(err, Error::Storage(_)), "{err:?}");
    assert!(
        msg.contains("storage error")
            && msg.contains(faulty::MESSAGE)
            && msg.contains("moraine/log/"),
        "the error names the failed write underneath: {msg}"
    );
    assert!(
        !err.is_conflict(),
        "DuckLake must not retry it as a conflict: {msg}"
    );

    // The store refused the commit object: nothing was written, so this handle goes on, and
    // the same commit succeeds once writes work again.
    assert_eq!(store.head().unwrap(), AFTER_COMMIT_1);
    assert_eq!(everything(&store), before);
    faulty.fail_writes(false, false);
    commit_snapshot_2(&store).unwrap();
    store.close().unwrap();
    drop(store);
    let store = reopen(&mem);
    assert_eq!(
        table_names(&store),
        vec![Text("kept".into()), Text("lost".into())]
    );
    assert_eq!(
        column_of(&store, "ducklake_snapshot", true, "snapshot_id"),
        vec![Int(0), Int(1), Int(2)]
    );
}

#[test]
fn a_commit_outliving_the_time_limit_is_unknown_until_the_store_answers_then_settled() {
    use std::time::Duration;
    let mem = Arc::new(object_store::memory::InMemory::new());
    let (faulty, store) = faulty_lake(&mem);
    store.close().unwrap();
    drop(store);
    // the same lake, attached with a 1 s limit; every write then fails with an error SlateDB
    // retries (a network failure): the commit gives up after the limit
    let store = reopen_limited(&faulty);
    assert_eq!(store.head().unwrap(), AFTER_COMMIT_1);
    // (the folder role is taken at an attach's first commit: here before the outage)
    store.take_folder_role().unwrap();
    faulty.fail_writes(true, true);
    let rx = commit_snapshot_2_in_background(&store);
    let e = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the commit returns after the limit, not when the store comes back")
        .unwrap_err();
    assert!(matches!(e, Error::OutcomeUnknown(_)), "{e}");
    assert!(
        e.to_string().contains("may or may not have been applied"),
        "{e}"
    );
    // while the store still fails, the next statement cannot settle it: unknown, within the limit
    let still = store.begin().head_snapshot(M).unwrap_err();
    assert!(matches!(still, Error::OutcomeUnknown(_)), "{still}");
    assert!(still.to_string().contains("cannot say yet"), "{still}");
    assert_eq!(store.status().unwrap().state, "outcome unknown");
    // once the store is back, a next transaction settles it and goes on: no create reached
    // the store, so the commit object of batch 3 is absent; the attach creates it as a commit
    // that changes nothing, and the lost commit can never land
    faulty.fail_writes(false, true);
    let mut t = store.begin();
    assert_eq!(
        t.head_snapshot(M).unwrap(),
        Some(1),
        "the commit did not land"
    );
    drop(t);
    assert_eq!(store.status().unwrap().state, "open");
    assert_eq!(table_names(&store), vec![Text("kept".into())]);
    assert_eq!(store.head().unwrap().batch_count, 3);
    // and the attach commits again
    commit_table(&store, 2, 2, "after");
    store.close().unwrap();
    drop(store);
    // a fresh attach reads the same
    let store = reopen(&mem);
    assert_eq!(
        table_names(&store),
        vec![Text("kept".into()), Text("after".into())]
    );
}

/// A commit is durable once its object exists (RFC 0004 v3): with SlateDB unable to write its
/// WAL, a commit is still acknowledged, a reader reads it from the lake's tail, and a writer
/// killed before SlateDB stored it leaves the object, which the next attach to take the folder
/// role folds.
#[test]
fn a_commit_slatedb_never_stored_is_read_from_its_object_and_folded_by_the_next_folder() {
    let mem = Arc::new(object_store::memory::InMemory::new());
    let (faulty, store) = faulty_lake(&mem);
    let reader = Store::open_on(mem.clone(), true, "memory://reader").unwrap();
    assert_eq!(table_names(&reader), vec![Text("kept".into())]);
    faulty.fail_writes_under(Some("wal/"));
    commit_snapshot_2(&store).unwrap();
    let both = vec![Text("kept".into()), Text("lost".into())];
    assert_eq!(table_names(&store), both);
    // the reader's next pin after its poll interval reads the commit object
    std::thread::sleep(DEFAULT_READER_POLL);
    assert_eq!(table_names(&reader), both);
    let folded = block_on(reader.backend().get(&keys::sys_head())).unwrap();
    let folded = Head::decode(&folded.unwrap()).unwrap();
    assert!(
        folded.batch_count < 3,
        "SlateDB never stored it: {folded:?}"
    );
    // the writer is killed: never closed (its WAL writes keep failing)
    std::mem::forget(store);
    let store = reopen(&mem);
    assert_eq!(table_names(&store), both, "read from the tail");
    // the next folder (an attach's first commit takes the role) folds it
    store.take_folder_role().unwrap();
    assert_eq!(
        block_on(store.backend().get(&keys::sys_head()))
            .unwrap()
            .map(|v| Head::decode(&v).unwrap()),
        Some(Head {
            snapshot_id: Some(2),
            batch_count: 3
        }),
        "the open folded it"
    );
    faulty.fail_writes_under(None);
}

/// A commit object the store created but whose answer was lost: the commit's next attempt is
/// refused, reads the object and finds its own commit (acknowledged); when the store cannot be
/// read until the time limit, the outcome is unknown, and the next statement once the store
/// answers finds the commit landed.
#[test]
fn a_commit_whose_answer_was_lost_is_found_landed() {
    let mem = Arc::new(object_store::memory::InMemory::new());
    let (faulty, store) = faulty_lake(&mem);
    faulty.lose_commit_answers(true, false);
    commit_snapshot_2(&store).unwrap();
    assert!(faulty.injected() > 0, "an answer was lost");
    assert_eq!(
        table_names(&store),
        vec![Text("kept".into()), Text("lost".into())]
    );
    store.close().unwrap();
    drop(store);

    let store = reopen_limited(&faulty);
    faulty.lose_commit_answers(true, true);
    let e = commit_table_result(&store, 3, 3, "third").unwrap_err();
    assert!(matches!(e, Error::OutcomeUnknown(_)), "{e}");
    let still = store.begin().head_snapshot(M).unwrap_err();
    assert!(still.to_string().contains("cannot say yet"), "{still}");
    faulty.lose_commit_answers(false, false);
    assert_eq!(
        store.begin().head_snapshot(M).unwrap(),
        Some(3),
        "the commit landed"
    );
    assert_eq!(
        table_names(&store),
        vec![
            Text("kept".into()),
            Text("lost".into()),
            Text("third".into())
        ]
    );
    store.close().unwrap();
    drop(store);
    assert_eq!(
        table_names(&reopen(&mem)),
        vec![
            Text("kept".into()),
            Text("lost".into()),
            Text("third".into())
        ]
    );
}

#[test]
fn a_commit_during_a_retryable_object_store_outage_waits_and_is_stored_iff_acknowledged() {
    use std::time::Duration;
    // Errors SlateDB retries (a network failure, a 5xx): the commit waits for the store to come
    // back (SlateDB retries without bound by default), then lands and is acknowledged.
    let mem = Arc::new(object_store::memory::InMemory::new());
    let (faulty, store) = faulty_lake(&mem);
    faulty.fail_writes(true, true);
    let rx = commit_snapshot_2_in_background(&store);
    assert!(
        rx.recv_timeout(Duration::from_millis(1500)).is_err(),
        "the commit cannot be acknowledged while every write fails"
    );
    assert!(faulty.injected() > 0);
    faulty.fail_writes(false, true);
    rx.recv_timeout(Duration::from_secs(20))
        .expect("the commit returns once writes succeed")
        .unwrap();
    store.close().unwrap();
    drop(store);
    let store = reopen(&mem);
    assert_eq!(
        store.head().unwrap(),
        Head {
            snapshot_id: Some(2),
            batch_count: 3
        }
    );
    assert_eq!(
        table_names(&store),
        vec![Text("kept".into()), Text("lost".into())]
    );

    // A new writer opens the lake while the commit is still waiting: whichever wins, the commit
    // is stored exactly when it was acknowledged.
    let mem = Arc::new(object_store::memory::InMemory::new());
    let (faulty, store) = faulty_lake(&mem);
    faulty.fail_writes(true, true);
    let rx = commit_snapshot_2_in_background(&store);
    assert!(rx.recv_timeout(Duration::from_millis(1500)).is_err());
    faulty.fail_writes(false, true);
    let other = reopen_folder(&mem); // fences `store`
    let result = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the waiting commit returns once writes succeed or it is fenced");
    eprintln!("fenced-while-waiting outcome: {result:?}");
    drop(store);
    let other_head = other.head().unwrap();
    drop(other);
    let store = reopen(&mem);
    assert_eq!(store.head().unwrap(), other_head);
    match result {
        Ok(()) => assert_eq!(
            table_names(&store),
            vec![Text("kept".into()), Text("lost".into())],
            "an acknowledged commit is stored"
        ),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains("fenced"), "{msg}");
            assert_eq!(store.head().unwrap(), AFTER_COMMIT_1, "{msg}");
            assert_eq!(table_names(&store), vec![Text("kept".into())], "{msg}");
        }
    }
}

/// A commit larger than `moraine_max_commit_size` is refused naming the limit and the table of
/// its largest record, before anything is written; the next commit within the limit lands.
#[test]
fn a_commit_over_the_size_limit_is_refused_and_writes_nothing() {
    let url = mem_url("max-commit");
    let store =
        Store::open_with(&url, false, &[("max_commit_size".into(), "64KiB".into())]).unwrap();
    init_lake(&store);
    let head = store.head().unwrap();
    let option = |v: String| {
        row(
            "ducklake_metadata",
            &[
                ("key", Text("comment".into())),
                ("value", Text(v)),
                ("scope", Null),
                ("scope_id", Null),
            ],
        )
    };
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_metadata", vec![option("x".repeat(100_000))])
        .unwrap();
    let e = t.commit().unwrap_err();
    assert_eq!(e.kind(), crate::error::Kind::InvalidInput);
    let m = e.to_string();
    assert!(
        m.contains("moraine_max_commit_size (64.0 KiB)") && m.contains("of ducklake_metadata"),
        "{m}"
    );
    assert_eq!(store.head().unwrap(), head);
    assert_eq!(
        column_of(&store, "ducklake_metadata", false, "key").len(),
        1,
        "nothing of the refused commit is there"
    );
    let mut t = store.begin();
    t.stage_insert(M, "ducklake_metadata", vec![option("x".repeat(1_000))])
        .unwrap();
    t.commit().unwrap();
    assert_eq!(store.head().unwrap().batch_count, head.batch_count + 1);
    // a size the store cannot take is refused at open, naming it
    let Err(e) = Store::open_with(&url, false, &[("max_commit_size".into(), "2GiB".into())]) else {
        panic!("a 2GiB limit was accepted");
    };
    assert!(e.to_string().contains("'2GiB'"), "{e}");
}

/// The lake on `faulty` attached again, with a 1 s time limit.
fn reopen_limited(faulty: &Arc<faulty::FaultyStore>) -> Arc<Store> {
    Store::open_on_limited(
        faulty.clone(),
        false,
        "faulty://limited",
        std::time::Duration::from_secs(1),
    )
    .unwrap()
}
