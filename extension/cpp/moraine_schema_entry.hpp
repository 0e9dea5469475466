// A schema of a lake (moraine_schema_entry.cpp).
#pragma once

#include "duckdb/catalog/catalog_entry/schema_catalog_entry.hpp"
#include "duckdb/common/case_insensitive_map.hpp"
#include "moraine_ffi.h"
#include "moraine_table_entry.hpp"

namespace duckdb {

class MoraineEntries;
class MoraineTransaction;

//! One schema of a set of entries (MoraineEntries). It holds no transaction: each call takes the
//! caller's, and a call from a transaction whose current set is another (it staged DDL since)
//! is answered by that set's schema of the same name.
class MoraineSchemaEntry : public SchemaCatalogEntry {
public:
	MoraineSchemaEntry(Catalog &catalog, CreateSchemaInfo &info, MoraineEntries &owner);

	MoraineEntries &owner;

public:
	optional_ptr<CatalogEntry> CreateTable(CatalogTransaction transaction, BoundCreateTableInfo &info) override;
	optional_ptr<CatalogEntry> CreateFunction(CatalogTransaction transaction, CreateFunctionInfo &info) override;
	optional_ptr<CatalogEntry> CreateIndex(CatalogTransaction transaction, CreateIndexInfo &info,
	                                       TableCatalogEntry &table) override;
	optional_ptr<CatalogEntry> CreateView(CatalogTransaction transaction, CreateViewInfo &info) override;
	optional_ptr<CatalogEntry> CreateSequence(CatalogTransaction transaction, CreateSequenceInfo &info) override;
	optional_ptr<CatalogEntry> CreateTableFunction(CatalogTransaction transaction,
	                                               CreateTableFunctionInfo &info) override;
	optional_ptr<CatalogEntry> CreateCopyFunction(CatalogTransaction transaction,
	                                              CreateCopyFunctionInfo &info) override;
	optional_ptr<CatalogEntry> CreatePragmaFunction(CatalogTransaction transaction,
	                                                CreatePragmaFunctionInfo &info) override;
	optional_ptr<CatalogEntry> CreateCollation(CatalogTransaction transaction, CreateCollationInfo &info) override;
	optional_ptr<CatalogEntry> CreateType(CatalogTransaction transaction, CreateTypeInfo &info) override;
	void Alter(CatalogTransaction transaction, AlterInfo &info) override;
	void Scan(ClientContext &context, CatalogType type, const std::function<void(CatalogEntry &)> &callback) override;
	void Scan(CatalogType type, const std::function<void(CatalogEntry &)> &callback) override;
	void DropEntry(ClientContext &context, DropInfo &info) override;
	optional_ptr<CatalogEntry> LookupEntry(CatalogTransaction transaction, const EntryLookupInfo &lookup_info) override;

private:
	//! This schema as `transaction` sees it now: this one, or its current set's (if that set has
	//! no schema of this name: null, or a CatalogException when `required`).
	optional_ptr<MoraineSchemaEntry> Current(MoraineTransaction &transaction, bool required);
	//! Every table, read through `txn` once (called without `lock`, which it takes).
	void LoadTables(MoraineTxn *txn);
	MoraineTableEntry &AddTable(const string &table_name, const vector<pair<string, string>> &columns);
	//! The tables added so far (taking `lock`).
	vector<reference<MoraineTableEntry>> LoadedTables();
	//! Guards `tables` and `tables_loaded`: a shared schema serves concurrent transactions.
	mutex lock;
	//! Every table of the schema is in `tables` (else only those looked up so far).
	bool tables_loaded = false;
	//! Never shrinks: DuckDB may hold any entry handed out while the set lives.
	case_insensitive_map_t<unique_ptr<MoraineTableEntry>> tables;
};

} // namespace duckdb
