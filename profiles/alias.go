package profiles

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Alias maps a site's GPU type name (the GRES type in gres.conf, as sinfo
// prints it) to a canonical GPU type.
type Alias struct {
	Site    string `json:"site"`
	GPUType string `json:"gpu_type"`
}

// DefaultAliases are the names a new database starts with: the names
// Slurm's AutoDetect=nvml (and rsmi) gives the GPUs of the catalogue (the
// device name lowercased, spaces as underscores) and the names sites
// commonly write in gres.conf. Every target is a catalogue type (Catalog),
// created with the database; a type with no rates gets the prior's (see
// WithPrior) until rates are set, learned or imported.
func DefaultAliases() []Alias {
	return []Alias{
		// Kepler, Pascal, Volta, Turing (Gavel's k80, p100, v100).
		{"tesla_k80", "k80"},
		{"tesla_p100-pcie-12gb", "p100"},
		{"tesla_p100-pcie-16gb", "p100"},
		{"tesla_p100-sxm2-16gb", "p100"},
		{"tesla_v100-pcie-16gb", "v100"},
		{"tesla_v100-pcie-32gb", "v100"},
		{"tesla_v100-sxm2-16gb", "v100"},
		{"tesla_v100-sxm2-32gb", "v100"},
		{"tesla_v100s-pcie-32gb", "v100"},
		{"v100-sxm2-32gb", "v100"},
		{"v100-32gb", "v100"},
		{"v100s", "v100"},
		{"tesla_t4", "t4"},
		{"nvidia_t4", "t4"},
		{"quadro_rtx_8000", "rtx8000"},
		{"nvidia_quadro_rtx_8000", "rtx8000"},
		{"rtx_8000", "rtx8000"},
		// Ampere.
		{"nvidia_a10", "a10"},
		{"nvidia_a30", "a30"},
		{"nvidia_a40", "a40"},
		{"nvidia_a100-sxm4-80gb", "a100"},
		{"a100-sxm4-80gb", "a100"},
		{"a100_80gb", "a100"},
		{"a100-80gb", "a100"},
		{"a100-sxm4", "a100"},
		{"nvidia_a100-sxm4-40gb", "a100-40gb"},
		{"a100-sxm4-40gb", "a100-40gb"},
		{"NVlink_A100_40GB", "a100-40gb"},
		{"nvidia_a100-pcie-40gb", "a100-pcie"},
		{"nvidia_a100_80gb_pcie", "a100-pcie"},
		{"a100-pcie-40gb", "a100-pcie"},
		{"a100-pcie-80gb", "a100-pcie"},
		{"a100_pcie", "a100-pcie"},
		{"nvidia_geforce_rtx_3090", "rtx3090"},
		{"rtx_3090", "rtx3090"},
		{"nvidia_rtx_a6000", "rtxa6000"},
		{"rtx_a6000", "rtxa6000"},
		{"a6000", "rtxa6000"},
		// Ada Lovelace.
		{"nvidia_l4", "l4"},
		{"nvidia_l40", "l40"},
		{"nvidia_l40s", "l40s"},
		{"nvidia_geforce_rtx_4090", "rtx4090"},
		{"rtx_4090", "rtx4090"},
		{"nvidia_rtx_6000_ada_generation", "rtx6000ada"},
		{"rtx_6000_ada", "rtx6000ada"},
		{"rtx6000_ada", "rtx6000ada"},
		// Hopper, Blackwell.
		{"nvidia_h100_80gb_hbm3", "h100"},
		{"h100-sxm5-80gb", "h100"},
		{"h100-sxm5", "h100"},
		{"h100_80gb", "h100"},
		{"h100-80gb", "h100"},
		{"nvidia_h100_pcie", "h100-pcie"},
		{"h100_pcie", "h100-pcie"},
		{"nvidia_h100_nvl", "h100-nvl"},
		{"h100_nvl", "h100-nvl"},
		{"h100nvl", "h100-nvl"},
		{"nvidia_h200", "h200"},
		{"nvidia_h200_nvl", "h200"},
		{"nvidia_gh200_480gb", "gh200"},
		{"nvidia_gh200_144g_hbm3e", "gh200"},
		{"nvidia_b200", "b200"},
		// AMD (AutoDetect=rsmi).
		{"amd_instinct_mi210", "mi210"},
		{"amd_instinct_mi250x", "mi250x"},
		{"amd_instinct_mi250x_/_mi250", "mi250x"},
		{"amd_instinct_mi300x", "mi300x"},
	}
}

// ResolveDefault maps a GPU type name to a canonical type with no database:
// the lookups of ResolveGPUType over DefaultAliases and the catalogue's
// types (and the extra canonical types given, e.g. a matrix's), for
// commands that run on an embedded matrix.
func ResolveDefault(name string, extra ...string) (string, error) {
	name = strings.TrimSpace(name)
	types := append(CatalogTypes(), extra...)
	for _, a := range DefaultAliases() {
		if a.Site == name {
			return a.GPUType, nil
		}
	}
	for _, t := range types {
		if strings.EqualFold(t, name) {
			return t, nil
		}
	}
	for _, a := range DefaultAliases() {
		if strings.EqualFold(a.Site, name) {
			return a.GPUType, nil
		}
	}
	gt, err := matchGPUType(name, types)
	if errors.Is(err, ErrNotFound) {
		var sites []string
		for _, a := range DefaultAliases() {
			sites = append(sites, a.Site)
		}
		return "", fmt.Errorf("resolve GPU type %q: %w%s", name, err, didYouMean(name, types, sites))
	}
	if err != nil {
		return "", fmt.Errorf("resolve GPU type %q: %w", name, err)
	}
	return gt, nil
}

// didYouMean is ` (closest known names: h100, h200)` for the GPU type name
// names and aliases resemble, or "".
func didYouMean(name string, types, aliases []string) string {
	near := ClosestGPUNames(name, types, aliases)
	if len(near) == 0 {
		return "; no known GPU type resembles it (hadar profiles gpus lists the catalogue)"
	}
	return "; closest known names: " + strings.Join(near, ", ")
}

// ClosestGPUNames returns up to three of types and aliases whose names,
// vendor prefixes ("nvidia_", "tesla_", ...), memory sizes and separators
// removed, are within a small edit distance of name's: nvidia_h800 is near
// h100 and h200. Types come before aliases at the same distance.
func ClosestGPUNames(name string, types, aliases []string) []string {
	core := gpuNameCore(name)
	if core == "" {
		return nil
	}
	limit := max(2, len(core)/4)
	type cand struct {
		name string
		dist int
		rank int
	}
	var cands []cand
	seen := map[string]bool{}
	for rank, list := range [][]string{types, aliases} {
		for _, n := range list {
			d := editDistance(core, gpuNameCore(n))
			if d <= limit && !seen[n] {
				seen[n] = true
				cands = append(cands, cand{n, d, rank})
			}
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		if cands[i].dist != cands[j].dist {
			return cands[i].dist < cands[j].dist
		}
		if cands[i].rank != cands[j].rank {
			return cands[i].rank < cands[j].rank
		}
		return cands[i].name < cands[j].name
	})
	var out []string
	cores := map[string]bool{}
	for _, c := range cands {
		if len(out) == 3 {
			break
		}
		if core := gpuNameCore(c.name); !cores[core] {
			cores[core] = true
			out = append(out, c.name)
		}
	}
	return out
}

// gpuNameCore is name lowercased without vendor prefixes, memory sizes
// and separators: "NVIDIA_H100_PCIe_80GB" -> "h100pcie".
func gpuNameCore(name string) string {
	n := strings.ToLower(strings.TrimSpace(name))
	for _, p := range []string{"nvidia_", "nvidia ", "nvidia-", "tesla_", "tesla ", "amd_instinct_", "geforce_"} {
		n = strings.TrimPrefix(n, p)
	}
	var b strings.Builder
	for _, tok := range strings.FieldsFunc(n, func(r rune) bool { return r == '_' || r == '-' || r == ' ' }) {
		if strings.HasSuffix(tok, "gb") && strings.Trim(strings.TrimSuffix(tok, "gb"), "0123456789") == "" {
			continue
		}
		b.WriteString(tok)
	}
	return b.String()
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Aliases returns every alias, sorted by site name.
func (s *Store) Aliases(ctx context.Context) ([]Alias, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT site_name, gpu_type FROM gpu_aliases ORDER BY site_name`)
	if err != nil {
		return nil, fmt.Errorf("list aliases: %w", err)
	}
	defer rows.Close()
	var out []Alias
	for rows.Next() {
		var a Alias
		if err := rows.Scan(&a.Site, &a.GPUType); err != nil {
			return nil, fmt.Errorf("list aliases: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list aliases: %w", err)
	}
	return out, nil
}

// SetAlias maps the site name site to canonical, replacing any earlier
// mapping of site. canonical may itself be a known alias or differ in case
// from a known type, or be a catalogue type the database lacks (it is
// created); any other name is ErrNotFound: an alias to a type with no
// rates and no specs would schedule nothing, and is most often a typo. It
// returns the canonical type the alias now points to. An alias may not
// shadow a different canonical type's own name.
func (s *Store) SetAlias(ctx context.Context, site, canonical string) (string, error) {
	site = strings.TrimSpace(site)
	if site == "" {
		return "", fmt.Errorf("set alias: %w: empty site name", ErrInvalid)
	}
	var target string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		target, err = aliasTarget(ctx, tx, canonical)
		if err != nil {
			return err
		}
		var other string
		err = tx.QueryRowContext(ctx, `SELECT name FROM gpu_types WHERE name = ? COLLATE NOCASE`, site).Scan(&other)
		switch {
		case err == nil && other != target:
			return fmt.Errorf("%w: %q is the canonical GPU type %q; it cannot alias %q", ErrInvalid, site, other, target)
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO gpu_aliases (site_name, gpu_type) VALUES (?, ?)
			ON CONFLICT (site_name) DO UPDATE SET gpu_type = excluded.gpu_type`, site, target)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("set alias %q -> %q: %w", site, canonical, err)
	}
	return target, nil
}

// ResolveGPUType maps a site's GPU type name to a canonical type, trying in
// order:
//
//  1. an alias whose site name is exactly name;
//  2. a canonical type equal to name ignoring case ("V100" -> "v100");
//  3. an alias equal to name ignoring case;
//  4. a canonical type contained in name ignoring case, where the characters
//     on either side of the match are not digits ("v100" in
//     "tesla_v100-sxm2-32gb", but "a100" not in "rtx_a1000"). If several
//     types match, the longest wins; two different types of the same length
//     are ErrAmbiguous.
//
// A name that matches nothing is ErrNotFound.
func (s *Store) ResolveGPUType(ctx context.Context, name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", fmt.Errorf("resolve GPU type: %w: empty name", ErrInvalid)
	}
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	if s.cache.current(ctx) {
		if gt, ok := s.cache.resolved[name]; ok {
			return gt, nil
		}
	}
	gt, err := s.resolveGPUType(ctx, name)
	if err == nil && s.cache.valid {
		s.cache.resolved[name] = gt
	}
	return gt, err
}

func (s *Store) resolveGPUType(ctx context.Context, name string) (string, error) {
	gt, err := lookupGPUType(ctx, s.db, name)
	if err == nil {
		return gt, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("resolve GPU type %q: %w", name, err)
	}
	types, err := s.GPUTypes(ctx)
	if err != nil {
		return "", fmt.Errorf("resolve GPU type %q: %w", name, err)
	}
	gt, err = matchGPUType(name, types)
	if errors.Is(err, ErrNotFound) {
		var sites []string
		if as, aerr := s.Aliases(ctx); aerr == nil {
			for _, a := range as {
				sites = append(sites, a.Site)
			}
		}
		return "", fmt.Errorf("resolve GPU type %q: %w%s", name, err, didYouMean(name, types, sites))
	}
	if err != nil {
		return "", fmt.Errorf("resolve GPU type %q: %w", name, err)
	}
	return gt, nil
}

// lookupGPUType runs steps 1-3 of ResolveGPUType: exact names only, no
// guessing.
func lookupGPUType(ctx context.Context, q querier, name string) (string, error) {
	var gt string
	err := q.QueryRowContext(ctx, `SELECT gpu_type FROM gpu_aliases WHERE site_name = ?`, name).Scan(&gt)
	if err == nil {
		return gt, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	err = q.QueryRowContext(ctx, `SELECT name FROM gpu_types WHERE name = ? COLLATE NOCASE`, name).Scan(&gt)
	if err == nil {
		return gt, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return "", err
	}
	rows, err := q.QueryContext(ctx, `SELECT DISTINCT gpu_type FROM gpu_aliases WHERE site_name = ? COLLATE NOCASE ORDER BY gpu_type`, name)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var found []string
	for rows.Next() {
		if err := rows.Scan(&gt); err != nil {
			return "", err
		}
		found = append(found, gt)
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	switch len(found) {
	case 0:
		return "", ErrNotFound
	case 1:
		return found[0], nil
	default:
		return "", fmt.Errorf("%w: aliases differing only in case map to %s", ErrAmbiguous, strings.Join(found, ", "))
	}
}

// gpuTypeForWrite names the canonical type a write about name goes to:
// steps 1-3 of ResolveGPUType, else a new type, name lowercased. It does not
// guess by substring, so importing "v100s" never overwrites "v100".
func gpuTypeForWrite(ctx context.Context, tx *sql.Tx, name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", fmt.Errorf("%w: empty GPU type", ErrInvalid)
	}
	gt, err := lookupGPUType(ctx, tx, name)
	if err == nil {
		return gt, nil
	}
	if !errors.Is(err, ErrNotFound) {
		return "", err
	}
	gt = strings.ToLower(name)
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO gpu_types (name) VALUES (?)`, gt); err != nil {
		return "", fmt.Errorf("add GPU type %q: %w", gt, err)
	}
	return gt, nil
}

// aliasTarget names the canonical type an alias to name points to: steps
// 1-3 of ResolveGPUType, else a catalogue type (created), else ErrNotFound.
func aliasTarget(ctx context.Context, tx *sql.Tx, name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return "", fmt.Errorf("%w: empty GPU type", ErrInvalid)
	}
	gt, err := lookupGPUType(ctx, tx, name)
	if !errors.Is(err, ErrNotFound) {
		return gt, err
	}
	spec, ok := LookupGPU(name)
	if !ok {
		return "", fmt.Errorf("%w: unknown canonical GPU type %q: it is neither in the database nor in the catalogue (%s)%s", ErrNotFound, name, strings.Join(CatalogTypes(), ", "), didYouMean(name, CatalogTypes(), nil))
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO gpu_types (name) VALUES (?)`, spec.Type); err != nil {
		return "", fmt.Errorf("add GPU type %q: %w", spec.Type, err)
	}
	return spec.Type, nil
}

// matchGPUType is step 4 of ResolveGPUType. Underscores, hyphens and
// spaces count as one separator, so "h100-pcie" matches in
// "nvidia_h100_pcie_80gb" and wins over "h100" as the longer match.
func matchGPUType(name string, types []string) (string, error) {
	lname := separatorsAsHyphen(name)
	var best []string
	bestLen := 0
	for _, t := range types {
		lt := separatorsAsHyphen(t)
		if lt == "" || !containsBounded(lname, lt) {
			continue
		}
		switch {
		case len(lt) > bestLen:
			best, bestLen = []string{t}, len(lt)
		case len(lt) == bestLen:
			best = append(best, t)
		}
	}
	switch len(best) {
	case 0:
		return "", ErrNotFound
	case 1:
		return best[0], nil
	default:
		sort.Strings(best)
		return "", fmt.Errorf("%w: matches %s", ErrAmbiguous, strings.Join(best, ", "))
	}
}

// separatorsAsHyphen is s lowercased with '_' and ' ' written '-'.
func separatorsAsHyphen(s string) string {
	return strings.NewReplacer("_", "-", " ", "-").Replace(strings.ToLower(s))
}

// containsBounded reports whether sub occurs in s with no digit immediately
// before or after it.
func containsBounded(s, sub string) bool {
	for from := 0; from+len(sub) <= len(s); {
		i := strings.Index(s[from:], sub)
		if i < 0 {
			return false
		}
		i += from
		end := i + len(sub)
		if (i == 0 || !isDigit(s[i-1])) && (end == len(s) || !isDigit(s[end])) {
			return true
		}
		from = i + 1
	}
	return false
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }
