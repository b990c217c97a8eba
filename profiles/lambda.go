package profiles

import (
	"bytes"
	"embed"
	"encoding/csv"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/hadar-sched/hadar/optimizer"
)

// lambdaFS holds Lambda's PyTorch training benchmark, copied unchanged
// (lambda/SOURCE.md names the repository and commit).
//
//go:embed lambda/*.csv
var lambdaFS embed.FS

// lambdaReferenceRow is the row whose batch sizes define one step of each
// model: Lambda ran each GPU with the largest batch that fits, so dividing a
// row by its own batch size would make a step mean different work on
// different GPUs. The 1-GPU V100 is the smallest memory in the data, so
// its batch is a step every GPU can take.
const lambdaReferenceRow = "LambdaCloud V100 16GB"

// lambdaVendors are the server vendors Lambda prefixes to a GPU's name.
var lambdaVendors = []string{"LambdaCloud", "DellTexas", "Dell", "SMC", "1CC", "RAIDZ1"}

// lambdaProducts maps Lambda's GPU names (vendor and GPU count removed) to
// canonical GPU types. Both A100 PCIe cards are one type, a100-pcie.
var lambdaProducts = map[string]string{
	"Quadro RTX 8000":     "rtx8000",
	"V100 16GB":           "v100",
	"RTX 3090":            "rtx3090",
	"RTX 4090":            "rtx4090",
	"A10":                 "a10",
	"A100 40GB PCIe":      "a100-pcie",
	"A100 80GB PCIe":      "a100-pcie",
	"A100 80GB SXM4":      "a100",
	"RTX 6000 Ada":        "rtx6000ada",
	"RTX A6000":           "rtxa6000",
	"H100 80GB PCIe Gen5": "h100-pcie",
	"H100 80GB SXM5":      "h100",
}

// lambdaMaxScaling bounds a multi-GPU run's speed-up over one GPU of the
// same type: more than 2x the GPU count is not data parallelism but a broken
// measurement (Lambda's vendor rows report NCF 4- and 8-GPU throughputs
// 150-340x their 1-GPU rate, while every other row stays below 1.5x the GPU
// count). Such cells are dropped like zeros.
const lambdaMaxScaling = 2.0

var lambdaCount = regexp.MustCompile(`^([0-9]+)x\s*`)

// lambdaRow is one row of Lambda's throughput CSV, its name taken apart.
type lambdaRow struct {
	vendor, product, gpuType string
	gpus                     int
	rates                    map[string]float64 // model -> samples/s; zeros left out
}

// ParseLambda converts Lambda's training throughput and batch size CSVs
// (same rows and columns, as in lambdal/deeplearning-benchmark's pytorch/
// folder) into a matrix of steps/s of the whole job, one step being one
// batch of the 1-GPU V100 run (lambdaReferenceRow). Job types are the CSV's
// model columns. A zero is a missing run and gives no cell; a multi-GPU
// throughput more than lambdaMaxScaling x the GPU count times the 1-GPU
// rate of its GPU type is dropped too; rows of one canonical type (several
// vendors' servers, or the two A100 PCIe cards) merge into the median of
// their cells.
func ParseLambda(throughput, batch io.Reader) (optimizer.Throughputs, error) {
	thr, models, err := readLambdaCSV(throughput)
	if err != nil {
		return nil, fmt.Errorf("lambda throughput: %w", err)
	}
	bs, bsModels, err := readLambdaCSV(batch)
	if err != nil {
		return nil, fmt.Errorf("lambda batch sizes: %w", err)
	}
	if strings.Join(models, ",") != strings.Join(bsModels, ",") {
		return nil, fmt.Errorf("lambda: the throughput and batch size files have different models")
	}
	var ref map[string]float64
	for _, r := range bs {
		if r.vendor+" "+r.product == lambdaReferenceRow && r.gpus == 1 {
			ref = r.rates
		}
	}
	for _, m := range models {
		if ref[m] <= 0 {
			return nil, fmt.Errorf("lambda: no 1-GPU batch size of %s on %s", m, lambdaReferenceRow)
		}
	}
	// cell -> the vendors' steps/s.
	type cell struct {
		model, gpuType string
		gpus           int
	}
	values := map[cell][]float64{}
	rowOne := map[string]map[string]float64{} // vendor+product -> model -> 1-GPU steps/s
	for _, r := range thr {
		if r.gpus != 1 {
			continue
		}
		k := r.vendor + "|" + r.product
		rowOne[k] = map[string]float64{}
		for m, x := range r.rates {
			rowOne[k][m] = x / ref[m]
			values[cell{m, r.gpuType, 1}] = append(values[cell{m, r.gpuType, 1}], x/ref[m])
		}
	}
	typeOne := map[cell]float64{}
	for c, xs := range values {
		typeOne[c] = median(xs)
	}
	for _, r := range thr {
		if r.gpus == 1 {
			continue
		}
		for m, x := range r.rates {
			x /= ref[m]
			one, ok := rowOne[r.vendor+"|"+r.product][m]
			if !ok {
				one = typeOne[cell{m, r.gpuType, 1}]
			}
			if one > 0 && x > lambdaMaxScaling*float64(r.gpus)*one {
				continue
			}
			values[cell{m, r.gpuType, r.gpus}] = append(values[cell{m, r.gpuType, r.gpus}], x)
		}
	}
	out := optimizer.Throughputs{}
	for c, xs := range values {
		out.Set(c.model, c.gpuType, c.gpus, median(xs))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("lambda: no rates")
	}
	return out, nil
}

// readLambdaCSV reads one of Lambda's CSVs: name_gpu, num_gpu, watt, price,
// then one column per model.
func readLambdaCSV(r io.Reader) ([]lambdaRow, []string, error) {
	recs, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, nil, err
	}
	const first = 4
	if len(recs) < 2 || len(recs[0]) <= first || recs[0][0] != "name_gpu" || recs[0][1] != "num_gpu" {
		return nil, nil, fmt.Errorf("want a header name_gpu,num_gpu,watt,price,<models...>")
	}
	models := recs[0][first:]
	var out []lambdaRow
	for i, rec := range recs[1:] {
		name := strings.TrimSpace(rec[0])
		row := lambdaRow{rates: map[string]float64{}}
		n, err := strconv.ParseFloat(rec[1], 64)
		if err != nil || n < 1 || n != float64(int(n)) {
			return nil, nil, fmt.Errorf("row %d (%s): num_gpu %q", i+2, name, rec[1])
		}
		row.gpus = int(n)
		row.vendor, row.product = splitLambdaName(name)
		gt, ok := lambdaProducts[row.product]
		if !ok {
			return nil, nil, fmt.Errorf("row %d: GPU %q (from %q) has no canonical type", i+2, row.product, name)
		}
		row.gpuType = gt
		for k, m := range models {
			x, err := strconv.ParseFloat(rec[first+k], 64)
			if err != nil || x < 0 {
				return nil, nil, fmt.Errorf("row %d (%s): %s %q: want a number >= 0", i+2, name, m, rec[first+k])
			}
			if x > 0 {
				row.rates[m] = x
			}
		}
		out = append(out, row)
	}
	return out, models, nil
}

// splitLambdaName takes "Dell 4x H100 80GB SXM5" apart into the vendor
// ("Dell") and the product ("H100 80GB SXM5"); the GPU count is in num_gpu.
func splitLambdaName(name string) (vendor, product string) {
	for _, v := range lambdaVendors {
		if rest, ok := strings.CutPrefix(name, v+" "); ok {
			vendor, name = v, rest
			break
		}
	}
	name = lambdaCount.ReplaceAllString(name, "")
	return vendor, strings.TrimSpace(name)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func loadLambda(precision string) (optimizer.Throughputs, error) {
	thr, err := lambdaFS.ReadFile("lambda/pytorch-train-throughput-" + precision + ".csv")
	if err != nil {
		return nil, err
	}
	bs, err := lambdaFS.ReadFile("lambda/pytorch-train-bs-" + precision + ".csv")
	if err != nil {
		return nil, err
	}
	return ParseLambda(bytes.NewReader(thr), bytes.NewReader(bs))
}

var lambdaFP32 = sync.OnceValue(func() optimizer.Throughputs { return mustLambda("fp32") })
var lambdaFP16 = sync.OnceValue(func() optimizer.Throughputs { return mustLambda("fp16") })

func mustLambda(precision string) optimizer.Throughputs {
	t, err := loadLambda(precision)
	if err != nil {
		panic("profiles: embedded Lambda matrix (" + precision + "): " + err.Error())
	}
	return t
}

// Lambda returns Lambda's fp32 PyTorch training matrix (see ParseLambda),
// embedded in the binary: 10 models on 11 current GPU types. Each call
// returns a fresh copy.
func Lambda() optimizer.Throughputs { return clone(lambdaFP32()) }

// LambdaFP16 is Lambda with the mixed-precision (fp16) runs.
func LambdaFP16() optimizer.Throughputs { return clone(lambdaFP16()) }
