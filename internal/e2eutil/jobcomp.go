package e2eutil

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// JobcompRecord is one line of Slurm's jobcomp/filetxt log, key by key:
// one run of a job (a requeued job has a record for each run). The log is
// not escaped, so a job name or work dir holding " KEY=value" adds or
// shadows a key (the last one wins).
type JobcompRecord map[string]string

// JobcompLog is where the test cluster in clusterDir logs finished runs.
func JobcompLog(clusterDir string) string {
	return filepath.Join(clusterDir, "log", "jobcomp.log")
}

// ReadJobcomp reads the jobcomp log at path.
func ReadJobcomp(path string) ([]JobcompRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("jobcomp log: %w", err)
	}
	return ParseJobcomp(string(b)), nil
}

// recordStart is where a jobcomp record begins. Slurm 22.05's filetxt
// plugin writes each record into a fixed buffer, so a record longer than it
// (a job name of hundreds of bytes) loses its end, newline included, and the
// next record follows on the same line ("... ExitCode=0:JobId=158 UserId=").
var recordStart = regexp.MustCompile(`JobId=\d+ UserId=`)

// ParseJobcomp reads the records of a jobcomp log, in order; lines without
// a JobId are skipped, and a line holding records glued together by a
// truncated one is split where each begins.
func ParseJobcomp(text string) []JobcompRecord {
	var lines []string
	for _, line := range strings.Split(text, "\n") {
		from := 0
		for _, at := range recordStart.FindAllStringIndex(line, -1) {
			if at[0] > from {
				lines = append(lines, line[from:at[0]])
				from = at[0]
			}
		}
		lines = append(lines, line[from:])
	}
	var recs []JobcompRecord
	for _, line := range lines {
		rec := JobcompRecord{}
		for _, w := range strings.Fields(line) {
			if k, v, ok := strings.Cut(w, "="); ok {
				rec[k] = v
			}
		}
		if rec["JobId"] != "" {
			recs = append(recs, rec)
		}
	}
	return recs
}

// JobcompByJob groups records by JobId, each job's in log order.
func JobcompByJob(recs []JobcompRecord) map[string][]JobcompRecord {
	byJob := map[string][]JobcompRecord{}
	for _, r := range recs {
		byJob[r["JobId"]] = append(byJob[r["JobId"]], r)
	}
	return byJob
}
