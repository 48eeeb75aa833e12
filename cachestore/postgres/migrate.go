package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/rs/zerolog"
)

// The PostgreSQL schema: migrations/NNNN_name.sql, applied in order of NNNN,
// each once and in its own transaction, recorded in schema_migrations. A
// migration is never edited once released; a change is a new file.
//
//go:embed migrations/*.sql
var pgMigrationFiles embed.FS

type pgMigration struct {
	version int64
	name    string
	sql     string
}

// pgMigrations returns the embedded migrations in version order.
func pgMigrations() ([]pgMigration, error) {
	names, err := fs.Glob(pgMigrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var out []pgMigration
	for _, name := range names {
		base := path.Base(name)
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v < 1 {
			return nil, fmt.Errorf("migration %s: the name must start with a version number and '_'", base)
		}
		sql, err := pgMigrationFiles.ReadFile(name)
		if err != nil {
			return nil, err
		}
		out = append(out, pgMigration{version: v, name: base, sql: string(sql)})
	}
	slices.SortFunc(out, func(a, b pgMigration) int { return int(a.version - b.version) })
	for i := 1; i < len(out); i++ {
		if out[i].version == out[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share a version", out[i-1].name, out[i].name)
		}
	}
	return out, nil
}

// migrate applies the migrations the database lacks, up to version upTo
// when it is positive (tests build an older schema so). Each runs in its own
// transaction holding a transaction-level advisory lock keyed by the
// current schema, so members opening the store together apply each one
// once: the others wait for the lock and then find it recorded.
func migrate(ctx context.Context, pool *pgxpool.Pool, log zerolog.Logger, upTo int64) error {
	ms, err := pgMigrations()
	if err != nil {
		return fmt.Errorf("postgres: reading migrations: %w", err)
	}
	for _, m := range ms {
		if upTo > 0 && m.version > upTo {
			break
		}
		applied := false
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('tooldispatch/cachestore/migrate:' || current_schema()))`); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
				version    bigint PRIMARY KEY,
				name       text NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
				return err
			}
			var done bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = $1)`, m.version).Scan(&done); err != nil {
				return err
			}
			if done {
				return nil
			}
			// No arguments: the simple protocol, which runs several statements.
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return err
			}
			applied = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("postgres: applying migration %s: %w", m.name, unavailable(err))
		}
		if applied {
			log.Info().Str("migration", m.name).Msg("applied a schema migration")
		}
	}
	return nil
}
