"""The DuckDB skill store: schema with migrations, transactions per mining step."""
