// Package config is hadar.toml: the Config hadar-slurmd runs with (and
// `hadar simulate --config`, `hadar plan` and `hadar explain` read), its
// defaults (Default), strict loading (Load, Parse: an unknown key or a bad
// value is an ErrInvalid naming the file and line) and validation, and its
// reference: Keys lists every key through the toml tags and Format writes
// a config back as TOML. The doc comments of config.go are the
// documentation: internal/manpage turns them into docs/config.md and
// hadar.toml(5), and their tests fail when the two disagree.
package config
