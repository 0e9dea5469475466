// A schema of a lake as one transaction sees it: its tables come from the Rust core.
#include "moraine_catalog.hpp"

#include "duckdb/parser/parsed_data/create_schema_info.hpp"
#include "duckdb/parser/parsed_data/create_table_info.hpp"
#include "duckdb/parser/parsed_data/drop_info.hpp"
#include "duckdb/planner/parsed_data/bound_create_table_info.hpp"

namespace duckdb {

MoraineSchemaEntry::MoraineSchemaEntry(Catalog &catalog, CreateSchemaInfo &info, MoraineTransaction &transaction)
    : SchemaCatalogEntry(catalog, info), transaction(transaction) {
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

void MoraineSchemaEntry::LoadTables() {
	if (tables_loaded) {
		return;
	}
	TableListing listing;
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE};
	if (moraine_txn_tables(transaction.Txn(), name.c_str(), name.size(), &listing, OnTable, OnColumn, &err) != 0) {
		MoraineThrow(err);
	}
	MoraineRethrow(listing);
	for (auto &table : listing.tables) {
		// an entry looked up on its own earlier stays: plans may hold it
		if (tables.find(table.name) == tables.end()) {
			AddTable(table.name, table.columns);
		}
	}
	tables_loaded = true;
}

//! Forgets the loaded tables after DDL; the old entries stay alive until the transaction ends.
static void RetireTables(MoraineTransaction &transaction, case_insensitive_map_t<unique_ptr<MoraineTableEntry>> &tables) {
	for (auto &entry : tables) {
		transaction.Retire(std::move(entry.second));
	}
	tables.clear();
}

optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateTable(CatalogTransaction catalog_transaction,
                                                           BoundCreateTableInfo &bound_info) {
	auto &info = bound_info.Base();
	LoadTables();
	auto existing = tables.find(info.table);
	if (existing != tables.end()) {
		if (info.on_conflict == OnCreateConflict::IGNORE_ON_CONFLICT) {
			return existing->second.get();
		}
		if (info.on_conflict == OnCreateConflict::ERROR_ON_CONFLICT) {
			throw CatalogException("moraine: table \"%s.%s\" already exists", name, info.table);
		}
		throw NotImplementedException("moraine: CREATE OR REPLACE TABLE is not supported");
	}
	vector<string> names, type_names, type_blobs;
	for (auto &column : info.columns.Physical()) {
		names.push_back(column.Name());
		type_names.push_back(column.Type().ToString());
		type_blobs.push_back(MoraineSerializeType(column.Type()));
	}
	vector<MoraineColumnIn> columns;
	for (idx_t i = 0; i < names.size(); i++) {
		columns.push_back(MoraineColumnIn {names[i].c_str(), names[i].size(), type_names[i].c_str(),
		                                   type_names[i].size(), const_data_ptr_cast(type_blobs[i].data()),
		                                   type_blobs[i].size()});
	}
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE};
	if (moraine_txn_create_table(transaction.Txn(), name.c_str(), name.size(), info.table.c_str(), info.table.size(),
	                             columns.data(), columns.size(), &err) != 0) {
		MoraineThrow(err);
	}
	RetireTables(transaction, tables);
	tables_loaded = false;
	LoadTables();
	auto created = tables.find(info.table);
	if (created == tables.end()) {
		throw InternalException("moraine: created table \"%s\" is not visible", info.table);
	}
	return created->second.get();
}

void MoraineSchemaEntry::DropEntry(ClientContext &context, DropInfo &info) {
	if (info.type != CatalogType::TABLE_ENTRY) {
		throw NotImplementedException("moraine: DROP %s is not supported; moraine holds only DuckLake's tables",
		                              CatalogTypeToString(info.type));
	}
	LoadTables();
	if (tables.find(info.name) == tables.end()) {
		if (info.if_not_found == OnEntryNotFound::RETURN_NULL) {
			return;
		}
		throw CatalogException("moraine: table \"%s.%s\" does not exist", name, info.name);
	}
	MoraineError err {nullptr, 0, MORAINE_ERROR_NONE};
	if (moraine_txn_drop_table(transaction.Txn(), name.c_str(), name.size(), info.name.c_str(), info.name.size(),
	                           &err) != 0) {
		MoraineThrow(err);
	}
	RetireTables(transaction, tables);
	tables_loaded = false;
}

optional_ptr<CatalogEntry> MoraineSchemaEntry::LookupEntry(CatalogTransaction catalog_transaction,
                                                           const EntryLookupInfo &lookup_info) {
	if (lookup_info.GetCatalogType() != CatalogType::TABLE_ENTRY) {
		return nullptr;
	}
	auto &table_name = lookup_info.GetEntryName();
	auto entry = tables.find(table_name);
	if (entry != tables.end()) {
		return entry->second.get();
	}
	if (!tables_loaded) {
		// DuckLake names one table at a time: read just that one
		TableListing listing;
		MoraineError err {nullptr, 0, MORAINE_ERROR_NONE};
		auto found = moraine_txn_table(transaction.Txn(), name.c_str(), name.size(), table_name.c_str(),
		                               table_name.size(), &listing, OnTable, OnColumn, &err);
		if (found < 0) {
			MoraineThrow(err);
		}
		MoraineRethrow(listing);
		if (found == 1) {
			return &AddTable(listing.tables[0].name, listing.tables[0].columns);
		}
		// not under that exact name: the names match case-insensitively, as DuckDB's do
		LoadTables();
		entry = tables.find(table_name);
		if (entry != tables.end()) {
			return entry->second.get();
		}
	}
	return nullptr;
}

void MoraineSchemaEntry::Scan(ClientContext &context, CatalogType type,
                              const std::function<void(CatalogEntry &)> &callback) {
	Scan(type, callback);
}

void MoraineSchemaEntry::Scan(CatalogType type, const std::function<void(CatalogEntry &)> &callback) {
	if (type != CatalogType::TABLE_ENTRY) {
		return;
	}
	LoadTables();
	for (auto &entry : tables) {
		callback(*entry.second);
	}
}

[[noreturn]] static void Unsupported(const string &what) {
	throw NotImplementedException("moraine: %s is not supported; moraine holds only DuckLake's tables", what);
}

optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateFunction(CatalogTransaction, CreateFunctionInfo &) {
	Unsupported("CREATE FUNCTION/MACRO");
}
optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateIndex(CatalogTransaction, CreateIndexInfo &,
                                                           TableCatalogEntry &) {
	Unsupported("CREATE INDEX");
}
optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateView(CatalogTransaction, CreateViewInfo &) {
	Unsupported("CREATE VIEW");
}
optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateSequence(CatalogTransaction, CreateSequenceInfo &) {
	Unsupported("CREATE SEQUENCE");
}
optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateTableFunction(CatalogTransaction, CreateTableFunctionInfo &) {
	Unsupported("CREATE table function");
}
optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateCopyFunction(CatalogTransaction, CreateCopyFunctionInfo &) {
	Unsupported("CREATE copy function");
}
optional_ptr<CatalogEntry> MoraineSchemaEntry::CreatePragmaFunction(CatalogTransaction, CreatePragmaFunctionInfo &) {
	Unsupported("CREATE pragma function");
}
optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateCollation(CatalogTransaction, CreateCollationInfo &) {
	Unsupported("CREATE COLLATION");
}
optional_ptr<CatalogEntry> MoraineSchemaEntry::CreateType(CatalogTransaction, CreateTypeInfo &) {
	Unsupported("CREATE TYPE");
}
void MoraineSchemaEntry::Alter(CatalogTransaction, AlterInfo &) {
	Unsupported("ALTER");
}

} // namespace duckdb
