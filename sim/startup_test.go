package sim

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStartCosts(t *testing.T) {
	for _, tc := range []struct {
		spec    string
		want    StartCosts
		wantErr bool
	}{
		{spec: "60s", want: StartCosts{Other: time.Minute}},
		{spec: " 0s ", want: StartCosts{}},
		{spec: "ResNet-50=250s, *=30s", want: StartCosts{Models: []ModelStartCost{{"resnet50", 250 * time.Second}}, Other: 30 * time.Second}},
		{spec: "bert=2m", want: StartCosts{Models: []ModelStartCost{{"bert", 2 * time.Minute}}}},
		{spec: "soon", wantErr: true},
		{spec: "-1s", wantErr: true},
		{spec: "bert=-1s", wantErr: true},
		{spec: "bert=", wantErr: true},
		{spec: "=1s", wantErr: true},
		{spec: "--=1s", wantErr: true},
		{spec: "bert=1s,BERT=2s", wantErr: true},
		{spec: "*=1s,*=2s", wantErr: true},
		{spec: "bert=1s,,*=2s", wantErr: true},
	} {
		got, err := ParseStartCosts(tc.spec)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: error %v, want error %v", tc.spec, err, tc.wantErr)
			continue
		}
		if diff := cmp.Diff(tc.want, got); !tc.wantErr && diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.spec, diff)
		}
	}
}

// The published default gives each of the matrices' job types the restart
// time of its model in Sia's simulator, and 30 s to the models it lacks.
func TestPublishedStartup(t *testing.T) {
	sc, err := ParseStartCosts(PublishedStartup)
	if err != nil {
		t.Fatal(err)
	}
	for jobType, want := range map[string]time.Duration{
		"ResNet-50 (batch size 64)":       250 * time.Second,
		"resnet50":                        250 * time.Second,
		"ResNet-18 (batch size 256)":      50 * time.Second,
		"Recommendation (batch size 512)": 15 * time.Second,
		"ncf":                             15 * time.Second,
		"bert_large_squad":                120 * time.Second,
		"Transformer (batch size 128)":    30 * time.Second,
		"LM (batch size 10)":              30 * time.Second,
		"CycleGAN":                        30 * time.Second,
		"A3C":                             30 * time.Second,
		"waveglow":                        30 * time.Second,
	} {
		if got := sc.For(jobType); got != want {
			t.Errorf("%s: %s, want %s", jobType, got, want)
		}
	}
	// The longest model that begins the job type wins, in any order.
	nested, err := ParseStartCosts("resnet=1m, resnet50=4m, *=5s")
	if err != nil {
		t.Fatal(err)
	}
	for jobType, want := range map[string]time.Duration{"ResNet-50 (batch size 64)": 4 * time.Minute, "ResNet-18 (batch size 32)": time.Minute, "LM": 5 * time.Second} {
		if got := nested.For(jobType); got != want {
			t.Errorf("resnet=1m, resnet50=4m: %s: %s, want %s", jobType, got, want)
		}
	}
	if got := sc.Plus(time.Second).For("CycleGAN"); got != 31*time.Second {
		t.Errorf("Plus(1s) for CycleGAN: %s, want 31s", got)
	}
}

// A spec that parses is printed back as one that parses to the same costs.
func FuzzParseStartCosts(f *testing.F) {
	for _, s := range []string{PublishedStartup, "60s", "bert=1s", "a=1s,*=0s", "x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		sc, err := ParseStartCosts(spec)
		if err != nil {
			return
		}
		back, err := ParseStartCosts(sc.String())
		if err != nil {
			t.Fatalf("%q printed as %q, which does not parse: %v", spec, sc.String(), err)
		}
		if diff := cmp.Diff(sc, back); diff != "" {
			t.Fatalf("%q printed as %q (-first +again):\n%s", spec, sc.String(), diff)
		}
	})
}
