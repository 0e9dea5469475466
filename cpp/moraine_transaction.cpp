// A DuckDB transaction on a moraine lake: owns one Rust transaction (begun lazily) and the
// catalog entries handed to DuckDB while it lives.
#include "moraine_catalog.hpp"

#include "duckdb/parser/parsed_data/create_schema_info.hpp"

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

MoraineTxn *MoraineTransaction::Txn() {
	lock_guard<mutex> guard(lock);
	if (!txn) {
		MoraineError err {nullptr, 0, MORAINE_ERROR_NONE};
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
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE};
	if (moraine_txn_commit(to_commit, &err) != 0) {
		MoraineThrow(err);
	}
}

void MoraineTransaction::Rollback() {
	lock_guard<mutex> guard(lock);
	if (txn) {
		moraine_txn_rollback(txn);
		txn = nullptr;
	}
}

struct NameList : MoraineCallbackState {
	vector<string> names;
};

static void CollectName(void *ud, const char *name, size_t len) {
	auto &list = *static_cast<NameList *>(ud);
	MoraineCallback(list, [&]() { list.names.emplace_back(name, len); });
}

void MoraineTransaction::LoadSchemas() {
	if (schemas_loaded) {
		return;
	}
	NameList list;
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE};
	if (moraine_txn_schemas(Txn(), &list, CollectName, &err) != 0) {
		MoraineThrow(err);
	}
	MoraineRethrow(list);
	for (auto &name : list.names) {
		CreateSchemaInfo info;
		info.schema = name;
		schemas[name] = make_uniq<MoraineSchemaEntry>(catalog, info, *this);
	}
	schemas_loaded = true;
}

optional_ptr<MoraineSchemaEntry> MoraineTransaction::GetSchema(const string &name) {
	LoadSchemas();
	auto entry = schemas.find(name);
	if (entry == schemas.end()) {
		return nullptr;
	}
	return entry->second.get();
}

void MoraineTransaction::ScanSchemas(const std::function<void(SchemaCatalogEntry &)> &callback) {
	LoadSchemas();
	for (auto &entry : schemas) {
		callback(*entry.second);
	}
}

void MoraineTransaction::InvalidateEntries() {
	for (auto &entry : schemas) {
		retired.push_back(std::move(entry.second));
	}
	schemas.clear();
	schemas_loaded = false;
}

void MoraineTransaction::Retire(unique_ptr<CatalogEntry> entry) {
	retired.push_back(std::move(entry));
}

MoraineTransactionManager::MoraineTransactionManager(AttachedDatabase &db, MoraineCatalog &catalog)
    : TransactionManager(db), catalog(catalog) {
}

Transaction &MoraineTransactionManager::StartTransaction(ClientContext &context) {
	auto transaction = make_uniq<MoraineTransaction>(catalog, *this, context);
	auto &result = *transaction;
	lock_guard<mutex> guard(transaction_lock);
	transactions[result] = std::move(transaction);
	return result;
}

ErrorData MoraineTransactionManager::CommitTransaction(ClientContext &context, Transaction &transaction) {
	auto &moraine_transaction = transaction.Cast<MoraineTransaction>();
	ErrorData result;
	try {
		moraine_transaction.Commit();
	} catch (std::exception &ex) {
		result = ErrorData(ex);
	}
	lock_guard<mutex> guard(transaction_lock);
	transactions.erase(transaction);
	return result;
}

void MoraineTransactionManager::RollbackTransaction(Transaction &transaction) {
	auto &moraine_transaction = transaction.Cast<MoraineTransaction>();
	moraine_transaction.Rollback();
	lock_guard<mutex> guard(transaction_lock);
	transactions.erase(transaction);
}

} // namespace duckdb
