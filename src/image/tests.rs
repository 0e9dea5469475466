//! Image tests: the spaces keys lie in, history ranges, values computed once, and rows served
//! from records kept encoded.

use super::history::HistoryHeld;
use super::serve::Once;
use super::spaces::{history_range_end, is_history_prefix, place_of, place_space, Place};
use crate::catalog::Kind;
use crate::cell::{decode_row, Cell, Row};
use crate::error::Error;
use crate::keys;
use crate::kinds;
use crate::rowset::RowSet;
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
    let once = Arc::new(Once::new());
    let computed = Arc::new(AtomicUsize::new(0));
    let askers: Vec<_> = (0..4)
        .map(|_| {
            let (once, computed) = (once.clone(), computed.clone());
            std::thread::spawn(move || {
                once.get_or_try(|| {
                    computed.fetch_add(1, Ordering::SeqCst);
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    Ok(7)
                })
                .unwrap()
            })
        })
        .collect();
    for a in askers {
        assert_eq!(a.join().unwrap(), 7);
    }
    assert_eq!(computed.load(Ordering::SeqCst), 1);
    let failing = Once::new();
    assert!(failing
        .get_or_try(|| Err(Error::Corrupt("damaged".into())))
        .is_err());
    assert_eq!(failing.get_or_try(|| Ok(3)).unwrap(), 3);
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
