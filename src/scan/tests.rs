//! The scan's decisions: which pushed-down filters it applies, whether it reads history, the
//! rows it keeps, and how it hands them to DuckDB.

use super::*;
use crate::cell::Cell::{Int, Null, Text};
use crate::testing::{def, mem_url, new_lake, row, M};

const FILES: &str = "ducklake_data_file";

fn p(filter: usize, clause: usize, column: &str, op: Op, value: Cell) -> Predicate {
    Predicate {
        filter,
        clause,
        column: def(FILES).column_index(column).unwrap(),
        op,
        value,
    }
}

/// The reading of one filter made of `predicates` (all of filter 0).
fn reading(predicates: &[Predicate]) -> Reading {
    let mut clauses: Vec<Vec<&Predicate>> = Vec::new();
    for p in predicates {
        if clauses.len() <= p.clause {
            clauses.resize_with(p.clause + 1, Vec::new);
        }
        clauses[p.clause].push(p);
    }
    read(&def(FILES), &clauses)
}

fn between(column: &str, lo: i64, hi: i64) -> Narrowing {
    Narrowing::Between {
        column: def(FILES).column_index(column).unwrap(),
        lo,
        hi,
    }
}

#[test]
fn integer_selections_and_ranges_are_applied_and_nothing_else() {
    let id = def(FILES).column_index("table_id").unwrap();
    // `table_id = 3`, `table_id IN (3, 5)`
    assert_eq!(
        reading(&[p(0, 0, "table_id", Op::Eq, Int(3))]),
        Reading::Applied(vec![Narrowing::In {
            column: id,
            values: vec![3]
        }])
    );
    assert_eq!(
        reading(&[
            p(0, 0, "table_id", Op::Eq, Int(3)),
            p(0, 0, "table_id", Op::Eq, Int(5))
        ]),
        Reading::Applied(vec![Narrowing::In {
            column: id,
            values: vec![3, 5]
        }])
    );
    // each comparison as inclusive bounds; BETWEEN as two clauses
    for (op, lo, hi) in [
        (Op::Lt, i64::MIN, 9),
        (Op::Le, i64::MIN, 10),
        (Op::Gt, 11, i64::MAX),
        (Op::Ge, 10, i64::MAX),
    ] {
        assert_eq!(
            reading(&[p(0, 0, "table_id", op, Int(10))]),
            Reading::Applied(vec![between("table_id", lo, hi)]),
            "{op:?}"
        );
    }
    assert_eq!(
        reading(&[
            p(0, 0, "table_id", Op::Gt, Int(1)),
            p(0, 1, "table_id", Op::Le, Int(5))
        ]),
        Reading::Applied(vec![
            between("table_id", 2, i64::MAX),
            between("table_id", i64::MIN, 5)
        ])
    );
    // what the scan cannot apply exactly stays with DuckDB: a bound past the integers, a text
    // column, a value of another kind or NULL, a disjunction over two columns, a mixed clause,
    // one clause of a filter it cannot apply
    for filter in [
        vec![p(0, 0, "table_id", Op::Lt, Int(i64::MIN))],
        vec![p(0, 0, "table_id", Op::Gt, Int(i64::MAX))],
        vec![p(0, 0, "path", Op::Eq, Text("x".into()))],
        vec![p(0, 0, "table_id", Op::Eq, Text("3".into()))],
        vec![p(0, 0, "table_id", Op::Eq, Null)],
        vec![
            p(0, 0, "table_id", Op::Eq, Int(3)),
            p(0, 0, "data_file_id", Op::Eq, Int(3)),
        ],
        vec![
            p(0, 0, "table_id", Op::Eq, Int(3)),
            p(0, 0, "table_id", Op::Gt, Int(9)),
        ],
        vec![
            p(0, 0, "table_id", Op::Eq, Int(3)),
            p(0, 1, "path", Op::Eq, Text("x".into())),
        ],
        vec![p(0, 0, "table_id", Op::IsNull, Null)],
    ] {
        assert_eq!(reading(&filter), Reading::Nothing, "{filter:?}");
    }
}

#[test]
fn end_snapshot_filters_tell_whether_history_is_needed() {
    let is_null = || p(0, 0, "end_snapshot", Op::IsNull, Null);
    assert_eq!(reading(&[is_null()]), Reading::OnlyLive);
    // `end_snapshot IS NULL OR end_snapshot > 4`, either order, and with >=
    for (op, floor) in [(Op::Gt, 4), (Op::Ge, 3)] {
        let above = p(0, 0, "end_snapshot", op, Int(4));
        assert_eq!(
            reading(&[is_null(), above.clone()]),
            Reading::LiveAfter(floor)
        );
        assert_eq!(reading(&[above, is_null()]), Reading::LiveAfter(floor));
    }
    // a floor below 0, a bound the other way, another column, a range alone (applied)
    assert_eq!(
        reading(&[is_null(), p(0, 0, "end_snapshot", Op::Ge, Int(0))]),
        Reading::Nothing
    );
    assert_eq!(
        reading(&[is_null(), p(0, 0, "end_snapshot", Op::Ge, Int(i64::MIN))]),
        Reading::Nothing
    );
    assert_eq!(
        reading(&[is_null(), p(0, 0, "end_snapshot", Op::Lt, Int(4))]),
        Reading::Nothing
    );
    assert_eq!(
        reading(&[
            p(0, 0, "begin_snapshot", Op::IsNull, Null),
            p(0, 0, "begin_snapshot", Op::Gt, Int(4))
        ]),
        Reading::Nothing
    );
    assert_eq!(
        reading(&[p(0, 0, "end_snapshot", Op::Gt, Int(4))]),
        Reading::Applied(vec![between("end_snapshot", 5, i64::MAX)])
    );

    let head = |h: Option<i64>| move || Ok(h);
    let need = |f: Filters, h: Option<i64>| f.need_history(head(h)).unwrap();
    assert!(need(Filters::default(), Some(5)));
    let live = Filters {
        only_live: true,
        ..Filters::default()
    };
    assert!(!need(live, Some(5)));
    let after = |s| Filters {
        live_after: Some(s),
        ..Filters::default()
    };
    assert!(!need(after(5), Some(5)), "live after head: no history");
    assert!(need(after(4), Some(5)), "live after an older snapshot");
    assert!(!need(after(0), None), "no snapshot yet: nothing ended");

    // a later pass with a lower floor keeps the higher one
    let mut filters = Filters::default();
    let floor = |s| [is_null(), p(0, 0, "end_snapshot", Op::Gt, Int(s))];
    assert_eq!(filters.push(&def(FILES), &floor(5), 1), vec![false]);
    assert_eq!(filters.push(&def(FILES), &floor(2), 1), vec![false]);
    assert_eq!(filters.live_after, Some(5));
}

#[test]
fn each_filter_is_recorded_once_and_a_filter_without_predicates_stays() {
    let mut filters = Filters::default();
    let preds = [
        p(0, 0, "table_id", Op::Eq, Int(3)),
        p(2, 0, "end_snapshot", Op::IsNull, Null),
        p(3, 1, "table_id", Op::Eq, Int(3)),
    ];
    // filter 1 has no predicate; filter 3 lacks its clause 0
    assert_eq!(
        filters.push(&def(FILES), &preds, 4),
        vec![true, false, false, false]
    );
    assert_eq!(
        filters.push(&def(FILES), &preds, 4),
        vec![true, false, false, false]
    );
    assert_eq!(filters.narrowings.len(), 1);
    assert!(filters.only_live);
}

/// A lake whose data-file table holds `n` rows: ids 0.., table ids id % 7, partition NULL
/// every third row, end_snapshot always NULL.
fn lake_with_files(n: i64) -> Arc<crate::store::Store> {
    let store = new_lake(&mem_url("scan"));
    let mut t = store.begin();
    t.create_table(def(FILES)).unwrap();
    let rows = (0..n)
        .map(|r| {
            let partition = if r % 3 == 0 { Null } else { Int(r % 5) };
            row(
                FILES,
                &[
                    ("data_file_id", Int(r)),
                    ("table_id", Int(r % 7)),
                    ("begin_snapshot", Int(0)),
                    ("partition_id", partition),
                    ("path", Text(format!("f{r}"))),
                ],
            )
        })
        .collect();
    t.stage_insert(M, FILES, rows).unwrap();
    t.commit().unwrap();
    store
}

#[test]
fn a_scan_keeps_its_rows_until_the_stamp_or_the_filters_change() {
    let store = lake_with_files(100);
    let mut t = store.begin();
    let scan = Scan::new(M, FILES);
    let first = scan.rows(&mut t).unwrap();
    assert_eq!(first.len(), 100);
    assert!(Arc::ptr_eq(&first.mat, &scan.rows(&mut t).unwrap().mat));
    // a filter applied: fewer rows, by index
    let pushed = scan.push(&mut t, &[p(0, 0, "table_id", Op::Eq, Int(3))], 1);
    assert_eq!(
        pushed,
        Pushdown {
            applied: vec![true],
            empty: false
        }
    );
    let narrowed = scan.rows(&mut t).unwrap();
    assert_eq!(narrowed.len(), 14);
    assert!(narrowed
        .explain()
        .contains(&("Rows", "14 (by index)".into())));
    // a selection nothing passes: DuckDB is told the scan is empty
    let pushed = scan.push(&mut t, &[p(0, 0, "data_file_id", Op::Eq, Int(-5))], 1);
    assert!(pushed.empty && pushed.applied == vec![true]);
    assert!(scan.rows(&mut t).unwrap().is_empty());
    // a staged write to the table: read again
    let again = Scan::new(M, FILES);
    let before = again.rows(&mut t).unwrap();
    t.stage_insert(M, FILES, vec![row(FILES, &[("data_file_id", Int(100))])])
        .unwrap();
    let after = again.rows(&mut t).unwrap();
    assert!(!Arc::ptr_eq(&before.mat, &after.mat));
    assert_eq!(after.len(), 101);
    // a table that is not there: nothing applied, and the scan's error says which
    let missing = Scan::new(M, "nope");
    let pushed = missing.push(&mut t, &[p(0, 0, "table_id", Op::Eq, Int(3))], 1);
    assert_eq!(pushed.applied, vec![false]);
    assert!(missing.rows(&mut t).is_err());
}

#[test]
fn a_scan_at_head_of_live_rows_reads_no_history() {
    let store = lake_with_files(10);
    let mut t = store.begin();
    let scan = Scan::new(M, FILES);
    assert!(scan
        .rows(&mut t)
        .unwrap()
        .explain()
        .contains(&("History read", "yes".into())));
    let live = [p(0, 0, "end_snapshot", Op::IsNull, Null)];
    assert_eq!(scan.push(&mut t, &live, 1).applied, vec![false]);
    let rows = scan.rows(&mut t).unwrap();
    assert!(rows.explain().contains(&("History read", "no".into())));
    assert_eq!(rows.explain()[0], ("Table", FILES.to_string()));
}

/// `ints` against `cell`, vector by vector, over columns whose cells are never, sometimes and
/// always NULL, unnarrowed and narrowed (densely and sparsely): the same values and validity,
/// and the NULLs counted exactly.
#[test]
fn integer_vectors_count_their_nulls() {
    let n = 5000;
    let store = lake_with_files(n);
    let mut t = store.begin();
    let column = |name: &str| def(FILES).column_index(name).unwrap();
    let (id, end, partition) = (
        column("data_file_id"),
        column("end_snapshot"),
        column("partition_id"),
    );
    let whole = Scan::new(M, FILES);
    let dense = Scan::new(M, FILES);
    dense.push(
        &mut t,
        &[
            p(0, 0, "data_file_id", Op::Ge, Int(100)),
            p(0, 1, "data_file_id", Op::Le, Int(4000)),
        ],
        1,
    );
    let sparse = Scan::new(M, FILES);
    let few = [3, 2048, 4999].map(|v| p(0, 0, "data_file_id", Op::Eq, Int(v)));
    sparse.push(&mut t, &few, 1);
    for (scan, len) in [(whole, n as usize), (dense, 3901), (sparse, 3)] {
        let rows = scan.rows(&mut t).unwrap();
        assert_eq!(rows.len(), len);
        for col in [id, end, partition] {
            let mut start = 0;
            while start < len {
                let count = (len - start).min(2048);
                let mut values = vec![-1_i64; count];
                let mut valid = vec![7_u8; count];
                let nulls = rows
                    .ints(start, col, 0, IntsOut::I64(&mut values), &mut valid)
                    .unwrap();
                let mut want_nulls = 0;
                for i in 0..count {
                    match rows.cell(start + i, col) {
                        Some(Int(v)) => assert_eq!((valid[i], values[i]), (1, *v)),
                        Some(Null) => {
                            want_nulls += 1;
                            assert_eq!(valid[i], 0, "column {col} row {}", start + i);
                        }
                        other => panic!("{other:?}"),
                    }
                }
                assert_eq!(nulls, want_nulls, "column {col} rows {start}+{count}");
                if col == end {
                    assert_eq!(nulls, count);
                }
                if col == id {
                    assert_eq!(nulls, 0);
                }
                start += count;
            }
        }
        // 32-bit vectors take the same values; a text column is read cell by cell
        let mut values = vec![0_i32; len.min(2048)];
        let mut valid = vec![0_u8; values.len()];
        assert_eq!(
            rows.ints(0, id, 0, IntsOut::I32(&mut values), &mut valid),
            Some(0)
        );
        assert_eq!(Some(&Int(i64::from(values[0]))), rows.cell(0, id));
        assert_eq!(
            rows.ints(0, column("path"), 0, IntsOut::I32(&mut values), &mut valid),
            None
        );
    }
}

#[test]
fn serialized_integers_are_read_and_what_does_not_fit_is_refused() {
    const TIMESTAMP_TZ: u8 = 32;
    let store = new_lake(&mem_url("scan-ints"));
    let mut t = store.begin();
    let scan = Scan::new(M, "ducklake_snapshot");
    let rows = scan.rows(&mut t).unwrap();
    let time = def("ducklake_snapshot")
        .column_index("snapshot_time")
        .unwrap();
    // the lake's snapshot 0: its time is whatever the test helper stored
    let stored = rows.cell(0, time).cloned();
    let mut values = [0_i64; 1];
    let mut valid = [0_u8; 1];
    let read = rows.ints(0, time, TIMESTAMP_TZ, IntsOut::I64(&mut values), &mut valid);
    match stored {
        Some(Cell::Blob(b)) => assert_eq!(read.map(|_| values[0]), serialized::integer(&b, 32)),
        Some(Null) => assert_eq!((read, valid[0]), (Some(1), 0)),
        _ => assert_eq!(read, None),
    }
    // an integer that a 32-bit vector cannot hold
    let id = def("ducklake_snapshot")
        .column_index("snapshot_id")
        .unwrap();
    t.stage_insert(
        M,
        "ducklake_snapshot",
        vec![row(
            "ducklake_snapshot",
            &[("snapshot_id", Int(i64::from(i32::MAX) + 1))],
        )],
    )
    .unwrap();
    let rows = scan.rows(&mut t).unwrap();
    let mut narrow = [0_i32; 2];
    let mut valid = [0_u8; 2];
    assert_eq!(
        rows.ints(0, id, 0, IntsOut::I32(&mut narrow), &mut valid),
        None
    );
    // integers are not read as serialized values, nor serialized values as integers
    let mut wide = [0_i64; 2];
    assert_eq!(
        rows.ints(0, id, TIMESTAMP_TZ, IntsOut::I64(&mut wide), &mut valid),
        None
    );
}

#[test]
fn a_stored_cell_its_column_cannot_hold_is_a_corrupt_record_naming_it() {
    let store = new_lake(&mem_url("scan-misfit"));
    let mut t = store.begin();
    let table = "ducklake_metadata";
    let rows = Scan::new(M, table).rows(&mut t).unwrap();
    let column = def(table).columns[0].name.clone();
    let Some(Text(stored)) = rows.cell(0, 0).cloned() else {
        panic!("{:?}", rows.cell(0, 0));
    };
    let e = rows.misfit(0, 0, &column, "INTEGER", "");
    assert!(matches!(e, Error::Corrupt(_)) && !e.retryable());
    assert_eq!(
        e.to_string(),
        format!(
            "corrupt record: main.{table}, column {column} (INTEGER), rowid {}: the store holds \
             the text {stored:?} ({} bytes), which INTEGER cannot hold",
            rows.rowid(0),
            stored.len()
        )
    );
    let why = "does not deserialize (not enough data)";
    let text = rows
        .clone()
        .misfit(0, 0, &column, "INTEGER", why)
        .to_string();
    assert!(text.ends_with(&format!(", which {why}")), "{text}");
    // what is stored, shortened when long
    let long = describe(Some(&Text("x".repeat(1000))));
    assert!(
        long.contains(&format!("\"{}\"... (1000 bytes)", "x".repeat(64))),
        "{long}"
    );
    assert_eq!(describe(Some(&Int(300))), "the integer 300");
    assert_eq!(
        describe(Some(&Cell::Blob((0..40).collect()))),
        format!(
            "a serialized DuckDB value of 40 bytes ({}...)",
            (0..32).map(|x| format!("{x:02x}")).collect::<String>()
        )
    );
}
