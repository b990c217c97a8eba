package slurm

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// AssocFormat is the sacctmgr format of AssocQueryArgs: the association tree
// (ParentName of an account's association is its parent account; a user's
// association hangs under its Account) and the limits a job's start depends
// on. The parser reads the fields in this order.
const AssocFormat = "Cluster,Account,User,Partition,ParentName,Share,GrpTRES,GrpJobs,GrpSubmitJobs," +
	"MaxTRES,MaxTRESPerNode,MaxJobs,MaxSubmitJobs,MaxWall,QOS,DefaultQOS,Priority"

// QOSFormat is the sacctmgr format of QOSQueryArgs. MaxTRES is per job.
const QOSFormat = "Name,Priority,Flags,GrpTRES,GrpJobs,GrpSubmitJobs,MaxTRES,MaxTRESPerNode," +
	"MaxTRESPerUser,MaxJobsPerUser,MaxSubmitJobsPerUser,MaxTRESPerAccount,MaxJobsPerAccount," +
	"MaxSubmitJobsPerAccount,MaxWall,MinTRES,UsageFactor"

// AssocQueryArgs and QOSQueryArgs are the argv of the commands that read the
// accounting limits (they need slurmdbd; without it sacctmgr fails).
var (
	AssocQueryArgs = []string{"sacctmgr", "show", "assoc", "--parsable2", "--noheader", "format=" + AssocFormat}
	QOSQueryArgs   = []string{"sacctmgr", "show", "qos", "--parsable2", "--noheader", "format=" + QOSFormat}
)

// Limit is a count limit (jobs, submitted jobs, priority); NoLimit when the
// field is empty.
type Limit int64

// NoLimit is an unset count limit.
const NoLimit Limit = -1

// Set reports whether the limit is set.
func (l Limit) Set() bool { return l >= 0 }

// TRES is a trackable-resource string such as "cpu=16,gres/gpu:v100=2" by
// name: "cpu", "mem" (in MB), "node", "billing", "gres/gpu", "gres/gpu:v100".
// An empty string gives nil: no limit on any TRES.
type TRES map[string]int64

// GPUs is the limit on all GPUs (gpuType "") or on one type, and whether
// there is one.
func (t TRES) GPUs(gpuType string) (int64, bool) {
	key := "gres/gpu"
	if gpuType != "" {
		key += ":" + gpuType
	}
	v, ok := t[key]
	return v, ok
}

// ParseTRES reads a TRES string ("gres/gpu=4", "cpu=16,gres/gpu:v100=2",
// "mem=8G"). Values are whole numbers; mem may carry M, G, T or P (MB base).
func ParseTRES(s string) (TRES, error) {
	if s == "" {
		return nil, nil
	}
	t := TRES{}
	for _, item := range strings.Split(s, ",") {
		name, val, ok := strings.Cut(item, "=")
		if !ok || name == "" || val == "" {
			return nil, fmt.Errorf("%w: TRES %q: %q is not name=count", ErrMalformed, snippet(s), snippet(item))
		}
		mult := int64(1)
		if name == "mem" {
			switch val[len(val)-1] {
			case 'M':
				val = val[:len(val)-1]
			case 'G':
				mult, val = 1<<10, val[:len(val)-1]
			case 'T':
				mult, val = 1<<20, val[:len(val)-1]
			case 'P':
				mult, val = 1<<30, val[:len(val)-1]
			}
		}
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/mult {
			return nil, fmt.Errorf("%w: TRES %q: bad count for %s", ErrMalformed, snippet(s), snippet(name))
		}
		if _, dup := t[name]; dup {
			return nil, fmt.Errorf("%w: TRES %q: %s twice", ErrMalformed, snippet(s), snippet(name))
		}
		t[name] = n * mult
	}
	return t, nil
}

// Association is one row of AssocQueryArgs: an account's association (User
// "") or a user's in an account. Limits are the association's own; Slurm
// applies the Max* limits of the nearest association up the tree that sets
// them, and every Grp* limit up the tree to the jobs below it.
type Association struct {
	Cluster   string
	Account   string
	User      string
	Partition string
	// ParentAccount is the parent of an account's association ("" for root
	// and for users' associations, whose parent is Account).
	ParentAccount string
	// Shares is the raw fairshare; SharesParent for Fairshare=parent.
	Shares       int64
	SharesParent bool

	GrpTRES        TRES
	GrpJobs        Limit
	GrpSubmitJobs  Limit
	MaxTRESPerJob  TRES
	MaxTRESPerNode TRES
	MaxJobs        Limit
	MaxSubmitJobs  Limit
	MaxWall        string
	QOS            []string
	DefaultQOS     string
	Priority       Limit
}

// QOS is one row of QOSQueryArgs.
type QOS struct {
	Name     string
	Priority int64
	Flags    []string

	GrpTRES                 TRES
	GrpJobs                 Limit
	GrpSubmitJobs           Limit
	MaxTRESPerJob           TRES
	MaxTRESPerNode          TRES
	MaxTRESPerUser          TRES
	MaxJobsPerUser          Limit
	MaxSubmitJobsPerUser    Limit
	MaxTRESPerAccount       TRES
	MaxJobsPerAccount       Limit
	MaxSubmitJobsPerAccount Limit
	MaxWall                 string
	MinTRES                 TRES
	UsageFactor             float64
}

// parsable2Rows calls row for each line of sacctmgr --parsable2 --noheader
// output with exactly n fields. sacctmgr's values (names chosen by admins,
// TRES, numbers) cannot hold '|' or a newline.
func parsable2Rows(r io.Reader, n int, what string, row func(line int, f []string) error) []error {
	var errs errCollector
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, "|")
		if len(f) != n {
			errs.add(&ParseError{Line: line, Input: snippet(text),
				Err: fmt.Errorf("%w: %s row has %d fields, want %d", ErrMalformed, what, len(f), n)})
			continue
		}
		if err := row(line, f); err != nil {
			errs.add(err)
		}
	}
	if err := sc.Err(); err != nil {
		errs.add(fmt.Errorf("reading sacctmgr output: %w", err))
	}
	return errs.result()
}

// fieldReader reads typed fields of one row, keeping the first error.
type fieldReader struct {
	line   int
	record string
	err    error
}

func (fr *fieldReader) fail(field, input string, err error) {
	if fr.err == nil {
		fr.err = &ParseError{Line: fr.line, Record: fr.record, Field: field, Input: snippet(input), Err: err}
	}
}

func (fr *fieldReader) limit(field, s string) Limit {
	if s == "" {
		return NoLimit
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		fr.fail(field, s, fmt.Errorf("%w: not a count", ErrMalformed))
		return NoLimit
	}
	return Limit(n)
}

func (fr *fieldReader) tres(field, s string) TRES {
	t, err := ParseTRES(s)
	if err != nil {
		fr.fail(field, s, err)
	}
	return t
}

// ParseAssociations parses the output of AssocQueryArgs. A row that cannot
// be read is reported and skipped.
func ParseAssociations(r io.Reader) ([]Association, []error) {
	var out []Association
	errs := parsable2Rows(r, 17, "association", func(line int, f []string) error {
		a := Association{Cluster: f[0], Account: f[1], User: f[2], Partition: f[3], ParentAccount: f[4]}
		fr := &fieldReader{line: line, record: a.Account + "/" + a.User}
		if a.Account == "" {
			fr.fail("Account", "", fmt.Errorf("%w: association without an account", ErrMalformed))
		}
		switch f[5] {
		case "parent":
			a.SharesParent = true
		default:
			n, err := strconv.ParseInt(f[5], 10, 64)
			if err != nil || n < 0 {
				fr.fail("Share", f[5], fmt.Errorf("%w: not a share count", ErrMalformed))
			}
			a.Shares = n
		}
		a.GrpTRES = fr.tres("GrpTRES", f[6])
		a.GrpJobs = fr.limit("GrpJobs", f[7])
		a.GrpSubmitJobs = fr.limit("GrpSubmitJobs", f[8])
		a.MaxTRESPerJob = fr.tres("MaxTRES", f[9])
		a.MaxTRESPerNode = fr.tres("MaxTRESPerNode", f[10])
		a.MaxJobs = fr.limit("MaxJobs", f[11])
		a.MaxSubmitJobs = fr.limit("MaxSubmitJobs", f[12])
		a.MaxWall = f[13]
		a.QOS = listValue(f[14])
		a.DefaultQOS = f[15]
		a.Priority = fr.limit("Priority", f[16])
		if fr.err != nil {
			return fr.err
		}
		out = append(out, a)
		return nil
	})
	return out, errs
}

// ParseQOS parses the output of QOSQueryArgs. A row that cannot be read is
// reported and skipped.
func ParseQOS(r io.Reader) ([]QOS, []error) {
	var out []QOS
	seen := map[string]int{}
	errs := parsable2Rows(r, 17, "QOS", func(line int, f []string) error {
		q := QOS{Name: f[0]}
		fr := &fieldReader{line: line, record: q.Name}
		if q.Name == "" {
			fr.fail("Name", "", fmt.Errorf("%w: QOS without a name", ErrMalformed))
		}
		if prev, dup := seen[q.Name]; dup {
			fr.fail("Name", q.Name, fmt.Errorf("%w: QOS %s already listed on line %d", ErrDuplicate, q.Name, prev))
		}
		if p := fr.limit("Priority", f[1]); p.Set() {
			q.Priority = int64(p)
		}
		q.Flags = listValue(f[2])
		q.GrpTRES = fr.tres("GrpTRES", f[3])
		q.GrpJobs = fr.limit("GrpJobs", f[4])
		q.GrpSubmitJobs = fr.limit("GrpSubmitJobs", f[5])
		q.MaxTRESPerJob = fr.tres("MaxTRES", f[6])
		q.MaxTRESPerNode = fr.tres("MaxTRESPerNode", f[7])
		q.MaxTRESPerUser = fr.tres("MaxTRESPerUser", f[8])
		q.MaxJobsPerUser = fr.limit("MaxJobsPerUser", f[9])
		q.MaxSubmitJobsPerUser = fr.limit("MaxSubmitJobsPerUser", f[10])
		q.MaxTRESPerAccount = fr.tres("MaxTRESPerAccount", f[11])
		q.MaxJobsPerAccount = fr.limit("MaxJobsPerAccount", f[12])
		q.MaxSubmitJobsPerAccount = fr.limit("MaxSubmitJobsPerAccount", f[13])
		q.MaxWall = f[14]
		q.MinTRES = fr.tres("MinTRES", f[15])
		q.UsageFactor = 1
		if f[16] != "" {
			v, err := strconv.ParseFloat(f[16], 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				fr.fail("UsageFactor", f[16], fmt.Errorf("%w: not a factor", ErrMalformed))
			}
			q.UsageFactor = v
		}
		if fr.err != nil {
			return fr.err
		}
		seen[q.Name] = line
		out = append(out, q)
		return nil
	})
	return out, errs
}

// SharesQueryArgs is the argv of the command that reads the fairshare tree:
// sshare -a -P prints a header, then one row per association, the tree
// shown by leading spaces on Account.
var SharesQueryArgs = []string{"sshare", "-a", "-P"}

// Share is one row of sshare -a -P (or -l).
type Share struct {
	// Account without sshare's indentation; Depth is that indentation (root 0).
	Account string
	Depth   int
	User    string
	// RawShares is empty for root and "parent" for Fairshare=parent.
	RawShares      string
	NormShares     float64
	RawUsage       int64
	EffectiveUsage float64
	// FairShare is the factor (0..1) that multifactor priority uses; sshare
	// prints it for users' rows only (HasFairShare).
	FairShare    float64
	HasFairShare bool
}

// ParseShares parses sshare -P output with its header line (any column
// order; Account, User, RawShares, NormShares, RawUsage, EffectvUsage and
// FairShare are read, the rest ignored).
func ParseShares(r io.Reader) ([]Share, []error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, []error{fmt.Errorf("reading sshare output: %w", err)}
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) == "" {
		return nil, nil
	}
	col := map[string]int{}
	header := strings.Split(lines[0], "|")
	for i, h := range header {
		col[h] = i
	}
	for _, need := range []string{"Account", "User", "RawShares", "NormShares", "RawUsage", "EffectvUsage", "FairShare"} {
		if _, ok := col[need]; !ok {
			return nil, []error{&ParseError{Line: 1, Input: snippet(lines[0]),
				Err: fmt.Errorf("%w: sshare header lacks %s", ErrMalformed, need)}}
		}
	}
	var out []Share
	var errs errCollector
	for i, text := range lines[1:] {
		line := i + 2
		if strings.TrimSpace(text) == "" {
			continue
		}
		f := strings.Split(text, "|")
		if len(f) != len(header) {
			errs.add(&ParseError{Line: line, Input: snippet(text),
				Err: fmt.Errorf("%w: sshare row has %d fields, want %d", ErrMalformed, len(f), len(header))})
			continue
		}
		acct := f[col["Account"]]
		s := Share{Account: strings.TrimLeft(acct, " "), User: f[col["User"]], RawShares: f[col["RawShares"]]}
		s.Depth = len(acct) - len(s.Account)
		fr := &fieldReader{line: line, record: s.Account + "/" + s.User}
		if s.Account == "" {
			fr.fail("Account", "", fmt.Errorf("%w: row without an account", ErrMalformed))
		}
		s.NormShares = fr.fraction("NormShares", f[col["NormShares"]])
		if v := f[col["RawUsage"]]; v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				fr.fail("RawUsage", v, fmt.Errorf("%w: not a usage count", ErrMalformed))
			}
			s.RawUsage = n
		}
		s.EffectiveUsage = fr.fraction("EffectvUsage", f[col["EffectvUsage"]])
		if v := f[col["FairShare"]]; v != "" {
			s.FairShare, s.HasFairShare = fr.fraction("FairShare", v), true
		}
		if fr.err != nil {
			errs.add(fr.err)
			continue
		}
		out = append(out, s)
	}
	return out, errs.result()
}

// fraction reads a number in [0, 1] ("" gives 0).
func (fr *fieldReader) fraction(field, s string) float64 {
	if s == "" {
		return 0
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 1 {
		fr.fail(field, s, fmt.Errorf("%w: not a fraction", ErrMalformed))
		return 0
	}
	return v
}
