//! moraine's operator views as DuckDB table functions show them: each view's columns, and its
//! rows of an open store. `moraine_keyspace` (keys per keyspace and kind), `moraine_status`
//! (one row: [`crate::status::Status`]), `moraine_metrics` (SlateDB's metrics) and
//! `moraine_reclaim` (one row: [`crate::store::Reclaimed`], made at its scan with the caller's
//! facts, [`crate::store::Store::reclaim_for`]) and `moraine_objects_holding` (the objects of the
//! store that hold its second argument's bytes, as stored or decoded:
//! [`crate::store::Store::objects_holding`]).

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::status::Field;
use crate::store::{Reclaimed, Store};

/// One row of a view: each column's name and value, in order.
pub type Row = Vec<(&'static str, Field)>;

/// One of the operator views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Keyspace,
    Status,
    Metrics,
    Reclaim,
    ObjectsHolding,
}

impl View {
    /// The view a table function's name names.
    pub fn named(name: &str) -> Result<View> {
        match name {
            "moraine_keyspace" => Ok(View::Keyspace),
            "moraine_status" => Ok(View::Status),
            "moraine_metrics" => Ok(View::Metrics),
            "moraine_reclaim" => Ok(View::Reclaim),
            "moraine_objects_holding" => Ok(View::ObjectsHolding),
            other => Err(Error::InvalidInput(format!(
                "moraine: no operator view is named \"{other}\""
            ))),
        }
    }

    /// The view's columns, as a row whose values mean nothing but their kind (for a bind).
    pub fn columns(self) -> Row {
        let text = || Field::Text(None);
        let int = || Field::Int(None);
        match self {
            View::Keyspace => vec![("keyspace", text()), ("kind", text()), ("keys", int())],
            View::Metrics => vec![("name", text()), ("labels", text()), ("value", int())],
            View::Status => crate::status::Status::default().fields(),
            View::Reclaim => Reclaimed::default().fields(),
            View::ObjectsHolding => vec![("object", text()), ("found", text())],
        }
    }

    /// The view's arguments after the lake's name (`moraine_objects_holding`: the text to look
    /// for).
    pub fn extra_arguments(self) -> usize {
        match self {
            View::ObjectsHolding => 1,
            _ => 0,
        }
    }

    /// The view's rows of `store` now (`argument`: its argument after the lake's name, if it
    /// takes one); `None` for `moraine_reclaim`, which has none to read: it acts, at its scan,
    /// each time it runs.
    pub fn rows(self, store: &Arc<Store>, argument: &str) -> Result<Option<Vec<Row>>> {
        let text = |s: String| Field::Text(Some(s));
        let three = |rows: Vec<(String, String, i64)>, names: [&'static str; 3]| {
            rows.into_iter()
                .map(|(a, b, n)| {
                    vec![
                        (names[0], text(a)),
                        (names[1], text(b)),
                        (names[2], Field::Int(Some(n))),
                    ]
                })
                .collect()
        };
        match self {
            View::Keyspace => {
                let counts = store.keyspace_counts()?.into_iter();
                let counts =
                    counts.map(|(k, kind, n)| (k, kind, i64::try_from(n).unwrap_or(i64::MAX)));
                Ok(Some(three(counts.collect(), ["keyspace", "kind", "keys"])))
            }
            View::Metrics => Ok(Some(three(store.metrics(), ["name", "labels", "value"]))),
            View::Status => Ok(Some(vec![store.status()?.fields()])),
            View::Reclaim => Ok(None),
            View::ObjectsHolding => Ok(Some(
                store
                    .objects_holding(argument.as_bytes())?
                    .into_iter()
                    .map(|h| vec![("object", text(h.object)), ("found", text(h.found.into()))])
                    .collect(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(row: &Row) -> Vec<&'static str> {
        row.iter().map(|(name, _)| *name).collect()
    }

    fn kinds(row: &Row) -> Vec<std::mem::Discriminant<Field>> {
        row.iter()
            .map(|(_, field)| std::mem::discriminant(field))
            .collect()
    }

    #[test]
    fn each_view_s_rows_have_its_columns() {
        let dir = tempfile::tempdir().unwrap();
        let url = dir.path().join("lake").to_str().unwrap().to_string();
        let store = Store::open_with(&url, false, &[]).unwrap();
        for (view, argument) in [
            (View::Keyspace, ""),
            (View::Status, ""),
            (View::Metrics, ""),
            (View::ObjectsHolding, "sys"),
        ] {
            let columns = view.columns();
            let rows = view.rows(&store, argument).unwrap().unwrap();
            assert!(!rows.is_empty(), "{view:?} has rows on a new lake");
            for row in &rows {
                assert_eq!(names(row), names(&columns), "{view:?}");
                assert_eq!(kinds(row), kinds(&columns), "{view:?}");
            }
        }
        assert_eq!(View::Status.rows(&store, "").unwrap().unwrap().len(), 1);
        assert_eq!(
            names(&View::Keyspace.columns()),
            ["keyspace", "kind", "keys"]
        );
        assert_eq!(names(&View::Reclaim.columns())[0], "head_batch");
        assert!(View::Reclaim.rows(&store, "").unwrap().is_none());
    }

    #[test]
    fn a_view_is_named_by_its_function() {
        for (name, view) in [
            ("moraine_keyspace", View::Keyspace),
            ("moraine_status", View::Status),
            ("moraine_metrics", View::Metrics),
            ("moraine_reclaim", View::Reclaim),
            ("moraine_objects_holding", View::ObjectsHolding),
        ] {
            assert_eq!(View::named(name).unwrap(), view);
        }
        let err = View::named("moraine_nothing").unwrap_err().to_string();
        assert!(
            err.contains("no operator view is named \"moraine_nothing\""),
            "{err}"
        );
    }
}
