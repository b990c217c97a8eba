package jobproto

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestIsTagged(t *testing.T) {
	for comment, want := range map[string]bool{
		"hadar": true, "hadar ": true, "hadar model=x": true,
		"": false, "hadarx": false, " hadar": false, "HADAR": false, "Hadar model=x": false, "hadar\tmodel=x": false,
	} {
		if got := IsTagged(comment); got != want {
			t.Errorf("IsTagged(%q) = %v, want %v", comment, got, want)
		}
	}
}

func TestParseTag(t *testing.T) {
	tests := []struct {
		name    string
		comment string
		want    Tag
		wantErr string // substring; "" for success
	}{
		{"bare", "hadar", Tag{}, ""},
		{"trailing space", "hadar ", Tag{}, ""},
		{"model", "hadar model=resnet50-bs64", Tag{Model: "resnet50-bs64"}, ""},
		{"all keys", "hadar model=lm-bs20 steps=1000 copies=3 weight=0.25", Tag{Model: "lm-bs20", Steps: 1000, Copies: 3, Weight: 0.25}, ""},
		{"weight one", "hadar weight=1", Tag{Weight: 1}, ""},
		// Users may only lower their weight (security review H2).
		{"weight above one", "hadar weight=1.5", Tag{}, "only lower"},
		{"huge weight", "hadar weight=1e15", Tag{}, "weight"},
		{"extra spaces", "hadar   steps=10    model=a3c ", Tag{Model: "a3c", Steps: 10}, ""},
		{"quoted model", `hadar model="ResNet-50 (batch size 64)" steps=5e3`, Tag{Model: "ResNet-50 (batch size 64)", Steps: 5000}, ""},
		{"negative steps", "hadar steps=-5", Tag{}, "steps"},
		{"zero steps", "hadar steps=0", Tag{}, "steps"},
		{"nan steps", "hadar steps=NaN", Tag{}, "steps"},
		{"inf weight", "hadar weight=Inf", Tag{}, "weight"},
		{"copies too many", "hadar copies=999", Tag{}, "copies"},
		{"copies zero", "hadar copies=0", Tag{}, "from 1 to 64"},
		{"copies float", "hadar copies=1.5", Tag{}, "copies"},
		{"unknown key", "hadar gpu=v100", Tag{}, "unknown key"},
		{"duplicate", "hadar steps=1 steps=2", Tag{}, "given twice"},
		{"no equals", "hadar resnet50", Tag{}, "not key=value"},
		{"empty value", "hadar model=", Tag{}, "empty value"},
		{"unterminated quote", `hadar model="abc`, Tag{}, "unterminated quote"},
		{"quote inside", `hadar model=ab"c`, Tag{}, "quote inside"},
		{"text after quote", `hadar model="a"b`, Tag{}, "after the closing quote"},
		{"newline", "hadar model=a\nsteps=3", Tag{}, "control character"},
		{"bad utf8", "hadar model=\xff", Tag{}, "UTF-8"},
		{"not a tag", "hadarx", Tag{}, "does not start"},
		{"shell metachars are just text", "hadar model=$(rm-rf)", Tag{Model: "$(rm-rf)"}, ""},
		{"long value", "hadar model=" + strings.Repeat("a", 300), Tag{}, "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTag(tt.comment)
			if tt.wantErr != "" {
				var te *TagError
				if !errors.As(err, &te) {
					t.Fatalf("ParseTag(%q) error = %v, want a *TagError", tt.comment, err)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTag(%q) error = %q, want it to mention %q", tt.comment, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTag(%q): %v", tt.comment, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseTag(%q) (-want +got):\n%s", tt.comment, diff)
			}
		})
	}
}

func FuzzParseTag(f *testing.F) {
	for _, s := range []string{"hadar", "hadar model=resnet50 steps=1000", `hadar model="a b" copies=3 weight=0.5`,
		"hadar steps=-5", "hadar copies=999", "hadar x", "hadar model=\xff", "hadar  a=b=c", `hadar model="`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tag, err := ParseTag(s)
		if !IsTagged(s) {
			if err == nil {
				t.Fatalf("ParseTag(%q) accepted a comment that is not a tag", s)
			}
			return
		}
		if err != nil {
			var te *TagError
			if !errors.As(err, &te) {
				t.Fatalf("ParseTag(%q) error %v is not a *TagError", s, err)
			}
			if !utf8.ValidString(err.Error()) && utf8.ValidString(s) {
				t.Fatalf("error message is not UTF-8: %q", err.Error())
			}
			return
		}
		if tag.Steps < 0 || tag.Weight < 0 || tag.Copies < 0 || tag.Copies > MaxCopies {
			t.Fatalf("ParseTag(%q) = %+v: out of range", s, tag)
		}
		if strings.ContainsAny(tag.Model, "\n\r\x00") {
			t.Fatalf("ParseTag(%q): model holds a control character", s)
		}
	})
}

func TestNormalizeModel(t *testing.T) {
	for in, want := range map[string]string{
		"ResNet-50 (batch size 64)": "resnet50bs64",
		"resnet50-bs64":             "resnet50bs64",
		"resnet-50_bs64":            "resnet50bs64",
		"RESNET50_BATCH_SIZE_64":    "resnet50bs64",
		"A3C":                       "a3c",
		"LM (batch size 5)":         "lmbs5",
		"":                          "",
	} {
		if got := NormalizeModel(in); got != want {
			t.Errorf("NormalizeModel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestModelResolver(t *testing.T) {
	r := NewModelResolver([]string{"ResNet-50 (batch size 64)", "ResNet-50 (batch size 32)", "A3C", "LM (batch size 5)", "LM (batch size 50)"},
		map[string]string{"resnet50": "ResNet-50 (batch size 64)", "broken": "No Such Model"})
	tests := []struct {
		in, want, wantErr string
	}{
		{"resnet50-bs64", "ResNet-50 (batch size 64)", ""},
		{"ResNet-50 (batch size 32)", "ResNet-50 (batch size 32)", ""},
		{"RESNET50", "ResNet-50 (batch size 64)", ""}, // alias, normalised
		{"a3c", "A3C", ""},
		{"lm-bs5", "LM (batch size 5)", ""},
		{"resnet", "", "is ambiguous: 2 job types start with it"},
		{"resnet50-bs6", "", "did you mean"},
		{"bert", "", "unknown model"},
		{"broken", "", "not a job type"},
		{"---", "", "no letters"},
	}
	for _, tt := range tests {
		got, err := r.Resolve(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Resolve(%q) = %q, %v; want error with %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
