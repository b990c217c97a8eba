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

// DefaultAliases are the names a new database starts with: the names NVML
// and common gres.conf files give the GPUs in Gavel's matrix and a few newer
// ones. Their canonical types are created with them; a type with no rates
// runs every job at 0 until rates are set, learned or imported.
func DefaultAliases() []Alias {
	return []Alias{
		{"tesla_k80", "k80"},
		{"tesla_p100-pcie-12gb", "p100"},
		{"tesla_p100-pcie-16gb", "p100"},
		{"tesla_p100-sxm2-16gb", "p100"},
		{"tesla_v100-pcie-16gb", "v100"},
		{"tesla_v100-pcie-32gb", "v100"},
		{"tesla_v100-sxm2-16gb", "v100"},
		{"tesla_v100-sxm2-32gb", "v100"},
		{"tesla_v100s-pcie-32gb", "v100"},
		{"tesla_t4", "t4"},
		{"NVlink_A100_40GB", "a100"},
		{"nvidia_a100-pcie-40gb", "a100"},
		{"nvidia_a100-sxm4-40gb", "a100"},
		{"nvidia_a100-sxm4-80gb", "a100"},
		{"nvidia_a100_80gb_pcie", "a100"},
		{"nvidia_a40", "a40"},
		{"nvidia_rtx_a6000", "a6000"},
		{"nvidia_l40s", "l40s"},
		{"nvidia_h100_80gb_hbm3", "h100"},
		{"nvidia_h100_pcie", "h100"},
	}
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
// from a known type; an unknown canonical name becomes a new GPU type
// (lowercased). It returns the canonical type the alias now points to. An
// alias may not shadow a different canonical type's own name.
func (s *Store) SetAlias(ctx context.Context, site, canonical string) (string, error) {
	site = strings.TrimSpace(site)
	if site == "" {
		return "", fmt.Errorf("set alias: %w: empty site name", ErrInvalid)
	}
	var target string
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		target, err = gpuTypeForWrite(ctx, tx, canonical)
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

// matchGPUType is step 4 of ResolveGPUType.
func matchGPUType(name string, types []string) (string, error) {
	lname := strings.ToLower(name)
	var best []string
	bestLen := 0
	for _, t := range types {
		lt := strings.ToLower(t)
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
