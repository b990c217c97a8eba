package profiles

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/hadar-sched/hadar/optimizer"
)

// DefaultMatrix is the matrix used when none is named.
const DefaultMatrix = "gavel"

// builtinMatrices are the embedded matrices by name.
var builtinMatrices = map[string]func() optimizer.Throughputs{
	"gavel":       Default,
	"lambda":      Lambda,
	"lambda-fp16": LambdaFP16,
}

// MatrixNames returns the names of the embedded matrices, sorted.
func MatrixNames() []string { return []string{"gavel", "lambda", "lambda-fp16"} }

// MatrixUsage is a one-line description of what Matrix accepts, for flag
// and config help texts.
const MatrixUsage = "gavel (Gavel's k80/p100/v100 matrix, the default), lambda (Lambda's fp32 PyTorch benchmark on 11 current GPU types), lambda-fp16, or a file in Gavel's JSON format"

// ErrUnknownMatrix reports a matrix name that is neither built in nor a file.
var ErrUnknownMatrix = errors.New("unknown throughput matrix")

// Matrix is the one resolver of a throughput matrix name, used by every
// command and the daemon: "" or "gavel" (Default), "lambda" (Lambda),
// "lambda-fp16" (LambdaFP16), or the path of a file in Gavel's JSON format
// (ParseGavel). Built-in names win over files of the same name; write
// ./gavel to mean a file. The result is a fresh copy.
func Matrix(name string) (optimizer.Throughputs, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = DefaultMatrix
	}
	if f, ok := builtinMatrices[name]; ok {
		return f(), nil
	}
	t, err := LoadGavelFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w %q: not one of %s, and no such file", ErrUnknownMatrix, name, strings.Join(MatrixNames(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("throughput matrix %q: %w", name, err)
	}
	return t, nil
}

// IsBuiltinMatrix reports whether name is an embedded matrix's name (or ""
// for the default).
func IsBuiltinMatrix(name string) bool {
	_, ok := builtinMatrices[strings.TrimSpace(name)]
	return ok || strings.TrimSpace(name) == ""
}
