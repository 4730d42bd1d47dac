// Package config is Worldgate's one configuration loader: standard library flags, each with a
// WORLDGATE_* environment variable equivalent. A flag given on the command line wins over the
// environment, which wins over the default. It knows nothing of any particular service.
package config

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Prefix is the environment prefix of every Worldgate setting.
const Prefix = "WORLDGATE_"

// EnvName is the environment variable for flag name under prefix: "nats-url" → WORLDGATE_NATS_URL.
func EnvName(prefix, name string) string {
	return prefix + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name))
}

// Parse parses args into fs, then fills every flag not given on the command line from its
// environment variable (see EnvName), if set. An invalid environment value is an error naming
// the variable. The flag set's usage lists the variables.
func Parse(fs *flag.FlagSet, args []string, prefix string) error {
	return parse(fs, args, prefix, os.LookupEnv)
}

func parse(fs *flag.FlagSet, args []string, prefix string, lookup func(string) (string, bool)) error {
	if prefix == "" {
		prefix = Prefix
	}
	prev := fs.Usage
	fs.Usage = func() {
		if prev != nil {
			prev()
		} else {
			fmt.Fprintf(fs.Output(), "Usage of %s:\n", fs.Name())
			fs.PrintDefaults()
		}
		PrintEnv(fs.Output(), fs, prefix)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || given[f.Name] {
			return
		}
		env := EnvName(prefix, f.Name)
		if v, ok := lookup(env); ok {
			if serr := fs.Set(f.Name, v); serr != nil {
				err = fmt.Errorf("environment variable %s=%q is not a valid value for -%s: %w", env, v, f.Name, serr)
			}
		}
	})
	return err
}

// PrintEnv lists the environment variable of every flag in fs.
func PrintEnv(w io.Writer, fs *flag.FlagSet, prefix string) {
	fmt.Fprintln(w, "\nEvery flag can also be set by environment:")
	fs.VisitAll(func(f *flag.Flag) {
		fmt.Fprintf(w, "  %s  (-%s)\n", EnvName(prefix, f.Name), f.Name)
	})
}
