// Starts, commits and rolls back a lake's transactions (moraine_transaction_manager.cpp).
#pragma once

#include "duckdb/common/reference_map.hpp"
#include "duckdb/transaction/transaction_manager.hpp"
#include "moraine_transaction.hpp"

namespace duckdb {

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

} // namespace duckdb
