// A DuckDB transaction on a moraine lake: owns one Rust transaction (begun lazily) and keeps
// alive the catalog entries handed to DuckDB while it lives (moraine_entries.cpp).
#include "moraine_catalog.hpp"

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
		MoraineError err {nullptr, 0, MORAINE_ERROR_NONE, MORAINE_EXCEPTION_NONE};
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
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE, MORAINE_EXCEPTION_NONE};
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
