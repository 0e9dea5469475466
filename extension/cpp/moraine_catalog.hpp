// moraine's DuckDB catalog glue: thin subclasses of DuckDB's catalog classes that marshal
// between DuckDB and the Rust core (moraine_ffi.h). No catalog logic lives here.
#pragma once

#include "duckdb.hpp"
#include "duckdb/catalog/catalog.hpp"
#include "duckdb/catalog/catalog_entry/schema_catalog_entry.hpp"
#include "duckdb/catalog/catalog_entry/table_catalog_entry.hpp"
#include "duckdb/common/case_insensitive_map.hpp"
#include "duckdb/function/table_function.hpp"
#include "duckdb/storage/storage_extension.hpp"
#include "duckdb/transaction/transaction.hpp"
#include "duckdb/transaction/transaction_manager.hpp"
#include "moraine_ffi.h"

namespace duckdb {

class MoraineTransaction;
class MoraineEntries;
class ExtensionLoader;

//! Throws a DuckDB exception carrying a Rust error (and frees it).
[[noreturn]] void MoraineThrow(MoraineError &err);
//! Frees the Rust error and returns its message.
string MoraineTakeError(MoraineError &err);

//! What a callback Rust calls collects, and the first exception it caught: no exception may
//! leave a callback while Rust is on the stack, so each keeps it here and the C++ caller
//! rethrows it (MoraineRethrow) once the moraine_* call has returned.
struct MoraineCallbackState {
	std::exception_ptr caught;
};
//! Runs a callback's body; an exception is kept in `state` and later calls do nothing.
template <class F>
void MoraineCallback(MoraineCallbackState &state, F &&body) noexcept {
	if (state.caught) {
		return;
	}
	try {
		body();
	} catch (...) {
		state.caught = std::current_exception();
	}
}
//! Rethrows what a callback caught, if anything.
inline void MoraineRethrow(MoraineCallbackState &state) {
	if (state.caught) {
		std::rethrow_exception(state.caught);
	}
}

// ---- cell marshalling (moraine_cells.cpp) ----
//! Converts one DuckDB value to a cell; `scratch` owns any bytes the cell points at.
void MoraineValueToCell(const Value &value, const LogicalType &type, MoraineCell &cell, string &scratch);
//! Writes one cell into row `row` of a flat vector. False, writing nothing, when the cell does
//! not fit the vector's type (a cell of another kind, an integer the type cannot hold, stored
//! bytes that do not deserialize or convert; `why` then says what failed, or is left empty):
//! the caller reports it through moraine_mat_misfit, never as an InternalException.
bool MoraineWriteCell(Vector &vector, idx_t row, const MoraineCell &cell, string &why);
//! Whether moraine holds values of this type as integer cells (the only columns an index serves).
bool MoraineHeldAsInteger(const LogicalType &type);
string MoraineSerializeType(const LogicalType &type);
LogicalType MoraineDeserializeType(const uint8_t *data, size_t len);
//! Pushes every row of `chunk` (columns in order) into `rows`.
void MoraineAppendChunk(MoraineRows *rows, DataChunk &chunk);

// ---- catalog ----
struct MoraineStoreRef {
	explicit MoraineStoreRef(MoraineStore *store) : store(store) {
	}
	~MoraineStoreRef() {
		moraine_store_free(store);
	}
	MoraineStore *store;
};

class MoraineCatalog : public Catalog {
public:
	MoraineCatalog(AttachedDatabase &db, shared_ptr<MoraineStoreRef> store, string url, bool read_only);

	shared_ptr<MoraineStoreRef> store;
	string url;
	bool read_only;

	//! The entries built for the committed definitions with this id (moraine_txn_definitions):
	//! the latest set is kept, and an older one found again while a transaction still uses it;
	//! otherwise a set is built anew.
	shared_ptr<MoraineEntries> SharedEntries(uint64_t id);

private:
	mutex shared_lock;
	uint64_t shared_id = 0;
	shared_ptr<MoraineEntries> shared;
	unordered_map<uint64_t, weak_ptr<MoraineEntries>> others;

public:
	void Initialize(bool load_builtin) override {
	}
	string GetCatalogType() override {
		return "moraine";
	}
	optional_ptr<CatalogEntry> CreateSchema(CatalogTransaction transaction, CreateSchemaInfo &info) override;
	void ScanSchemas(ClientContext &context, std::function<void(SchemaCatalogEntry &)> callback) override;
	optional_ptr<SchemaCatalogEntry> LookupSchema(CatalogTransaction transaction, const EntryLookupInfo &schema_lookup,
	                                              OnEntryNotFound if_not_found) override;
	PhysicalOperator &PlanCreateTableAs(ClientContext &context, PhysicalPlanGenerator &planner, LogicalCreateTable &op,
	                                    PhysicalOperator &plan) override;
	PhysicalOperator &PlanInsert(ClientContext &context, PhysicalPlanGenerator &planner, LogicalInsert &op,
	                             optional_ptr<PhysicalOperator> plan) override;
	PhysicalOperator &PlanDelete(ClientContext &context, PhysicalPlanGenerator &planner, LogicalDelete &op,
	                             PhysicalOperator &plan) override;
	PhysicalOperator &PlanUpdate(ClientContext &context, PhysicalPlanGenerator &planner, LogicalUpdate &op,
	                             PhysicalOperator &plan) override;
	DatabaseSize GetDatabaseSize(ClientContext &context) override;
	bool InMemory() override;
	string GetDBPath() override;
	void DropSchema(ClientContext &context, DropInfo &info) override;
};

class MoraineTableEntry;

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
	//! This schema as `transaction` sees it now: this one, or its current set's (null if that
	//! set has no schema of this name).
	optional_ptr<MoraineSchemaEntry> Current(MoraineTransaction &transaction);
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

class MoraineTableEntry : public TableCatalogEntry {
public:
	MoraineTableEntry(Catalog &catalog, SchemaCatalogEntry &schema, CreateTableInfo &info);

public:
	unique_ptr<BaseStatistics> GetStatistics(ClientContext &context, column_t column_id) override;
	TableFunction GetScanFunction(ClientContext &context, unique_ptr<FunctionData> &bind_data) override;
	TableStorageInfo GetStorageInfo(ClientContext &context) override;
};

// ---- transactions ----
class MoraineTransaction : public Transaction {
public:
	MoraineTransaction(MoraineCatalog &catalog, TransactionManager &manager, ClientContext &context);
	~MoraineTransaction() override;

	static MoraineTransaction &Get(ClientContext &context, Catalog &catalog);

	MoraineCatalog &catalog;
	//! The Rust transaction, begun lazily; owned until Commit/Rollback.
	MoraineTxn *Txn();
	void Commit();
	void Rollback();

	//! The catalog entries this transaction sees: the catalog's shared set for its committed
	//! definitions, chosen at first use, or its own once it staged DDL.
	shared_ptr<MoraineEntries> Entries();
	optional_ptr<MoraineSchemaEntry> GetSchema(const string &name);
	void ScanSchemas(const std::function<void(SchemaCatalogEntry &)> &callback);
	//! After DDL: the next use chooses the set again. The set in use stays alive until the
	//! transaction ends, so references handed to DuckDB stay valid.
	void InvalidateEntries();

private:
	mutex lock;
	MoraineTxn *txn = nullptr;
	mutex entries_lock;
	shared_ptr<MoraineEntries> entries;
	vector<shared_ptr<MoraineEntries>> retired;
};

class MoraineTransactionManager : public TransactionManager {
public:
	MoraineTransactionManager(AttachedDatabase &db, MoraineCatalog &catalog);

	Transaction &StartTransaction(ClientContext &context) override;
	ErrorData CommitTransaction(ClientContext &context, Transaction &transaction) override;
	void RollbackTransaction(Transaction &transaction) override;
	void Checkpoint(ClientContext &context, bool force = false) override {
	}

private:
	MoraineCatalog &catalog;
	mutex transaction_lock;
	reference_map_t<Transaction, unique_ptr<MoraineTransaction>> transactions;
};

// ---- storage extension and functions ----
shared_ptr<StorageExtension> MoraineStorageExtension();
void MoraineRegisterFunctions(ExtensionLoader &loader);

} // namespace duckdb
