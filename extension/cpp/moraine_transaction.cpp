// A DuckDB transaction on a moraine lake: owns one Rust transaction (begun lazily) and keeps
// alive the catalog entries handed to DuckDB while it lives (moraine_entries.cpp).
#include "moraine_transaction.hpp"

#include "moraine_catalog.hpp"
#include "moraine_entries.hpp"
#include "moraine_error.hpp"

namespace duckdb {

MoraineTransaction::MoraineTransaction(MoraineCatalog &catalog, TransactionManager &manager, ClientContext &context)
    : Transaction(manager, context), catalog(catalog) {
}

MoraineTransaction::~MoraineTransaction() {
	if (txn) {
		moraine_txn_rollback(txn);
		txn = nullptr;
	}
}

MoraineTransaction &MoraineTransaction::Get(ClientContext &context, Catalog &catalog) {
	return Transaction::Get(context, catalog).Cast<MoraineTransaction>();
}

MoraineTransaction &MoraineTransaction::Get(CatalogTransaction transaction) {
	if (!transaction.transaction) {
		throw InternalException("moraine: catalog access without a transaction");
	}
	return transaction.transaction->Cast<MoraineTransaction>();
}

MoraineTxn *MoraineTransaction::Txn() {
	lock_guard<mutex> guard(lock);
	if (!txn) {
		MoraineError err {};
		txn = moraine_txn_begin(catalog.store->store, &err);
		if (!txn) {
			MoraineThrow(err);
		}
	}
	return txn;
}

void MoraineTransaction::Commit() {
	MoraineTxn *to_commit;
	{
		lock_guard<mutex> guard(lock);
		to_commit = txn;
		txn = nullptr;
	}
	if (!to_commit) {
		return;
	}
	MoraineError err {};
	MoraineCheck(moraine_txn_commit(to_commit, &err), err);
}

void MoraineTransaction::Rollback() {
	lock_guard<mutex> guard(lock);
	if (txn) {
		moraine_txn_rollback(txn);
		txn = nullptr;
	}
}

shared_ptr<MoraineEntries> MoraineTransaction::Entries() {
	auto moraine_txn = Txn();
	lock_guard<mutex> guard(entries_lock);
	if (!entries) {
		uint64_t id = 0;
		MoraineError err {};
		auto shareable = moraine_txn_definitions(moraine_txn, &id, &err);
		if (shareable < 0) {
			MoraineThrow(err);
		}
		entries = shareable == 1 ? catalog.SharedEntries(id) : make_shared_ptr<MoraineEntries>(catalog);
	}
	return entries;
}

optional_ptr<MoraineSchemaEntry> MoraineTransaction::GetSchema(const string &name) {
	return Entries()->GetSchema(Txn(), name);
}

void MoraineTransaction::ScanSchemas(const std::function<void(SchemaCatalogEntry &)> &callback) {
	// (held here: the schemas live as long as their set)
	auto entries = Entries();
	for (auto &schema : entries->Schemas(Txn())) {
		callback(schema.get());
	}
}

void MoraineTransaction::InvalidateEntries() {
	lock_guard<mutex> guard(entries_lock);
	if (entries) {
		retired.push_back(std::move(entries));
	}
	entries = nullptr;
}

} // namespace duckdb
