package profiles

import (
	"bytes"
	_ "embed"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:embed catalog.csv
var catalogCSV []byte

// GPUSpec is one row of the GPU catalogue: the public figures of a GPU
// type, per GPU as Slurm counts them, from the datasheet named in Source.
type GPUSpec struct {
	// Type is the canonical GPU type ("h100", "a100-pcie").
	Type string `json:"type"`
	// Vendor is "nvidia" or "amd".
	Vendor string `json:"vendor"`
	// Name is the product as its vendor names it.
	Name string `json:"name"`
	// FP16TFLOPS is the dense FP16/BF16 tensor (matrix) rate with FP32
	// accumulate, or the plain FP16 rate on GPUs without tensor cores.
	FP16TFLOPS float64 `json:"fp16_tflops"`
	// FP32TFLOPS is the FP32 vector (non-tensor) rate.
	FP32TFLOPS float64 `json:"fp32_tflops"`
	// MemoryGB is the GPU's memory; the prior never gives a model a rate on
	// a type with less memory than it is known to need.
	MemoryGB float64 `json:"memory_gb"`
	// BandwidthGBs is the memory bandwidth in GB/s.
	BandwidthGBs float64 `json:"bandwidth_gbs"`
	// Source names the datasheet the figures come from.
	Source string `json:"source"`
	// Note says which variant the figures are of, where that matters.
	Note string `json:"note,omitempty"`
}

var catalog = sync.OnceValue(func() []GPUSpec {
	specs, err := parseCatalog(bytes.NewReader(catalogCSV))
	if err != nil {
		panic("profiles: embedded GPU catalogue: " + err.Error())
	}
	return specs
})

// Catalog returns the GPU catalogue (embedded catalog.csv), sorted by type.
// The slice is a copy.
func Catalog() []GPUSpec {
	return append([]GPUSpec(nil), catalog()...)
}

// LookupGPU returns the catalogue row of a canonical GPU type (exact name,
// any case).
func LookupGPU(gpuType string) (GPUSpec, bool) {
	gpuType = strings.ToLower(strings.TrimSpace(gpuType))
	specs := catalog()
	i := sort.Search(len(specs), func(i int) bool { return specs[i].Type >= gpuType })
	if i < len(specs) && specs[i].Type == gpuType {
		return specs[i], true
	}
	return GPUSpec{}, false
}

// GPUMemoryGB returns the memory of a canonical GPU type, if the catalogue
// knows it.
func GPUMemoryGB(gpuType string) (float64, bool) {
	s, ok := LookupGPU(gpuType)
	return s.MemoryGB, ok
}

// CatalogTypes returns the canonical types of the catalogue, sorted.
func CatalogTypes() []string {
	specs := catalog()
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.Type
	}
	return out
}

var catalogHeader = []string{"type", "vendor", "name", "fp16_tflops", "fp32_tflops", "memory_gb", "bandwidth_gbs", "source", "note"}

// parseCatalog reads the catalogue CSV: '#' comment lines, then the header
// catalogHeader, then one row per type. Every figure must be a positive
// number and every row must name its source.
func parseCatalog(r io.Reader) ([]GPUSpec, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	cr.FieldsPerRecord = len(catalogHeader)
	recs, err := cr.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("gpu catalogue: %w", err)
	}
	if len(recs) == 0 || strings.Join(recs[0], ",") != strings.Join(catalogHeader, ",") {
		return nil, fmt.Errorf("gpu catalogue: want header %s", strings.Join(catalogHeader, ","))
	}
	seen := map[string]bool{}
	var out []GPUSpec
	for i, rec := range recs[1:] {
		line := i + 2
		s := GPUSpec{Type: rec[0], Vendor: rec[1], Name: rec[2], Source: rec[7], Note: rec[8]}
		if s.Type == "" || s.Type != strings.ToLower(s.Type) || strings.TrimSpace(s.Type) != s.Type {
			return nil, fmt.Errorf("gpu catalogue: row %d: type %q: want a lowercase name", line, s.Type)
		}
		if seen[s.Type] {
			return nil, fmt.Errorf("gpu catalogue: row %d: type %q twice", line, s.Type)
		}
		seen[s.Type] = true
		if s.Name == "" || s.Source == "" {
			return nil, fmt.Errorf("gpu catalogue: %s: empty name or source", s.Type)
		}
		for k, dst := range []*float64{&s.FP16TFLOPS, &s.FP32TFLOPS, &s.MemoryGB, &s.BandwidthGBs} {
			v, err := strconv.ParseFloat(rec[3+k], 64)
			if err != nil || v <= 0 || math.IsInf(v, 0) {
				return nil, fmt.Errorf("gpu catalogue: %s: %s %q: want a positive number", s.Type, catalogHeader[3+k], rec[3+k])
			}
			*dst = v
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out, nil
}
