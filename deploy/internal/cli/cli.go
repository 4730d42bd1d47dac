// Package cli reads the real flag sets of Worldgate's programs from their `-h` output, so the
// deployment files (Dockerfile, compose, Kubernetes) and docs/configuration.md are checked
// against the programs themselves rather than against a copy that can rot. It builds the
// binaries with the go command of the workspace; it knows nothing of any one service.
package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Flag is one flag as `-h` describes it.
type Flag struct {
	Name    string // without the dash
	Type    string // string, int, duration, float, bool, …
	Default string // as printed: strings keep their quotes; "" when the zero value
	Usage   string
	Env     string // the environment variable that sets it
}

// Command is one program (or one subcommand of the worldgate CLI) and its flags.
type Command struct {
	Name    string // "gate", "worldgate provision"
	Summary string // a worldgate subcommand's one-line summary
	Flags   []Flag
}

// Lookup returns the flag named name.
func (c Command) Lookup(name string) (Flag, bool) {
	for _, f := range c.Flags {
		if f.Name == name {
			return f, true
		}
	}
	return Flag{}, false
}

// LookupEnv returns the flag set by the environment variable env.
func (c Command) LookupEnv(env string) (Flag, bool) {
	for _, f := range c.Flags {
		if f.Env == env {
			return f, true
		}
	}
	return Flag{}, false
}

// Build compiles the main packages (import paths) into dir with the go command, from workdir
// (a directory inside the workspace). It returns the binaries' paths by the package's last
// path element.
func Build(ctx context.Context, workdir, dir string, pkgs ...string) (map[string]string, error) {
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = workdir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	bins := map[string]string{}
	for _, p := range pkgs {
		name := p[strings.LastIndex(p, "/")+1:]
		bins[name] = filepath.Join(dir, name)
	}
	return bins, nil
}

// Help runs `bin args... -h` and parses what it prints. Programs differ in the exit status of
// -h (flag.ExitOnError exits 0, a returned flag.ErrHelp exits 1), so the status is ignored;
// output without a single flag is an error.
func Help(ctx context.Context, name, bin string, args ...string) (Command, error) {
	cmd := exec.CommandContext(ctx, bin, append(args, "-h")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"} // no WORLDGATE_* from the caller's environment
	out, _ := cmd.CombinedOutput()
	flags, err := Parse(out)
	if err != nil {
		return Command{}, fmt.Errorf("%s -h: %w", name, err)
	}
	return Command{Name: name, Flags: flags}, nil
}

var (
	flagLine = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9._-]*)(?: (\S+))?$`)
	envLine  = regexp.MustCompile(`^  ([A-Z][A-Z0-9_]*)  \(-([A-Za-z0-9._-]+)\)$`)
	deflt    = regexp.MustCompile(` \(default (.*)\)$`)
)

// Parse reads the output of flag.PrintDefaults followed by shared/config's list of environment
// variables ("Every flag can also be set by environment:").
func Parse(out []byte) ([]Flag, error) {
	var flags []Flag
	index := map[string]int{}
	inEnv := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Every flag can also be set by environment"):
			inEnv = true
		case inEnv:
			if m := envLine.FindStringSubmatch(line); m != nil {
				i, ok := index[m[2]]
				if !ok {
					return nil, fmt.Errorf("environment variable %s names -%s, which is not a flag", m[1], m[2])
				}
				flags[i].Env = m[1]
			}
		case flagLine.MatchString(line):
			m := flagLine.FindStringSubmatch(line)
			typ := m[2]
			if typ == "" {
				typ = "bool"
			}
			index[m[1]] = len(flags)
			flags = append(flags, Flag{Name: m[1], Type: typ})
		case strings.HasPrefix(line, "    \t") && len(flags) > 0:
			f := &flags[len(flags)-1]
			text := strings.TrimPrefix(line, "    \t")
			if f.Usage != "" {
				f.Usage += " "
			}
			f.Usage += text
		}
	}
	if len(flags) == 0 {
		return nil, fmt.Errorf("no flags found in:\n%s", out)
	}
	for i := range flags {
		if m := deflt.FindStringSubmatch(flags[i].Usage); m != nil {
			flags[i].Default = m[1]
			flags[i].Usage = strings.TrimSuffix(flags[i].Usage, m[0])
		}
	}
	return flags, nil
}

var subcommandLine = regexp.MustCompile(`^  ([a-z][a-z0-9-]*) +(\S.*)$`)

// Subcommands runs `bin -h` of a program with subcommands (worldgate) and returns them from its
// "Commands:" list, with their summaries.
func Subcommands(ctx context.Context, bin string) ([]Command, error) {
	cmd := exec.CommandContext(ctx, bin, "-h")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, _ := cmd.CombinedOutput()
	var subs []Command
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Commands:"):
			in = true
		case in && line == "":
			in = len(subs) == 0
		case in:
			if m := subcommandLine.FindStringSubmatch(line); m != nil {
				subs = append(subs, Command{Name: m[1], Summary: m[2]})
			}
		}
	}
	if len(subs) == 0 {
		return nil, fmt.Errorf("%s -h lists no commands:\n%s", bin, out)
	}
	return subs, nil
}
