package slurmsim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/hadar-sched/hadar/slurm"
)

// Site is a site's policy as a site file gives it (`hadar simulate --layout
// L --site FILE`, docs/fidelity.md): accounts with shares, users with
// their account and QOS, QOS limits, priority/multifactor's weights,
// reservations, the partition's default time limit. Apply turns it into a
// Config's Limits, Priority, Usage, Reservations and DefaultTime.
type Site struct {
	// DefaultTime is the partition's DefaultTime ("5m"): the time limit of
	// jobs submitted without one; they end in TIMEOUT past it.
	DefaultTime SiteDuration `toml:"default_time"`
	// Priority are priority/multifactor's weights (default: those of the
	// accounting test cluster, DefaultMultifactor).
	Priority *SitePriority `toml:"priority"`
	// Accounts, Users and QOS by name.
	Accounts map[string]SiteAccount `toml:"accounts"`
	Users    map[string]SiteUser    `toml:"users"`
	QOS      map[string]SiteQOS     `toml:"qos"`
	// Reservations, their start counted from the start of the trace.
	Reservations []SiteReservation `toml:"reservations"`
}

// SitePriority are slurm.conf's PriorityWeightFairshare, PriorityWeightAge,
// PriorityMaxAge and PriorityDecayHalfLife.
type SitePriority struct {
	WeightFairshare *int64        `toml:"weight_fairshare"`
	WeightAge       *int64        `toml:"weight_age"`
	MaxAge          *SiteDuration `toml:"max_age"`
	DecayHalfLife   *SiteDuration `toml:"decay_half_life"`
}

// SiteAccount is an account's association: its Fairshare= (shares), its
// parent ("" or "root": under root), its GrpTRES=gres/gpu=N (max_gpus),
// GrpJobs (max_jobs), and its usage before the trace (sshare's RawUsage,
// here in GPU-hours) for the fairshare factor.
type SiteAccount struct {
	Shares        *int64   `toml:"shares"`
	Parent        string   `toml:"parent"`
	MaxGPUs       *int64   `toml:"max_gpus"`
	MaxJobs       *int64   `toml:"max_jobs"`
	UsageGPUHours *float64 `toml:"usage_gpu_hours"`
}

// SiteUser is a user's association: its account, its default QOS (default
// "normal"; the user may also use "normal"), and its own GrpTRES
// (max_gpus) and MaxJobs (max_jobs).
type SiteUser struct {
	Account string `toml:"account"`
	QOS     string `toml:"qos"`
	MaxGPUs *int64 `toml:"max_gpus"`
	MaxJobs *int64 `toml:"max_jobs"`
}

// SiteQOS are a QOS's limits on GPUs (gres/gpu) and running jobs:
// GrpTRES (max_gpus), GrpJobs (max_jobs), MaxTRES per job
// (max_gpus_per_job), MaxTRESPerUser, MaxJobsPerUser, MaxTRESPerAccount,
// MaxJobsPerAccount. "normal" exists without limits unless given.
type SiteQOS struct {
	MaxGPUs           *int64 `toml:"max_gpus"`
	MaxJobs           *int64 `toml:"max_jobs"`
	MaxGPUsPerJob     *int64 `toml:"max_gpus_per_job"`
	MaxGPUsPerUser    *int64 `toml:"max_gpus_per_user"`
	MaxJobsPerUser    *int64 `toml:"max_jobs_per_user"`
	MaxGPUsPerAccount *int64 `toml:"max_gpus_per_account"`
	MaxJobsPerAccount *int64 `toml:"max_jobs_per_account"`
}

// SiteReservation is scontrol create reservation: Name, Nodes (a host
// list, "node[1-2]"), StartTime (Start after the start of the trace),
// Duration, Flags (MAINT, ...) and Users (who may run in it; root's
// maintenance keeps everyone else's jobs off).
type SiteReservation struct {
	Name     string       `toml:"name"`
	Nodes    string       `toml:"nodes"`
	Start    SiteDuration `toml:"start"`
	Duration SiteDuration `toml:"duration"`
	Flags    []string     `toml:"flags"`
	Users    []string     `toml:"users"`
}

// SiteDuration is a duration written as Go writes one ("90s", "1h30m").
type SiteDuration struct{ time.Duration }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *SiteDuration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("%q is not a duration such as 90s or 1h30m", string(b))
	}
	d.Duration = v
	return nil
}

// DefaultMultifactor are the weights of the accounting test cluster
// (contrib/testcluster up --accounting) that a site file without
// [priority] gets, with Slurm's default half-life of 7 days.
var DefaultMultifactor = Multifactor{WeightFairshare: 10000, WeightAge: 1000, MaxAge: time.Hour, DecayHalfLife: 7 * 24 * time.Hour}

// maxUsageGPUHours bounds an account's past usage (a million GPUs for a
// century is below it).
const maxUsageGPUHours = 1e12

// ReadSite reads the site file at path (ParseSite).
func ReadSite(path string) (*Site, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("site: %w", err)
	}
	defer f.Close()
	return ParseSite(f, path)
}

// ParseSite reads a site file (TOML; Site) and checks it: no unknown key,
// no negative count, every user's account and QOS and every account's
// parent defined, no loop of parents, reservations with a name, nodes and
// a positive duration. name labels errors.
func ParseSite(r io.Reader, name string) (*Site, error) {
	var s Site
	md, err := toml.NewDecoder(r).Decode(&s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		keys := make([]string, len(und))
		for i, k := range und {
			keys[i] = k.String()
		}
		return nil, fmt.Errorf("%s: unknown keys: %s", name, strings.Join(keys, ", "))
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &s, nil
}

func (s *Site) check() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	count := func(what string, v *int64) {
		if v != nil && *v < 0 {
			bad("%s is %d: a limit is 0 or more", what, *v)
		}
	}
	if s.DefaultTime.Duration < 0 {
		bad("default_time is negative")
	}
	if p := s.Priority; p != nil {
		count("priority.weight_fairshare", p.WeightFairshare)
		count("priority.weight_age", p.WeightAge)
		if p.MaxAge != nil && p.MaxAge.Duration <= 0 {
			bad("priority.max_age must be positive")
		}
		if p.DecayHalfLife != nil && p.DecayHalfLife.Duration < 0 {
			bad("priority.decay_half_life is negative (0: no decay)")
		}
	}
	for _, name := range sortedKeys(s.Accounts) {
		a := s.Accounts[name]
		if name == "root" {
			bad("accounts.root: root is the tree's top, not an account to define")
		}
		if a.Parent != "" && a.Parent != "root" {
			if _, ok := s.Accounts[a.Parent]; !ok {
				bad("accounts.%s: parent %q is not an account of the file", name, a.Parent)
			}
		}
		count("accounts."+name+".shares", a.Shares)
		count("accounts."+name+".max_gpus", a.MaxGPUs)
		count("accounts."+name+".max_jobs", a.MaxJobs)
		if u := a.UsageGPUHours; u != nil && !(*u >= 0 && *u <= maxUsageGPUHours) {
			bad("accounts.%s.usage_gpu_hours must be from 0 to %g", name, float64(maxUsageGPUHours))
		}
		seen := map[string]bool{}
		for p := name; p != "" && p != "root"; p = s.Accounts[p].Parent {
			if seen[p] {
				bad("accounts.%s: its parents loop (%s)", name, p)
				break
			}
			seen[p] = true
		}
	}
	for _, name := range sortedKeys(s.Users) {
		u := s.Users[name]
		if u.Account == "" {
			bad("users.%s: no account", name)
		} else if _, ok := s.Accounts[u.Account]; !ok {
			bad("users.%s: account %q is not in [accounts]", name, u.Account)
		}
		if u.QOS != "" && u.QOS != "normal" {
			if _, ok := s.QOS[u.QOS]; !ok {
				bad("users.%s: QOS %q is not in [qos]", name, u.QOS)
			}
		}
		count("users."+name+".max_gpus", u.MaxGPUs)
		count("users."+name+".max_jobs", u.MaxJobs)
	}
	for _, name := range sortedKeys(s.QOS) {
		q := s.QOS[name]
		for _, f := range []struct {
			key string
			v   *int64
		}{{"max_gpus", q.MaxGPUs}, {"max_jobs", q.MaxJobs}, {"max_gpus_per_job", q.MaxGPUsPerJob},
			{"max_gpus_per_user", q.MaxGPUsPerUser}, {"max_jobs_per_user", q.MaxJobsPerUser},
			{"max_gpus_per_account", q.MaxGPUsPerAccount}, {"max_jobs_per_account", q.MaxJobsPerAccount}} {
			count("qos."+name+"."+f.key, f.v)
		}
	}
	names := map[string]bool{}
	for i, r := range s.Reservations {
		where := fmt.Sprintf("reservations[%d]", i+1)
		if r.Name == "" {
			bad("%s: no name", where)
		} else if names[r.Name] {
			bad("%s: reservation %s given twice", where, r.Name)
		}
		names[r.Name] = true
		if r.Nodes == "" {
			bad("%s: no nodes", where)
		} else if _, err := slurm.ExpandHostlist(r.Nodes); err != nil {
			bad("%s: nodes %q: %v", where, r.Nodes, err)
		}
		if r.Start.Duration < 0 {
			bad("%s: start is negative (it counts from the start of the trace)", where)
		}
		if r.Duration.Duration <= 0 {
			bad("%s: duration must be positive", where)
		}
	}
	return errors.Join(errs...)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Accounting reports whether the site has accounts (and so limits and
// fairshare).
func (s *Site) Accounting() bool { return len(s.Accounts) > 0 }

// Scope is the account and QOS a job of user asking for qos ("" for the
// user's default) runs under, or why the site refuses it (sbatch's
// "Invalid account or account/partition combination", "Invalid qos
// specification").
func (s *Site) Scope(user, qos string) (account, jobQOS string, err error) {
	u, ok := s.Users[user]
	if !ok {
		return "", "", fmt.Errorf("user %q has no association in the site file (add [users.%s])", user, user)
	}
	def := u.QOS
	if def == "" {
		def = "normal"
	}
	if qos == "" {
		qos = def
	}
	if qos != def && qos != "normal" {
		return "", "", fmt.Errorf("user %s may not use QOS %q (the site file gives %s and normal)", user, qos, def)
	}
	return u.Account, qos, nil
}

// Apply gives cfg the site: its Limits (the associations of root, the
// accounts and the users; the QOS, "normal" among them), Priority (with
// accounts: [priority] over DefaultMultifactor; without: none, age order),
// Usage, Reservations from cfg.Start and DefaultTime. It checks the
// reservations' nodes against cfg.Layout.
func (s *Site) Apply(cfg *Config) error {
	cfg.DefaultTime = s.DefaultTime.Duration
	for _, r := range s.Reservations {
		nodes, _ := slurm.ExpandHostlist(r.Nodes)
		start := cfg.Start.Add(r.Start.Duration)
		users := slices.Clone(r.Users)
		flags := make([]string, len(r.Flags))
		for i, f := range r.Flags {
			flags[i] = strings.ToUpper(f)
		}
		cfg.Reservations = append(cfg.Reservations, slurm.Reservation{Name: r.Name, Start: start, End: start.Add(r.Duration.Duration),
			Nodes: nodes, Partition: "gpu", Flags: flags, Users: users})
	}
	if err := CheckSite(*cfg); err != nil {
		return fmt.Errorf("site: %w", err)
	}
	if !s.Accounting() {
		return nil
	}
	lim := &slurm.Limits{}
	gpus := func(v *int64) slurm.TRES {
		if v == nil {
			return nil
		}
		return slurm.TRES{"gres/gpu": *v}
	}
	jobs := func(v *int64) slurm.Limit {
		if v == nil {
			return slurm.NoLimit
		}
		return slurm.Limit(*v)
	}
	assoc := func(account, user, parent string, shares int64) slurm.Association {
		return slurm.Association{Cluster: "sim", Account: account, User: user, ParentAccount: parent, Shares: shares,
			GrpJobs: slurm.NoLimit, GrpSubmitJobs: slurm.NoLimit, MaxJobs: slurm.NoLimit, MaxSubmitJobs: slurm.NoLimit,
			Priority: slurm.NoLimit, QOS: []string{"normal"}, DefaultQOS: "normal"}
	}
	lim.Associations = append(lim.Associations, assoc("root", "", "", 1))
	cfg.Usage = map[string]float64{}
	for _, name := range sortedKeys(s.Accounts) {
		a := s.Accounts[name]
		parent := a.Parent
		if parent == "" {
			parent = "root"
		}
		shares := int64(1)
		if a.Shares != nil {
			shares = *a.Shares
		}
		as := assoc(name, "", parent, shares)
		as.GrpTRES, as.GrpJobs = gpus(a.MaxGPUs), jobs(a.MaxJobs)
		lim.Associations = append(lim.Associations, as)
		if a.UsageGPUHours != nil {
			cfg.Usage[name] = *a.UsageGPUHours * 3600
		}
	}
	for _, name := range sortedKeys(s.Users) {
		u := s.Users[name]
		as := assoc(u.Account, name, "", 1)
		if u.QOS != "" && u.QOS != "normal" {
			as.QOS, as.DefaultQOS = []string{u.QOS, "normal"}, u.QOS
		}
		as.GrpTRES, as.MaxJobs = gpus(u.MaxGPUs), jobs(u.MaxJobs)
		lim.Associations = append(lim.Associations, as)
	}
	qosNames := sortedKeys(s.QOS)
	if _, ok := s.QOS["normal"]; !ok {
		qosNames = append([]string{"normal"}, qosNames...)
	}
	for _, name := range qosNames {
		q := s.QOS[name]
		lim.QOS = append(lim.QOS, slurm.QOS{Name: name,
			GrpTRES: gpus(q.MaxGPUs), GrpJobs: jobs(q.MaxJobs), GrpSubmitJobs: slurm.NoLimit,
			MaxTRESPerJob: gpus(q.MaxGPUsPerJob), MaxTRESPerUser: gpus(q.MaxGPUsPerUser), MaxJobsPerUser: jobs(q.MaxJobsPerUser),
			MaxSubmitJobsPerUser: slurm.NoLimit, MaxTRESPerAccount: gpus(q.MaxGPUsPerAccount),
			MaxJobsPerAccount: jobs(q.MaxJobsPerAccount), MaxSubmitJobsPerAccount: slurm.NoLimit})
	}
	cfg.Limits = lim
	m := DefaultMultifactor
	if p := s.Priority; p != nil {
		if p.WeightFairshare != nil {
			m.WeightFairshare = *p.WeightFairshare
		}
		if p.WeightAge != nil {
			m.WeightAge = *p.WeightAge
		}
		if p.MaxAge != nil {
			m.MaxAge = p.MaxAge.Duration
		}
		if p.DecayHalfLife != nil {
			m.DecayHalfLife = p.DecayHalfLife.Duration
		}
	}
	cfg.Priority = m
	return nil
}
