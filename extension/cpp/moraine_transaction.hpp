// A DuckDB transaction on a moraine lake (moraine_transaction.cpp).
#pragma once

#include "duckdb/catalog/catalog_transaction.hpp"
#include "duckdb/transaction/transaction.hpp"
#include "moraine_ffi.h"

namespace duckdb {

class MoraineCatalog;
class MoraineEntries;
class MoraineSchemaEntry;

class MoraineTransaction : public Transaction {
public:
	MoraineTransaction(MoraineCatalog &catalog, TransactionManager &manager, ClientContext &context);
	~MoraineTransaction() override;

	static MoraineTransaction &Get(ClientContext &context, Catalog &catalog);
	static MoraineTransaction &Get(CatalogTransaction transaction);

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

} // namespace duckdb
