// Starts, commits and rolls back the DuckDB transactions of one lake.
#include "moraine_transaction_manager.hpp"

namespace duckdb {

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
