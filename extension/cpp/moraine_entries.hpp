// The sets of schema entries DuckDB's binder sees (moraine_entries.cpp).
#pragma once

#include "duckdb/common/case_insensitive_map.hpp"
#include "moraine_schema_entry.hpp"

namespace duckdb {

class MoraineCatalog;

//! The schema and table entries of one set of definitions: the committed ones of an id,
//! shared by every transaction that sees them (kept by the catalog), or one transaction's own
//! once it staged DDL. Entries are built lazily and never removed, so a reference handed to
//! DuckDB lives as long as the set, which every transaction that used it keeps alive.
class MoraineEntries {
public:
	explicit MoraineEntries(MoraineCatalog &catalog) : catalog(catalog) {
	}

	MoraineCatalog &catalog;

	optional_ptr<MoraineSchemaEntry> GetSchema(MoraineTxn *txn, const string &name);
	vector<reference<MoraineSchemaEntry>> Schemas(MoraineTxn *txn);

private:
	//! Every schema, read through `txn` once (called without `lock`, which it takes).
	void LoadSchemas(MoraineTxn *txn);
	mutex lock;
	bool schemas_loaded = false;
	case_insensitive_map_t<unique_ptr<MoraineSchemaEntry>> schemas;
};

} // namespace duckdb
