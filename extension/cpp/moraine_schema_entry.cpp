// A schema of a lake: its tables come from the Rust core, read through the calling transaction.
#include "moraine_schema_entry.hpp"

#include "moraine_cells.hpp"
#include "moraine_entries.hpp"
#include "moraine_error.hpp"
#include "moraine_table_entry.hpp"
#include "moraine_transaction.hpp"

#include "duckdb/parser/parsed_data/create_schema_info.hpp"
#include "duckdb/parser/parsed_data/create_table_info.hpp"
#include "duckdb/parser/parsed_data/drop_info.hpp"
#include "duckdb/planner/parsed_data/bound_create_table_info.hpp"

namespace duckdb {

// the conflict actions Rust names (moraine_ffi.h) are DuckDB's
static_assert(uint8_t(OnCreateConflict::ERROR_ON_CONFLICT) == MORAINE_ON_CONFLICT_ERROR, "ERROR_ON_CONFLICT");
static_assert(uint8_t(OnCreateConflict::IGNORE_ON_CONFLICT) == MORAINE_ON_CONFLICT_IGNORE, "IGNORE_ON_CONFLICT");
static_assert(uint8_t(OnCreateConflict::REPLACE_ON_CONFLICT) == MORAINE_ON_CONFLICT_REPLACE, "REPLACE_ON_CONFLICT");

MoraineSchemaEntry::MoraineSchemaEntry(Catalog &catalog, CreateSchemaInfo &info, MoraineEntries &owner)
    : SchemaCatalogEntry(catalog, info), owner(owner) {
}

optional_ptr<MoraineSchemaEntry> MoraineSchemaEntry::Current(MoraineTransaction &transaction, bool required) {
	auto entries = transaction.Entries();
	auto current = entries.get() == &owner ? this : entries->GetSchema(transaction.Txn(), name);
	if (!current && required) {
		throw CatalogException("moraine: schema \"%s\" does not exist", name);
	}
	return current;
}

struct TableListing : MoraineCallbackState {
	struct Table {
		string name;
		vector<pair<string, string>> columns; // name, serialized type
	};
	vector<Table> tables;
};

static void OnTable(void *ud, const char *name, size_t len) {
	auto &listing = *static_cast<TableListing *>(ud);
	MoraineCallback(listing, [&]() {
		listing.tables.emplace_back();
		listing.tables.back().name = string(name, len);
	});
}

static void OnColumn(void *ud, const char *name, size_t name_len, const uint8_t *type_blob, size_t type_blob_len) {
	auto &listing = *static_cast<TableListing *>(ud);
	MoraineCallback(listing, [&]() {
		if (listing.tables.empty()) {
			throw InternalException("moraine: a column was listed before its table");
		}
		listing.tables.back().columns.emplace_back(string(name, name_len),
		                                           string(const_char_ptr_cast(type_blob), type_blob_len));
	});
}

MoraineTableEntry &MoraineSchemaEntry::AddTable(const string &table_name,
                                                const vector<pair<string, string>> &columns) {
	// an entry added before stays: plans may hold it
	auto existing = tables.find(table_name);
	if (existing != tables.end()) {
		return *existing->second;
	}
	CreateTableInfo info(*this, table_name);
	for (auto &column : columns) {
		auto &blob = column.second;
		auto type = MoraineDeserializeType(const_data_ptr_cast(blob.data()), blob.size());
		info.columns.AddColumn(ColumnDefinition(column.first, std::move(type)));
	}
	auto &entry = tables[table_name];
	entry = make_uniq<MoraineTableEntry>(catalog, *this, info);
	return *entry;
}

void MoraineSchemaEntry::LoadTables(MoraineTxn *txn) {
	{
		lock_guard<mutex> guard(lock);
		if (tables_loaded) {
			return;
		}
	}
	// read outside the lock: the read waits on the caller's transaction, which must not hold up
	// the other transactions sharing this schema
	TableListing listing;
	MoraineError err {};
	MoraineCheck(moraine_txn_tables(txn, name.c_str(), name.size(), &listing, OnTable, OnColumn, &err), err);
	MoraineRethrow(listing);
	lock_guard<mutex> guard(lock);
	for (auto &table : listing.tables) {
		AddTable(table.name, table.columns);
	}
	tables_loaded = true;
}

vector<reference<MoraineTableEntry>> MoraineSchemaEntry::LoadedTables() {
	lock_guard<mutex> guard(lock);
	vector<reference<MoraineTableEntry>> result;
	for (auto &entry : tables) {
		result.push_back(*entry.second);
	}
	return result;
}

optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateTable(CatalogTransaction catalog_transaction,
                                                           BoundCreateTableInfo &bound_info) {
	auto &transaction = MoraineTransaction::Get(catalog_transaction);
	auto current = Current(transaction, true);
	if (current.get() != this) {
		return current->CreateTable(catalog_transaction, bound_info);
	}
	auto &info = bound_info.Base();
	vector<string> texts; // each column's type name and serialized type
	for (auto &column : info.columns.Physical()) {
		texts.push_back(column.Type().ToString());
		texts.push_back(MoraineSerializeType(column.Type()));
	}
	vector<MoraineColumnIn> columns;
	for (auto &column : info.columns.Physical()) {
		auto &type_name = texts[2 * columns.size()], &blob = texts[2 * columns.size() + 1];
		columns.push_back({column.Name().c_str(), column.Name().size(), type_name.c_str(), type_name.size(),
		                   const_data_ptr_cast(blob.data()), blob.size()});
	}
	MoraineError err {};
	int32_t made = 0;
	MoraineCheck(moraine_txn_create_table(transaction.Txn(), name.c_str(), name.size(), info.table.c_str(),
	                                      info.table.size(), columns.data(), columns.size(),
	                                      uint8_t(info.on_conflict), &made, &err),
	             err);
	if (!made) {
		return LookupEntry(catalog_transaction, EntryLookupInfo(CatalogType::TABLE_ENTRY, info.table));
	}
	transaction.InvalidateEntries();
	auto schema = transaction.GetSchema(name);
	auto created = schema ? schema->LookupEntry(catalog_transaction, EntryLookupInfo(CatalogType::TABLE_ENTRY, info.table))
	                      : nullptr;
	if (!created) {
		throw InternalException("moraine: created table \"%s\" is not visible", info.table);
	}
	return created;
}

void MoraineSchemaEntry::DropEntry(ClientContext &context, DropInfo &info) {
	if (info.type != CatalogType::TABLE_ENTRY) {
		throw NotImplementedException("moraine: DROP %s is not supported; moraine holds only DuckLake's tables",
		                              CatalogTypeToString(info.type));
	}
	auto &transaction = MoraineTransaction::Get(context, catalog);
	auto current = Current(transaction, true);
	if (current.get() != this) {
		return current->DropEntry(context, info);
	}
	auto existing = LookupEntry(CatalogTransaction(catalog, context), EntryLookupInfo(CatalogType::TABLE_ENTRY, info.name));
	if (!existing) {
		if (info.if_not_found == OnEntryNotFound::RETURN_NULL) {
			return;
		}
		throw CatalogException("moraine: table \"%s.%s\" does not exist", name, info.name);
	}
	// under the name it is stored as (the user's may differ in case)
	auto &table_name = existing->name;
	MoraineError err {};
	MoraineCheck(moraine_txn_drop_table(transaction.Txn(), name.c_str(), name.size(), table_name.c_str(),
	                                    table_name.size(), &err), err);
	transaction.InvalidateEntries();
}

optional_ptr<CatalogEntry> MoraineSchemaEntry::LookupEntry(CatalogTransaction catalog_transaction,
                                                           const EntryLookupInfo &lookup_info) {
	if (lookup_info.GetCatalogType() != CatalogType::TABLE_ENTRY) {
		return nullptr;
	}
	auto &transaction = MoraineTransaction::Get(catalog_transaction);
	auto current = Current(transaction, false);
	if (current.get() != this) {
		return current ? current->LookupEntry(catalog_transaction, lookup_info) : nullptr;
	}
	auto &table_name = lookup_info.GetEntryName();
	{
		lock_guard<mutex> guard(lock);
		auto entry = tables.find(table_name);
		if (entry != tables.end()) {
			return entry->second.get();
		}
		if (tables_loaded) {
			return nullptr;
		}
	}
	// DuckLake names one table at a time: read just that one (outside the lock, as LoadTables)
	auto txn = transaction.Txn();
	TableListing listing;
	MoraineError err {};
	auto found = moraine_txn_table(txn, name.c_str(), name.size(), table_name.c_str(), table_name.size(), &listing,
	                               OnTable, OnColumn, &err);
	if (found < 0) {
		MoraineThrow(err);
	}
	MoraineRethrow(listing);
	if (found == 1) {
		lock_guard<mutex> guard(lock);
		return &AddTable(listing.tables[0].name, listing.tables[0].columns);
	}
	// not under that exact name: the names match case-insensitively, as DuckDB's do
	LoadTables(txn);
	lock_guard<mutex> guard(lock);
	auto entry = tables.find(table_name);
	if (entry != tables.end()) {
		return entry->second.get();
	}
	return nullptr;
}

void MoraineSchemaEntry::Scan(ClientContext &context, CatalogType type,
                              const std::function<void(CatalogEntry &)> &callback) {
	if (type != CatalogType::TABLE_ENTRY) {
		return;
	}
	auto &transaction = MoraineTransaction::Get(context, catalog);
	auto current = Current(transaction, false);
	if (current.get() != this) {
		return current ? current->Scan(context, type, callback) : void();
	}
	LoadTables(transaction.Txn());
	for (auto &table : LoadedTables()) {
		callback(table.get());
	}
}

void MoraineSchemaEntry::Scan(CatalogType type, const std::function<void(CatalogEntry &)> &callback) {
	// without a transaction nothing more can be read: the tables looked up so far (DuckDB calls
	// this only for its own storage's checkpoints)
	if (type != CatalogType::TABLE_ENTRY) {
		return;
	}
	for (auto &table : LoadedTables()) {
		callback(table.get());
	}
}

[[noreturn]] static void Unsupported(const string &what) {
	throw NotImplementedException("moraine: %s is not supported; moraine holds only DuckLake's tables", what);
}

#define MORAINE_UNSUPPORTED(METHOD, INFO, WHAT)                                                                       \
	optional_ptr<CatalogEntry> MoraineSchemaEntry::METHOD(CatalogTransaction, INFO &) {                               \
		Unsupported(WHAT);                                                                                             \
	}
MORAINE_UNSUPPORTED(CreateFunction, CreateFunctionInfo, "CREATE FUNCTION/MACRO")
MORAINE_UNSUPPORTED(CreateView, CreateViewInfo, "CREATE VIEW")
MORAINE_UNSUPPORTED(CreateSequence, CreateSequenceInfo, "CREATE SEQUENCE")
MORAINE_UNSUPPORTED(CreateTableFunction, CreateTableFunctionInfo, "CREATE table function")
MORAINE_UNSUPPORTED(CreateCopyFunction, CreateCopyFunctionInfo, "CREATE copy function")
MORAINE_UNSUPPORTED(CreatePragmaFunction, CreatePragmaFunctionInfo, "CREATE pragma function")
MORAINE_UNSUPPORTED(CreateCollation, CreateCollationInfo, "CREATE COLLATION")
MORAINE_UNSUPPORTED(CreateType, CreateTypeInfo, "CREATE TYPE")

optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateIndex(CatalogTransaction, CreateIndexInfo &, TableCatalogEntry &) {
	Unsupported("CREATE INDEX");
}

void MoraineSchemaEntry::Alter(CatalogTransaction, AlterInfo &) {
	Unsupported("ALTER");
}

} // namespace duckdb
