-- Learned-throughput samples: the rate one job showed over one interval the
-- daemon measured, with the job and the user it came from. A learned row is
-- an aggregate of its cell's samples (package doc, "Learning"); keeping them
-- lets an administrator remove one user's (Store.PurgeUser).
CREATE TABLE samples (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	job_type    TEXT    NOT NULL REFERENCES job_types (name) ON DELETE CASCADE,
	gpu_type    TEXT    NOT NULL REFERENCES gpu_types (name) ON DELETE CASCADE,
	workers     INTEGER NOT NULL CHECK (workers > 0),
	job_id      TEXT    NOT NULL,
	user        TEXT    NOT NULL,
	steps_per_s REAL    NOT NULL CHECK (steps_per_s > 0),
	at          TEXT    NOT NULL
);

CREATE INDEX samples_cell ON samples (job_type, gpu_type, workers, id);
CREATE INDEX samples_user ON samples (user);

-- How many users the samples behind a learned row came from: a learned
-- value replaces an imported one or the prior only with enough of them.
ALTER TABLE throughputs ADD COLUMN users INTEGER NOT NULL DEFAULT 0;
