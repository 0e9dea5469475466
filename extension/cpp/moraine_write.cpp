// INSERT / UPDATE / DELETE on a lake's tables: sinks that collect DuckLake's rows and stage
// them, untranslated, in the transaction at Finalize (RFC 0006). Rowids resolve against the
// materialization the scan emitted them from (RFC 0009).
#include "moraine_catalog.hpp"
#include "moraine_cells.hpp"
#include "moraine_error.hpp"
#include "moraine_table_entry.hpp"
#include "moraine_transaction.hpp"

#include "duckdb/execution/operator/projection/physical_projection.hpp"
#include "duckdb/execution/physical_plan_generator.hpp"
#include "duckdb/planner/expression/bound_reference_expression.hpp"
#include "duckdb/planner/operator/logical_delete.hpp"
#include "duckdb/planner/operator/logical_insert.hpp"
#include "duckdb/planner/operator/logical_update.hpp"

namespace duckdb {

enum class MoraineWriteKind { INSERT, UPDATE, DELETE };

struct MoraineWriteState : public GlobalSinkState {
	explicit MoraineWriteState(idx_t ncols) : rows(moraine_rows_new(ncols)) {
	}
	~MoraineWriteState() override {
		if (rows) {
			moraine_rows_free(rows);
		}
	}
	mutex lock;
	MoraineRows *rows;
	vector<int64_t> rowids;
	idx_t count = 0;
};

class MoraineWrite : public PhysicalOperator {
public:
	MoraineWrite(PhysicalPlan &physical_plan, MoraineWriteKind kind, TableCatalogEntry &table,
	             vector<idx_t> update_columns, vector<idx_t> update_refs, idx_t rowid_index)
	    : PhysicalOperator(physical_plan, PhysicalOperatorType::EXTENSION, {LogicalType::BIGINT}, 1), kind(kind),
	      table(table), update_columns(std::move(update_columns)), update_refs(std::move(update_refs)),
	      rowid_index(rowid_index) {
	}

	MoraineWriteKind kind;
	TableCatalogEntry &table;
	//! UPDATE: the table columns being set, and where each new value sits in the input chunk
	vector<idx_t> update_columns;
	vector<idx_t> update_refs;
	//! UPDATE / DELETE: where the rowid sits in the input chunk
	idx_t rowid_index;

public:
	string GetName() const override {
		return kind == MoraineWriteKind::INSERT   ? "MORAINE_INSERT"
		       : kind == MoraineWriteKind::UPDATE ? "MORAINE_UPDATE"
		                                          : "MORAINE_DELETE";
	}
	bool IsSink() const override {
		return true;
	}
	bool ParallelSink() const override {
		return false;
	}
	bool IsSource() const override {
		return true;
	}

	unique_ptr<GlobalSinkState> GetGlobalSinkState(ClientContext &context) const override {
		idx_t ncols = kind == MoraineWriteKind::INSERT ? table.GetColumns().PhysicalColumnCount() : update_columns.size();
		return make_uniq<MoraineWriteState>(ncols);
	}

	SinkResultType Sink(ExecutionContext &context, DataChunk &chunk, OperatorSinkInput &input) const override {
		auto &state = input.global_state.Cast<MoraineWriteState>();
		lock_guard<mutex> guard(state.lock);
		chunk.Flatten();
		state.count += chunk.size();
		if (kind == MoraineWriteKind::INSERT) {
			MoraineAppendChunk(state.rows, chunk);
			return SinkResultType::NEED_MORE_INPUT;
		}
		auto &rowids = chunk.data[rowid_index];
		for (idx_t r = 0; r < chunk.size(); r++) {
			state.rowids.push_back(rowids.GetValue(r).GetValue<int64_t>());
		}
		if (kind == MoraineWriteKind::UPDATE) {
			string scratch;
			MoraineCell cell;
			for (idx_t r = 0; r < chunk.size(); r++) {
				for (idx_t i = 0; i < update_refs.size(); i++) {
					auto &vector = chunk.data[update_refs[i]];
					auto &type = table.GetColumns().GetColumn(PhysicalIndex(update_columns[i])).Type();
					MoraineValueToCell(vector.GetValue(r).DefaultCastAs(type), type, cell, scratch);
					moraine_rows_push(state.rows, &cell);
				}
			}
		}
		return SinkResultType::NEED_MORE_INPUT;
	}

	SinkFinalizeType Finalize(Pipeline &pipeline, Event &event, ClientContext &context,
	                          OperatorSinkFinalizeInput &input) const override {
		auto &state = input.global_state.Cast<MoraineWriteState>();
		auto &transaction = MoraineTransaction::Get(context, table.catalog);
		auto &schema = table.schema.name;
		MoraineError err {};
		int rc = 0;
		// the transaction first (beginning it may throw): the rows stay owned by the state
		// until the call that consumes them
		auto txn = transaction.Txn();
		auto rows = state.rows;
		state.rows = nullptr; // consumed by staging
		switch (kind) {
		case MoraineWriteKind::INSERT:
			rc = moraine_txn_stage_insert(txn, schema.c_str(), schema.size(), table.name.c_str(),
			                              table.name.size(), rows, &err);
			break;
		case MoraineWriteKind::UPDATE:
			rc = moraine_txn_stage_update(txn, schema.c_str(), schema.size(), table.name.c_str(),
			                              table.name.size(), state.rowids.data(), state.rowids.size(),
			                              update_columns.data(), update_columns.size(), rows, &err);
			break;
		case MoraineWriteKind::DELETE:
			moraine_rows_free(rows);
			rc = moraine_txn_stage_delete(txn, schema.c_str(), schema.size(), table.name.c_str(),
			                              table.name.size(), state.rowids.data(), state.rowids.size(), &err);
			break;
		}
		if (rc != 0) {
			MoraineThrow(err);
		}
		return SinkFinalizeType::READY;
	}

	SourceResultType GetDataInternal(ExecutionContext &context, DataChunk &chunk,
	                                 OperatorSourceInput &input) const override {
		auto &state = sink_state->Cast<MoraineWriteState>();
		chunk.SetCardinality(1);
		chunk.SetValue(0, 0, Value::BIGINT(NumericCast<int64_t>(state.count)));
		return SourceResultType::FINISHED;
	}
};

static void CheckWritable(Catalog &catalog) {
	auto &moraine = catalog.Cast<MoraineCatalog>();
	if (moraine.read_only) {
		throw InvalidInputException("moraine: lake \"%s\" is attached read-only", moraine.url);
	}
}

PhysicalOperator &MoraineCatalog::PlanInsert(ClientContext &context, PhysicalPlanGenerator &planner, LogicalInsert &op,
                                             optional_ptr<PhysicalOperator> plan) {
	CheckWritable(*this);
	if (op.return_chunk) {
		throw BinderException("moraine: RETURNING is not supported");
	}
	if (op.on_conflict_info.action_type != OnConflictAction::THROW) {
		throw BinderException("moraine: ON CONFLICT is not supported");
	}
	if (!op.column_index_map.empty()) {
		plan = planner.ResolveDefaultsProjection(op, *plan);
	}
	auto &insert = planner.Make<MoraineWrite>(MoraineWriteKind::INSERT, op.table, vector<idx_t>(), vector<idx_t>(),
	                                          DConstants::INVALID_INDEX);
	insert.children.push_back(*plan);
	return insert;
}

PhysicalOperator &MoraineCatalog::PlanDelete(ClientContext &context, PhysicalPlanGenerator &planner, LogicalDelete &op,
                                             PhysicalOperator &plan) {
	CheckWritable(*this);
	if (op.return_chunk) {
		throw BinderException("moraine: RETURNING is not supported");
	}
	auto &rowid_ref = op.expressions[0]->Cast<BoundReferenceExpression>();
	auto &del = planner.Make<MoraineWrite>(MoraineWriteKind::DELETE, op.table, vector<idx_t>(), vector<idx_t>(),
	                                       rowid_ref.index);
	del.children.push_back(plan);
	return del;
}

PhysicalOperator &MoraineCatalog::PlanUpdate(ClientContext &context, PhysicalPlanGenerator &planner, LogicalUpdate &op,
                                             PhysicalOperator &plan) {
	CheckWritable(*this);
	if (op.return_chunk) {
		throw BinderException("moraine: RETURNING is not supported");
	}
	vector<idx_t> columns, refs;
	for (idx_t i = 0; i < op.columns.size(); i++) {
		if (op.expressions[i]->GetExpressionType() != ExpressionType::BOUND_REF) {
			throw BinderException("moraine: UPDATE ... SET column = DEFAULT is not supported");
		}
		columns.push_back(op.columns[i].index);
		refs.push_back(op.expressions[i]->Cast<BoundReferenceExpression>().index);
	}
	// the rowid is the last column of the child's output
	auto rowid_index = plan.types.size() - 1;
	auto &update =
	    planner.Make<MoraineWrite>(MoraineWriteKind::UPDATE, op.table, std::move(columns), std::move(refs), rowid_index);
	update.children.push_back(plan);
	return update;
}

} // namespace duckdb
