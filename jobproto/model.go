package jobproto

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// NormalizeModel is how job type names are compared: lower case, every
// character that is not a letter or digit dropped, and "batchsize" written
// "bs". So "ResNet-50 (batch size 64)", "resnet50-bs64", "resnet-50_bs64"
// and "RESNET50_BATCH_SIZE_64" all normalise to "resnet50bs64".
func NormalizeModel(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			b.WriteRune(r)
		}
	}
	return strings.ReplaceAll(b.String(), "batchsize", "bs")
}

// ErrAmbiguousModel: a model= that names several job types.
var ErrAmbiguousModel = errors.New("ambiguous model")

// ambiguousError is an ErrAmbiguousModel with its own message.
type ambiguousError string

func (e ambiguousError) Error() string        { return string(e) }
func (e ambiguousError) Is(target error) bool { return target == ErrAmbiguousModel }

// ModelResolver maps what users write in model= to a job type of the
// throughput matrix:
//
//  1. an alias from the config ([models] aliases), compared normalised;
//  2. a job type whose normalised name equals the normalised model.
//
// Anything else is unknown; the error lists a few job types that start the
// same way, to help the user.
type ModelResolver struct {
	byNorm  map[string][]string
	aliases map[string]string
	norms   []string
}

// NewModelResolver builds a resolver over the matrix's job types and the
// configured aliases (user name -> job type). Job types users named (models
// no matrix knew, see UnknownModelType) are left out: a name resolves to
// one of them only through UnknownModelType, so none can make another name
// ambiguous or be suggested to another user.
func NewModelResolver(jobTypes []string, aliases map[string]string) *ModelResolver {
	r := &ModelResolver{byNorm: map[string][]string{}, aliases: map[string]string{}}
	for _, jt := range jobTypes {
		n := NormalizeModel(jt)
		if n == "" || userNamed(jt) {
			continue
		}
		if _, ok := r.byNorm[n]; !ok {
			r.norms = append(r.norms, n)
		}
		r.byNorm[n] = append(r.byNorm[n], jt)
	}
	sort.Strings(r.norms)
	for from, to := range aliases {
		r.aliases[NormalizeModel(from)] = to
	}
	return r
}

// Resolve returns the job type for model.
func (r *ModelResolver) Resolve(model string) (string, error) {
	n := NormalizeModel(model)
	if n == "" {
		return "", fmt.Errorf("model %q has no letters or digits", Clip(model))
	}
	if to, ok := r.aliases[n]; ok {
		if jts := r.byNorm[NormalizeModel(to)]; len(jts) == 1 {
			return jts[0], nil
		}
		return "", fmt.Errorf("model %q: its alias %q is not a job type of the matrix", Clip(model), to)
	}
	switch jts := r.byNorm[n]; len(jts) {
	case 1:
		return jts[0], nil
	case 0:
	default:
		return "", ambiguousError(fmt.Sprintf("model %q matches several job types: %s", Clip(model), strings.Join(jts, "; ")))
	}
	var near []string
	starts := 0 // job types whose name starts with the model's
	for _, cand := range r.norms {
		if strings.HasPrefix(cand, n) {
			starts++
		}
		if strings.HasPrefix(cand, n) || (len(n) >= 3 && strings.HasPrefix(n, cand)) {
			near = append(near, r.byNorm[cand][0])
		}
	}
	if len(near) == 0 {
		return "", fmt.Errorf("unknown model %q", Clip(model))
	}
	total := len(near)
	more := ""
	if len(near) > 4 {
		more = fmt.Sprintf(" and %d more", len(near)-4)
		near = near[:4]
	}
	if starts > 1 && starts == total {
		// Not unknown: several job types start with it (resnet50 names
		// ResNet-50 at four batch sizes).
		return "", ambiguousError(fmt.Sprintf("model %q is ambiguous: %d job types start with it (%s%s); write one of them in model=, or map it in [models] aliases",
			Clip(model), total, strings.Join(near, "; "), more))
	}
	return "", fmt.Errorf("unknown model %q (did you mean %s%s?)", Clip(model), strings.Join(near, "; "), more)
}

// unknownPrefix bounds the readable part of an UnknownModelType.
const unknownPrefix = 24

// reUnknownType is the form of UnknownModelType's names.
var reUnknownType = regexp.MustCompile(`^[a-z0-9]{1,24}~[0-9a-f]{16}$`)

// UnknownModelType is the job type hadar-slurmd gives a model no matrix
// knows (planned with the cross-model prior, then learned under that
// name): the start of the normalised name, "~", and 16 hex digits of the
// SHA-256 of the whole normalised name ("mynetv2~1f0e..."). Two models
// share a job type only if their names normalise alike, however long; and
// since a resolver never matches these names (IsUnknownModelType), a
// user's model cannot make a job type of the matrix unknown or ambiguous
// for anyone. "" if the name has no letters or digits.
func UnknownModelType(model string) string {
	n := NormalizeModel(model)
	if n == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(n))
	prefix := n
	if len(prefix) > unknownPrefix {
		prefix = prefix[:unknownPrefix]
	}
	return prefix + "~" + hex.EncodeToString(sum[:8])
}

// IsUnknownModelType reports whether jobType is a name UnknownModelType
// makes.
func IsUnknownModelType(jobType string) bool { return reUnknownType.MatchString(jobType) }

// userNamed reports whether jobType was named by a user rather than by a
// matrix: UnknownModelType's names, and the clipped names ("...") older
// hadar-slurmd versions gave unknown models.
func userNamed(jobType string) bool {
	return IsUnknownModelType(jobType) || strings.HasSuffix(jobType, "...")
}
