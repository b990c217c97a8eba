-- Canonical GPU types: short lowercase names (k80, v100, a100).
CREATE TABLE gpu_types (
	name TEXT PRIMARY KEY NOT NULL CHECK (name <> '' AND name = lower(name))
) WITHOUT ROWID;

-- Site GRES names (as in gres.conf / sinfo) -> canonical GPU type.
CREATE TABLE gpu_aliases (
	site_name TEXT PRIMARY KEY NOT NULL CHECK (site_name <> ''),
	gpu_type  TEXT NOT NULL REFERENCES gpu_types (name) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE job_types (
	name TEXT PRIMARY KEY NOT NULL CHECK (name <> '')
) WITHOUT ROWID;

-- One row per cell and source; package profiles picks the one in use.
-- updated_at is RFC 3339 UTC with nanoseconds.
CREATE TABLE throughputs (
	job_type    TEXT    NOT NULL REFERENCES job_types (name) ON DELETE CASCADE,
	gpu_type    TEXT    NOT NULL REFERENCES gpu_types (name) ON DELETE CASCADE,
	workers     INTEGER NOT NULL CHECK (workers > 0),
	source      TEXT    NOT NULL CHECK (source IN ('imported', 'measured', 'learned')),
	steps_per_s REAL    NOT NULL CHECK (steps_per_s >= 0),
	samples     INTEGER NOT NULL DEFAULT 0 CHECK (samples >= 0),
	updated_at  TEXT    NOT NULL,
	PRIMARY KEY (job_type, gpu_type, workers, source)
) WITHOUT ROWID;

CREATE INDEX throughputs_gpu_type ON throughputs (gpu_type);
