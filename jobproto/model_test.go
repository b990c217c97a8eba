package jobproto

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// One user's model name, however built, cannot make a job type of the
// matrix ambiguous or unknown for others: the job types of unknown models
// are keyed by a hash of the whole normalised name, and the resolver
// never matches them. The names are hand-written to attack the resolver.
func TestUnknownModelTypesCannotShadow(t *testing.T) {
	matrix := []string{"ResNet-50 (batch size 64)", "ResNet-50 (batch size 32)", "A3C"}
	attacks := []string{
		// 43 bytes: its first 40 normalise to the matrix's resnet50bs64.
		"resnet50-bs64" + strings.Repeat(" ", 27) + "xyz",
		"resnet50-bs64-mine",
		"resnet5",
		"a3c-" + strings.Repeat("a", 60),
		"ResNet-50 (batch size 64)...",
	}
	types := append([]string(nil), matrix...)
	for _, a := range attacks {
		jt := UnknownModelType(a)
		if !IsUnknownModelType(jt) {
			t.Errorf("UnknownModelType(%q) = %q, not of the unknown form", a, jt)
		}
		types = append(types, jt)
	}
	// A name an older hadar-slurmd stored clipped stays out too.
	types = append(types, "resnet50-bs64"+strings.Repeat(" ", 27)+"...")
	r := NewModelResolver(types, nil)
	for in, want := range map[string]string{"resnet50-bs64": "ResNet-50 (batch size 64)", "resnet50-bs32": "ResNet-50 (batch size 32)", "a3c": "A3C"} {
		if got, err := r.Resolve(in); err != nil || got != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	// An unknown name stays unknown (not ambiguous), and no suggestion names
	// another user's model.
	for _, a := range attacks[1:2] {
		_, err := r.Resolve(a)
		if err == nil || errors.Is(err, ErrAmbiguousModel) || strings.Contains(err.Error(), "~") {
			t.Errorf("Resolve(%q): %v; want unknown, suggesting only matrix job types", a, err)
		}
	}
}

func TestUnknownModelType(t *testing.T) {
	long := strings.Repeat("transformer", 5)
	got := map[string]string{}
	for _, name := range []string{"MyNet v2", "mynet-v2", "mynet_v3", long + "-a", long + "-b", "", "---"} {
		got[name] = UnknownModelType(name)
	}
	if got["MyNet v2"] != got["mynet-v2"] || !strings.HasPrefix(got["mynet-v2"], "mynetv2~") {
		t.Errorf("names that normalise alike: %q, %q; want one job type mynetv2~<hash>", got["MyNet v2"], got["mynet-v2"])
	}
	if got["mynet-v2"] == got["mynet_v3"] || got[long+"-a"] == got[long+"-b"] {
		t.Errorf("different names share a job type: %v", got)
	}
	if diff := cmp.Diff([]string{"", ""}, []string{got[""], got["---"]}); diff != "" {
		t.Errorf("names without letters or digits (-want +got):\n%s", diff)
	}
	if n := len(got[long+"-a"]); n != unknownPrefix+1+16 {
		t.Errorf("long name: %q (%d bytes), want %d", got[long+"-a"], n, unknownPrefix+1+16)
	}
}
